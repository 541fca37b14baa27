"""Fixed-shape passes (bita/runtime/padded.py) on a CPU, where they run eagerly: the path a CUDA graph
replays (padding to row buckets, preallocated buffers, slot-tensor cache writes, attention over the
whole buffer with the query groups folded into rows) gives the lean forward's hidden states and
lossless decoding; a stand-in recorder counts when graphs would be recorded. Recording and
replaying CUDA graphs themselves needs a CUDA device and is not tested here."""

import time
import warnings

import pytest
import torch
from conftest import assert_lossless, random_prompts, tiny_model

from bita.decode.autoregressive import ar_steps
from bita.decode.hf_reference import hf_generate
from bita.decode.step import Chains, Decoding, bita_steps, new_cache
from bita.decode.stopping import StopCondition
from bita.drafts.tree import parse_tree_spec
from bita.model.adapter import BitaAdapter
from bita.runtime import build
from bita.runtime.invariance import Invariance, probe_row_invariance
from bita.runtime.lean_llama import LEAN_TYPES, LeanLlama
from bita.runtime.padded import (
    FIXED_TILES,
    ROW_BUCKETS,
    TRITON_LAYERS,
    Agreement,
    PaddedLean,
    Recorded,
    compare_with_transformers,
    one_shape,
)
from bita.runtime.runtime import Runtime
from bita.runtime.static_kv import StaticKV
from bita.runtime.token_rows import TokenRows
from bita.serve.race import race


def padded_runtime(arch: str, graphs: bool = False, **capture) -> Runtime:
    model = tiny_model(arch)
    return Runtime(model, PaddedLean(LeanLlama(model), graphs=graphs, **capture))


@pytest.mark.parametrize("arch", LEAN_TYPES)
def test_padded_passes_give_the_lean_forwards_hidden_states(arch):
    """Passes of 1..20 rows (padded to 1..32), some past the 256-slot buffer so that it grows, and past
    the last bucket (run as passes of its rows, one after the other)."""
    model = tiny_model(arch)
    lean, padded = LeanLlama(model), PaddedLean(LeanLlama(model), graphs=False)
    caches = lean.new_cache(), padded.new_cache()
    generator = torch.Generator().manual_seed(3)
    cached = 0
    for rows in (120, 1, 3, 20, 7, 128, 2, 300):
        embeds = model.get_input_embeddings()(torch.randint(3, 500, (rows,), generator=generator))
        new = (torch.rand(rows, rows, generator=generator) < 0.6).tril() | torch.eye(rows, dtype=torch.bool)
        allowed = torch.cat([torch.ones(rows, cached, dtype=torch.bool), new], 1)
        allowed[:, 0] = True  # as every token of a pass: the lean forward attends them exactly
        positions = torch.arange(cached, cached + rows)
        expected = lean.forward(caches[0], embeds, positions, allowed, rows)
        torch.testing.assert_close(padded.forward(caches[1], embeds, positions, allowed), expected)
        cached += rows
    assert caches[1].length == cached and caches[1].capacity > 256
    assert {bucket for _, bucket in caches[1].recorded} <= set(ROW_BUCKETS)


@pytest.mark.parametrize("spec", ["efficient:3,2,2", "chain:1"])
@pytest.mark.parametrize("arch", LEAN_TYPES)
def test_bita_and_our_ar_loop_on_padded_passes_equal_hf_generate(arch, spec, one_thread):
    assert_lossless(padded_runtime(arch), spec, random_prompts(2, seed=5))


class OnCuda(LeanLlama):
    """What the build sees on a GPU (its device faked; the tests replace every pass it would run there)."""

    def __init__(self, *args):
        super().__init__(*args)
        self.device = torch.device("cuda")


def test_the_load_time_check_compares_every_bucket_row_by_row_and_catches_a_wrong_forward(monkeypatch):
    """Every bucket, past a growth of the buffer; a forward with a wrong rotary is caught; on a GPU the
    runtime's build would then say so and keep transformers' path."""
    model = tiny_model("llama")
    padded = PaddedLean(LeanLlama(model), graphs=False)
    agreement = compare_with_transformers(model, padded)
    assert agreement.within(1e-4) and agreement.rows == 12 + sum(ROW_BUCKETS) and agreement.worst_relative_l2 < 1e-5
    padded.lean.inv_freq = padded.lean.inv_freq * 1.5  # the lean forward's rotary, not the model's,
    padded.lean.cos, padded.lean.sin = padded.lean.cos[:0], padded.lean.sin[:0]  # its table made again from it
    wrong = compare_with_transformers(model, padded)
    assert not wrong.within(1e-4) and wrong.worst_relative_l2 > 1e-3
    half = tiny_model("llama").to(torch.bfloat16)  # in bf16 the median row is judged: a wrong rotary is far off
    padded = PaddedLean(LeanLlama(half), graphs=False)
    assert compare_with_transformers(half, padded).within(build.HALF_TOLERANCE, half=True)
    padded.lean.inv_freq = padded.lean.inv_freq * 1.5
    padded.lean.cos, padded.lean.sin = padded.lean.cos[:0], padded.lean.sin[:0]
    wrong = compare_with_transformers(half, padded)
    assert not wrong.within(build.HALF_TOLERANCE, half=True) and wrong.median_relative_l2 > 0.5

    monkeypatch.setattr(build, "LeanLlama", OnCuda)
    monkeypatch.setattr(build, "compare_with_transformers", lambda *args: wrong)
    with pytest.warns(UserWarning) as caught:  # the row-invariant passes (two ways), then the fastest shapes (two)
        assert build.prepare(model).forward.kind == "transformers+exact"
    assert [str(w.message).split("): ")[-1] for w in caught] == [
        "passed over", "passed over", "passed over", "decoding runs transformers' path, slower"]
    assert all("disagree with transformers' forward" in str(w.message) for w in caught)

    def triton_kernels_fail(model, forward):  # Triton kernels that do not build on a GPU they never ran on
        if forward.way.layer_kernels:
            raise RuntimeError("no kernel")
        return agreement
    monkeypatch.setattr(build, "compare_with_transformers", triton_kernels_fail)
    with pytest.warns(UserWarning) as caught:
        assert build.prepare(model).forward.kind == "lean+graphs"
    assert [str(w.message).split(" failed on this GPU ")[-1] for w in caught] == [
        "(RuntimeError('no kernel')): passed over"] * 3


def test_a_gpu_runs_the_quickest_row_invariant_passes_the_probe_proves(monkeypatch):
    """On a GPU (its device faked; no pass runs) every candidate agrees with transformers' forward; the probe
    decides which may run, their measured passes which does (timed only where two may): the fastest shapes only
    where no row-invariant passes may, saying why of each passed over."""
    model = tiny_model("llama")
    holds = Invariance(rows=10, differing=0, worst=0.0, by_pass={"2": 0})
    fails = Invariance(rows=10, differing=2, worst=0.5, by_pass={"2": 2})
    monkeypatch.setattr(build, "LeanLlama", OnCuda)
    monkeypatch.setattr(build, "compare_with_transformers", lambda *args: Agreement(0.0, 0.0, 0, 12))
    tiles, one_shape = "lean+graphs+triton-linears", "lean+graphs+invariant64"
    h100 = {tiles: {"1 rows": 5.7, "8 rows": 5.75}, one_shape: {"1 rows": 1.94, "8 rows": 2.14}}
    for verdicts, milliseconds, kind, warned in (({}, h100, one_shape, 0),
                                                 ({}, {tiles: {"1 rows": 1.0}, one_shape: {"1 rows": 2.0}}, tiles, 0),
                                                 ({tiles: fails}, {}, one_shape, 1),
                                                 ({tiles: fails, one_shape: fails}, {}, "lean+graphs+triton-layers",
                                                  2)):
        monkeypatch.setattr(build, "checked_invariance", lambda runtime, path: verdicts.get(  # noqa: B023
            runtime.forward.kind, holds))
        monkeypatch.setattr(build, "checked_pass_milliseconds", lambda runtime, path: milliseconds[  # noqa: B023
            runtime.forward.kind])
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            assert build.prepare(model).forward.kind == kind
        assert len(caught) == warned
        assert all("are not row-invariant: 2 of 10 rows differ" in str(w.message) for w in caught)


def test_a_load_drops_what_the_forwards_it_did_not_take_recorded():
    """Buffers in the pool keep the recorded passes of the chosen forward and of its fastest shapes only."""
    lean = LeanLlama(tiny_model("llama"))
    cache = lean.new_cache(rows=4)
    cache.recorded = {("lean+graphs+triton-linears", 1): "a", ("lean+graphs+invariant64", 64): "b",
                      ("lean+graphs", 1): "c"}
    lean.release(cache)
    lean.caches.forget_recorded(keep={"lean+graphs+invariant64", "lean+graphs"})
    assert lean.new_cache(rows=4) is cache and set(cache.recorded) == {("lean+graphs+invariant64", 64),
                                                                      ("lean+graphs", 1)}


def test_keep_compacts_every_layer_with_one_gather():
    cache = StaticKV(layers=3, kv_heads=2, head_dim=4, dtype=torch.float32, device=torch.device("cpu"))
    cache.reserve(10)
    for layer in range(3):
        rows = torch.arange(80.0).view(1, 2, 10, 4) + 100 * layer
        cache.append(layer, rows, -rows)
    cache.advance(10)
    before = cache.kv.clone()
    cache.keep(4, [0, 2, 5])
    assert cache.get_seq_length() == 7
    assert torch.equal(cache.kv[:, :, :, :4], before[:, :, :, :4])
    assert torch.equal(cache.kv[:, :, :, 4:7], before[:, :, :, [4, 6, 9]])


def test_the_runtime_runs_the_padded_forward_on_its_cache():
    runtime = padded_runtime("qwen2")
    cache = new_cache(runtime)
    embeds = runtime.model.get_input_embeddings()(torch.tensor([5, 6, 7]))
    hidden = runtime.run(cache, embeds, torch.arange(3), torch.ones(3, 3, dtype=torch.bool).tril())
    assert hidden.shape == (3, runtime.model.config.hidden_size) and cache.recorded and cache.length == 3
    assert runtime.buckets == ROW_BUCKETS and runtime.forward.kind == "lean+padded"


RECORD_SECONDS = 0.25  # the stand-in's recording time: far longer than a tiny model's pass


class CountingRecorder:
    """A stand-in for CUDA graphs on a CPU: 'records' a pass by running it, slowly (so a recording
    inside a timed pass would show in its seconds), and replays it by running it again."""

    def __init__(self):
        self.count = 0

    def __call__(self, run):
        self.count += 1
        time.sleep(RECORD_SECONDS)
        output = run()
        return Recorded(lambda: output.copy_(run()), output)


def emitted(records):
    return [token for record in records for token in record.emitted]


def test_graphs_are_recorded_once_per_bucket_per_buffer_and_never_inside_a_timed_pass():
    """Requests one after another (the bench, chat answers) reuse one buffer and its graphs; the race's
    two live requests take two; a request that outgrows its buffer records its graphs again, before
    its first pass. Every output is HF generate's."""
    recorder = CountingRecorder()
    runtime = padded_runtime("llama", graphs=True, capture=recorder)
    model, padded = runtime.model, runtime.forward
    adapter = BitaAdapter.create(model, prompt_tokens=4, mask_tokens=3, seed=1)
    decoding = Decoding(runtime, adapter, parse_tree_spec("efficient:3,2,2"), chains=Chains(ngram_tokens=3))
    records = []

    def both(prompt):
        return ar_steps(runtime, prompt, StopCondition(20)), bita_steps(decoding, prompt, StopCondition(20))

    for prompt in random_prompts(3, seed=7):
        ar, bita = (list(steps) for steps in both(prompt))
        assert emitted(ar) == emitted(bita) == hf_generate(model, prompt, 20, [])
        records += ar + bita
    assert recorder.count == len(ROW_BUCKETS) and padded.lean.caches.made == 1
    prompt = random_prompts(1, seed=8)[0]
    for lanes in race(*zip(("ar", "bita"), both(prompt))):
        pass
    assert all(lane.tokens == hf_generate(model, prompt, 20, []) for lane in lanes)
    records += [record for lane in lanes for record in lane.records]
    assert recorder.count == 2 * len(ROW_BUCKETS) and padded.lean.caches.made == 2
    long_prompt = random_prompts(1, seed=9, low=200, high=201)[0]  # past a 256-slot buffer with its room
    records += list(bita_steps(decoding, long_prompt, StopCondition(20)))
    assert recorder.count == 3 * len(ROW_BUCKETS) and padded.lean.caches.made == 2
    assert max(record.seconds for record in records) < RECORD_SECONDS


def test_padded_attention_folds_the_query_groups_into_rows(monkeypatch):
    """One SDPA call per layer on [1, kv_heads, groups x rows, head_dim] queries under one mask, no
    enable_gqa (which no fused backend takes with a mask); the CPU's lean forward attends ordinary rows
    by exact_attention, no SDPA call."""
    model = tiny_model("llama")  # 4 query heads over 2 key/value heads
    calls = []
    sdpa = torch.nn.functional.scaled_dot_product_attention

    masks = []

    def spy(q, k, v, **kwargs):
        calls.append((tuple(q.shape), tuple(kwargs["attn_mask"].shape), kwargs.get("enable_gqa", False)))
        masks.append(kwargs["attn_mask"])
        return sdpa(q, k, v, **kwargs)

    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", spy)
    embeds = model.get_input_embeddings()(torch.tensor([5, 6, 7]))
    allowed = torch.ones(3, 3, dtype=torch.bool).tril()
    padded = PaddedLean(LeanLlama(model), graphs=False)
    cache = padded.new_cache()
    padded.forward(cache, embeds, torch.arange(3), allowed)  # padded to the 4-row bucket
    layers, head_dim = model.config.num_hidden_layers, padded.lean.head_dim
    assert calls == [((1, 2, 2 * 4, head_dim), (1, 1, 2 * 4, cache.capacity), False)] * layers
    mask = masks[0]  # one additive mask a pass, SDPA's own conversion of the boolean one
    assert all(other is mask for other in masks) and mask.dtype == model.dtype
    seen = torch.zeros(4, cache.capacity, dtype=torch.bool)
    seen[:3, :3], seen[3, 3] = allowed, True  # the padding row sees its own slot
    assert torch.equal(mask[0, 0], torch.where(seen, 0.0, float("-inf")).repeat(2, 1).to(mask.dtype))
    calls.clear()
    lean = LeanLlama(model)
    lean.forward(lean.new_cache(), embeds, torch.arange(3), allowed, 3)
    assert calls == []


def test_a_pass_is_staged_in_one_host_buffer_laid_out_as_the_device_one():
    """Positions, slots, ids and the mask go to the device in one copy: the host mirror's views and the
    device's hold the same pass, the padding rows seeing their own slot only and taking zeros."""
    from bita.runtime.padded import PassBuffers, staged_bytes

    buffers = PassBuffers.make(4, 10, hidden_size=3, dtype=torch.float32, device=torch.device("cpu"))
    assert buffers.staged.numel() == buffers.host.numel() == staged_bytes(4, 10) == 4 * 33 + 4 * 10
    allowed = torch.tensor([[1, 1, 1, 0], [1, 1, 1, 1]], dtype=torch.bool)  # 2 rows over 2 cached slots + 2
    buffers.fill(2, torch.ones(2, 3), torch.tensor([7, 8]), allowed)
    staged = buffers.views()
    assert staged.positions.tolist() == [7, 8, 0, 0] and staged.slots.tolist() == [2, 3, 4, 5]
    assert staged.allowed[:2, :4].equal(allowed) and not staged.allowed[:2, 4:].any()
    assert [row.nonzero().flatten().tolist() for row in staged.allowed[2:]] == [[4], [5]]
    inputs = buffers.inputs(torch.full((9, 3), 5.0))
    assert inputs[:2].eq(1).all() and inputs[2:].eq(0).all()
    assert all(torch.from_numpy(a).equal(b) for a, b in zip(buffers.host_arrays, buffers.views()))


def test_token_rows_are_looked_up_inside_the_pass_and_their_mask_rows_copied_once():
    """A decoding pass sends ids and the adapter's mask embeddings: the pass looks the ids up and takes each group's
    masks in turn from the table, which is copied again only for other mask embeddings or after a pass given as
    embeddings."""
    from bita.runtime.padded import PassBuffers

    buffers = PassBuffers.make(8, 16, hidden_size=2, dtype=torch.float32, device=torch.device("cpu"))
    embedding = torch.arange(20.0).view(10, 2)
    masks = torch.tensor([[-1.0, -1.0], [-2.0, -2.0]])
    rows = TokenRows(torch.tensor([4, 9]), masks, groups=2)  # 2 + 2 x 2 rows, 2 padding
    allowed = torch.ones(6, 6, dtype=torch.bool)
    buffers.fill(0, rows, torch.arange(6), allowed)
    expected = torch.cat([embedding[[4, 9]], masks, masks, torch.zeros(2, 2)])
    assert buffers.inputs(embedding).equal(expected)
    buffers.table[0] = 7.0  # a stale table would show
    buffers.fill(6, rows, torch.arange(6), allowed)
    assert buffers.inputs(embedding)[2].eq(7).all()  # the same masks: not copied again
    buffers.fill(0, TokenRows(torch.tensor([1]), masks.clone(), groups=1), torch.arange(3), allowed[:3, :3])
    assert buffers.inputs(embedding)[:4].equal(torch.cat([embedding[[1]], masks, torch.zeros(1, 2)]))
    buffers.fill(0, torch.ones(1, 2), torch.arange(1), allowed[:1, :1])
    buffers.fill(0, rows, torch.arange(6), allowed)
    assert buffers.inputs(embedding).equal(expected)  # after a pass given as embeddings: copied again


def test_a_pass_waits_for_the_last_copy_of_its_host_buffer_before_rewriting_it():
    """Passes run back to back without a readback (an AR loop reading its tokens at the end, the probe): the
    next pass of a bucket must not overwrite the host buffer while the last copy to the device may still read it
    (on an H100 every row-invariant forward failed the probe by whole logits). Here the copy's event is faked."""
    from bita.runtime.padded import PassBuffers

    buffers = PassBuffers.make(2, 6, hidden_size=3, dtype=torch.float32, device=torch.device("cpu"))
    buffers.fill(0, torch.ones(1, 3), torch.tensor([5]), torch.ones(1, 1, dtype=torch.bool))
    host_positions_when_waited = []

    class CopyInFlight:
        @staticmethod
        def synchronize():
            host_positions_when_waited.append(buffers.host_arrays.positions.tolist())
    buffers.sent = CopyInFlight()
    buffers.fill(1, torch.ones(1, 3), torch.tensor([6]), torch.ones(1, 2, dtype=torch.bool))
    assert host_positions_when_waited == [[5, 0]] and buffers.views().positions.tolist() == [6, 0]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graphs need a CUDA device")
def test_recorded_passes_survive_a_compiled_model_beside_them():
    """Issue 47's crash: graphs recorded first, then a model compiled with torch.compile's CUDA graphs
    (mode "reduce-overhead", as HF generate compiles with a static cache: it clears every cuBLAS workspace
    around its recordings and empties the allocator's cache), then our replays: same hidden states as
    eager passes, no illegal memory access."""
    model = tiny_model("llama").cuda()
    graphed, eager = PaddedLean(LeanLlama(model), graphs=True), PaddedLean(LeanLlama(model), graphs=False)
    caches = graphed.new_cache(), eager.new_cache()
    weight = torch.randn(256, 256, device="cuda")
    compiled = torch.compile(lambda x: torch.relu(x @ weight) @ weight, mode="reduce-overhead")
    for _ in range(3):
        compiled(torch.randn(8, 256, device="cuda"))
    torch.cuda.empty_cache()
    generator = torch.Generator().manual_seed(1)
    for start, rows in ((0, 5), (5, 1), (6, 12)):
        embeds = model.get_input_embeddings()(torch.randint(3, 500, (rows,), generator=generator).cuda())
        allowed = torch.ones(rows, start + rows, dtype=torch.bool, device="cuda").tril(start)
        positions = torch.arange(start, start + rows, device="cuda")
        ours, expected = (side.forward(cache, embeds, positions, allowed) for side, cache in zip((graphed, eager), caches))
        torch.cuda.synchronize()
        torch.testing.assert_close(ours, expected)


INVARIANT_ROWS = 8  # the invariant passes' rows here (Triton's interpreter runs a program per row and key/value head)
# the two ways to row-invariant passes: every pass at one shape (cuBLAS), or fixed-tile Triton linears at row buckets
INVARIANCE = {"one-shape": one_shape(INVARIANT_ROWS), "fixed-tiles": FIXED_TILES}


def invariant_runtime(arch: str, dtype: torch.dtype = torch.float32, way: str = "one-shape", **options) -> Runtime:
    model = tiny_model(arch).to(dtype)
    return Runtime(model, PaddedLean(LeanLlama(model), INVARIANCE[way], **{"graphs": False, **options}))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("way, kind, buckets", [("one-shape", "lean+padded+invariant8", (INVARIANT_ROWS,)),
                                                ("fixed-tiles", "lean+padded+triton-linears", ROW_BUCKETS)])
def test_invariant_passes_are_proved_row_invariant(way, kind, buckets, dtype):
    """The load-time probe (invariance.py) on row-invariant passes: every verification row of its tree passes
    (2 .. 32 rows; past one pass's 8 at one shape) equals our AR loop's, bitwise. Their fastest shapes share their
    lean forward. (On a GPU those fail the probe in bf16; on this CPU they may not.)"""
    runtime = invariant_runtime("llama", dtype, way)
    assert runtime.forward.exact_rows and runtime.buckets == buckets and runtime.forward.kind == kind
    assert probe_row_invariance(runtime).holds
    fastest = runtime.fastest()
    assert fastest.forward.buckets == ROW_BUCKETS and fastest.forward.lean is runtime.forward.lean
    assert fastest.invariance is None and not fastest.forward.exact_rows and fastest.fastest() is fastest
    assert fastest.forward.kind == "lean+padded+triton-layers"  # with the layer kernels the invariant passes run


def test_the_fastest_shapes_with_triton_layer_kernels_agree_with_transformers():
    """The fastest shapes (SDPA, cuBLAS at row buckets) with Triton's layer kernels in place of transformers'
    operations: what a GPU runs where no row-invariant passes are proved, and our AR loop's fastest baseline."""
    model = tiny_model("llama")
    forward = PaddedLean(LeanLlama(model), TRITON_LAYERS, graphs=False)
    assert not forward.exact_rows and forward.buckets == ROW_BUCKETS and "Triton's layer kernels" in forward.describe()
    assert compare_with_transformers(model, forward).within(build.FP32_TOLERANCE)


@pytest.mark.parametrize("arch, way", [(arch, "one-shape") for arch in LEAN_TYPES] + [("qwen2", "fixed-tiles")])
def test_bita_and_our_ar_loop_on_invariant_passes_equal_hf_generate(arch, way, one_thread):
    """Qwen2's QKV bias runs in the fixed-tile kernel's epilogue."""
    assert_lossless(invariant_runtime(arch, way=way), "efficient:3,2,2", random_prompts(1, seed=5), new_tokens=12)


@pytest.mark.parametrize("way", INVARIANCE)
def test_invariant_logits_of_a_row_do_not_depend_on_the_rows_beside_it(way):
    """The LM head runs on the forward's rows, padded (one shape), or on fixed tiles: a row's logits alone are its
    logits among others."""
    runtime = invariant_runtime("qwen2", torch.bfloat16, way)
    hidden = torch.randn(INVARIANT_ROWS + 3, runtime.model.config.hidden_size).to(torch.bfloat16)
    logits = runtime.logits(hidden)
    assert logits.shape == (INVARIANT_ROWS + 3, runtime.model.config.vocab_size)
    assert all(torch.equal(runtime.logits(hidden[row:row + 1])[0], logits[row]) for row in (0, 5, INVARIANT_ROWS + 1))
    torch.testing.assert_close(logits, runtime.model.lm_head(hidden).float(), atol=2e-2, rtol=2e-2)


def test_invariant_graphs_are_recorded_beside_the_fastest_shapes_on_one_buffer():
    """The invariant forward and its fastest shapes share the lean forward's cache pool: each records its own
    passes on a buffer, under its own keys."""
    recorder = CountingRecorder()
    runtime = invariant_runtime("llama", graphs=True, capture=recorder)
    cache = runtime.new_cache(rows=10)
    assert recorder.count == 1 and set(cache.recorded) == {("lean+graphs+invariant8", INVARIANT_ROWS)}
    runtime.release(cache)
    fastest = runtime.fastest()
    assert fastest.new_cache(rows=10) is cache and recorder.count == 1 + len(ROW_BUCKETS)
    assert len(cache.recorded) == 1 + len(ROW_BUCKETS)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="Triton kernels compiled for a GPU need a CUDA device")
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_invariant_graphs_on_a_gpu_pass_the_probe(dtype):
    """The GPU's own kernels: Triton's attention compiled, CUDA graphs, cuBLAS at one shape per pass."""
    model = tiny_model("llama").to("cuda", dtype)
    runtime = Runtime(model, PaddedLean(LeanLlama(model), one_shape(INVARIANT_ROWS)))
    invariance = probe_row_invariance(runtime)
    assert invariance.holds, invariance.describe()
