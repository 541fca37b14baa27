"""Threads for a request on a shared machine: one fewer for each core another process keeps busy, read from the
kernel's counters (a stand-in /proc/stat here), only where the passes are native, whose rows are the same bits on
any thread count (checked here), and the configured count put back after."""

import pytest
import torch
from conftest import planned_tiny, random_prompts

from bita.decode.autoregressive import ar_steps
from bita.decode.stopping import StopCondition
from bita.runtime import native, threads
from bita.runtime.kernel_plan import NATIVE
from bita.runtime.threads import load_aware, others_busy, threads_for

needs_native = pytest.mark.skipif(native.unavailable() is not None, reason=str(native.unavailable()))


def test_one_thread_fewer_for_each_core_others_keep_busy():
    assert threads_for(2, None) == 2 and threads_for(2, 0.3) == 2 and threads_for(2, 0.9) == 1
    assert threads_for(2, 5.0) == 1 and threads_for(8, 2.2) == 6


def test_the_load_of_others_is_what_the_cores_did_less_this_processs_own(monkeypatch):
    """Busy seconds of all cores less this process's CPU seconds, over the wall seconds between two readings."""
    readings = iter([(100.0, 50.0, 10.0), (102.0, 53.4, 11.4), (103.0, 60.0, 11.6), (2000.0, 61.0, 12.0)])
    monkeypatch.setattr(threads, "_reading", lambda: next(readings))
    monkeypatch.setattr(threads, "_last", None)
    assert others_busy(False) is None  # no earlier reading
    assert others_busy(False) == pytest.approx((3.4 - 1.4) / 2)  # one core's worth
    assert others_busy(True) is None  # a container under a CPU quota: /proc/stat counts the host's cores
    assert others_busy(False) is None  # the earlier reading is too old to say anything of now


def test_a_request_runs_on_fewer_threads_beside_a_busy_core_and_puts_them_back(monkeypatch):
    configured = torch.get_num_threads()
    monkeypatch.setattr(threads, "_configured", configured)  # as a load sets it
    monkeypatch.setattr(threads, "others_busy", lambda quota: 1.0)
    with load_aware(True) as count:
        assert count == torch.get_num_threads() == threads_for(configured, 1.0)
    assert torch.get_num_threads() == configured
    with load_aware(False) as count:  # torch's kernels: the configured count stays
        assert count == configured == torch.get_num_threads()


@needs_native
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_native_passes_give_the_same_tokens_and_logits_on_one_thread_and_two(dtype):
    runtime = planned_tiny("llama", dtype, path=NATIVE)
    assert runtime.native_passes
    configured = torch.get_num_threads()
    found = {}
    try:
        for count in (1, 2):
            torch.set_num_threads(count)
            found[count] = [[(record.emitted, record.kind) for record in ar_steps(runtime, prompt, StopCondition(12))]
                            for prompt in random_prompts(3, seed=4)]
            cache = runtime.new_cache(rows=64)
            embeds = runtime.embeddings(torch.tensor(random_prompts(1, seed=5, low=30, high=31)[0]))
            rows = len(embeds)
            hidden = runtime.run(cache, embeds, torch.arange(rows), torch.ones(rows, rows, dtype=torch.bool).tril())
            found[count].append(runtime.logits(hidden))
            runtime.release(cache)
    finally:
        torch.set_num_threads(configured)
    assert found[1][:-1] == found[2][:-1] and torch.equal(found[1][-1], found[2][-1])
