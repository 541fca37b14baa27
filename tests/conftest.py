"""Tiny randomly initialised models of several architectures, for fast tests."""

from __future__ import annotations

import os
import shutil
import tempfile

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # these machines have no hub: fail fast, never hang
# Tests never write the user's cache (~/.cache/bita: a busy test run's timings would become the profile a user's next
# run trusts): one temporary cache a test run, so the real model is still converted and measured once, then removed
TEST_CACHE = os.environ["BITA_CACHE"] = tempfile.mkdtemp(prefix="bita-test-cache-")
# Triton kernels (bita/runtime/logical_attention.py, triton_*.py; bita/decode/walk_kernel.py) run under Triton's
# interpreter where no GPU runs them: set before anything imports triton, and only without CUDA (a GPU machine runs
# them compiled)
if not os.path.exists("/dev/nvidiactl"):
    os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402
import torch  # noqa: E402
from transformers import (AutoModelForCausalLM, Gemma2Config, Gemma3TextConfig, GPT2Config, LlamaConfig,  # noqa: E402
                          MistralConfig, Qwen2Config, Qwen3Config)

from bita.decode.autoregressive import ar_steps  # noqa: E402
from bita.decode.hf_reference import hf_generate  # noqa: E402
from bita.decode.step import Chains, Decoding, bita_steps  # noqa: E402
from bita.decode.stopping import StopCondition  # noqa: E402
from bita.drafts.dynamic import DynamicShape, Reliability  # noqa: E402
from bita.drafts.tree import EMPTY_TREE, parse_tree_spec  # noqa: E402
from bita.model.adapter import BitaAdapter  # noqa: E402
from bita.runtime.runtime import Runtime  # noqa: E402

VOCAB = 512
COMMON = dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
              num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
              bos_token_id=1, eos_token_id=2, pad_token_id=0)

TINY_CONFIGS = {
    "llama": lambda: LlamaConfig(**COMMON),
    "qwen2": lambda: Qwen2Config(**COMMON),
    "mistral": lambda: MistralConfig(**COMMON, sliding_window=None),
    "gpt2": lambda: GPT2Config(vocab_size=VOCAB, n_embd=64, n_layer=2, n_head=4, n_positions=256,
                               bos_token_id=1, eos_token_id=2),
}

# Attention patterns past a window of WINDOW tokens: interleaved local/global layers (Gemma 3, with
# QK-norm and per-type rotary bases; Gemma 2, with soft-capped attention and logits), all layers
# windowed (Mistral), windowed layers above full ones (Qwen2; Qwen3 with QK-norm).
WINDOW = 8
GEMMA = dict(head_dim=16, sliding_window=WINDOW, query_pre_attn_scalar=16)
WINDOWED_CONFIGS = {
    "gemma3": lambda: Gemma3TextConfig(**{**COMMON, "num_hidden_layers": 3}, **GEMMA,
                                       layer_types=["sliding_attention", "full_attention", "sliding_attention"]),
    "gemma2": lambda: Gemma2Config(**COMMON, **GEMMA, attn_logit_softcapping=5.0, final_logit_softcapping=3.0),
    "mistral-window": lambda: MistralConfig(**COMMON, sliding_window=WINDOW),
    "qwen2-window": lambda: Qwen2Config(**COMMON, use_sliding_window=True, sliding_window=WINDOW, max_window_layers=1),
    "qwen3-window": lambda: Qwen3Config(**COMMON, head_dim=16, use_sliding_window=True, sliding_window=WINDOW,
                                        max_window_layers=1),
}


def tiny_model(arch: str, seed: int = 0) -> torch.nn.Module:
    """A random tiny model (TINY_CONFIGS or WINDOWED_CONFIGS); weights scaled up so its greedy
    choices are clear-cut."""
    torch.manual_seed(seed)
    config = {**TINY_CONFIGS, **WINDOWED_CONFIGS}[arch]()
    config.initializer_range = 0.2
    model = AutoModelForCausalLM.from_config(config).eval()
    return model.requires_grad_(False)


def pytest_sessionfinish(session, exitstatus):
    shutil.rmtree(TEST_CACHE, ignore_errors=True)


@pytest.fixture(scope="session", params=sorted(TINY_CONFIGS))
def tiny(request):
    return tiny_model(request.param)


@pytest.fixture(scope="session", params=sorted(WINDOWED_CONFIGS))
def windowed_tiny(request):
    return tiny_model(request.param)


def planned_tiny(arch: str, dtype: torch.dtype, lean: bool = True, model: torch.nn.Module | None = None,
                 path: str | None = None) -> Runtime:
    """The runtime of a tiny model (``model``, else ``tiny_model(arch)``) in ``dtype`` on our kernels, every
    linear on one path (``path``, else oneDNN's packed where plans are offered it in that dtype, else native) as a
    plan would have it, and on the lean forward where ``lean`` and its architecture has one (else transformers'
    path, our attention)."""
    from bita.runtime.build import prepare
    from bita.runtime.kernel_plan import NATIVE, PACKED, STOCK, KernelPlan, offered_paths

    model = (model if model is not None else tiny_model(arch)).to(dtype)
    offered = offered_paths(torch.zeros(8, 8, dtype=dtype))
    path = path or next((path for path in (PACKED, NATIVE) if path in offered), STOCK)
    return prepare(model, "auto", plan=KernelPlan(path, path), lean=lean)


def random_prompts(count: int, seed: int, low: int = 3, high: int = 40) -> list[list[int]]:
    generator = torch.Generator().manual_seed(seed)
    lengths = torch.randint(low, high, (count,), generator=generator)
    return [torch.randint(3, VOCAB, (int(n),), generator=generator).tolist() for n in lengths]


def tree_allowed(rows: int, cached: int, generator: torch.Generator) -> torch.Tensor:
    """A random tree pass's [rows, cached + rows] mask: each row sees the cache, itself and some rows before it
    (the first slot always: every token of a pass sees its context's first token)."""
    new = (torch.rand(rows, rows, generator=generator) < 0.6).tril() | torch.eye(rows, dtype=torch.bool)
    allowed = torch.cat([torch.ones(rows, cached, dtype=torch.bool), new], 1)
    allowed[:, 0] = True
    return allowed


def forget_native(monkeypatch, march: str | None = None) -> None:
    """This process as if it had not tried the native kernels yet (the next ``native.unavailable`` builds or loads
    the library): a new process, for the test; with ``march``, one whose library is built with ``-march=march`` in
    place of ``-march=native``, as a machine of that kind builds it. Put back after the test."""
    from bita.runtime import native

    monkeypatch.delenv(native.SWITCH, raising=False)
    for name in ("_library", "_limits", "_failure", "_amx_failure"):
        monkeypatch.setattr(native, name, None)
    if march:
        monkeypatch.setattr(native, "FLAGS", tuple(f"-march={march}" if flag == "-march=native" else flag
                                                   for flag in native.FLAGS))


@pytest.fixture(scope="module")
def one_thread():
    """Run a module's many tiny passes on one thread: on a busy 2-core machine, two intra-op
    threads made a tiny pass 5-50x slower (they wait for each other), and a tiny pass has
    nothing to split. The previous count comes back afterwards."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def default_model():
    """The real embedded default model (SmolLM2-135M-Instruct), loaded once."""
    from bita.model.loading import load_model

    return load_model("default", device="cpu", dtype="float32", weights="dense")  # the same on every CPU kind


def assert_lossless(runtime: Runtime, spec: str, prompts: list[list[int]], new_tokens: int = 20) -> None:
    """Our AR loop, and BiTA with tree ``spec`` plus n-gram chains of 3 (a random adapter), on ``runtime`` emit
    HF ``generate``'s greedy tokens for each prompt."""
    model = runtime.model
    adapter = BitaAdapter.create(model, prompt_tokens=4, mask_tokens=3, seed=1)
    for prompt in prompts:
        reference = hf_generate(model, prompt, new_tokens, [])
        assert [t for r in ar_steps(runtime, prompt, StopCondition(new_tokens)) for t in r.emitted] == reference
        decoding = Decoding(runtime, adapter, tree_of(spec), chains=Chains(ngram_tokens=3))
        steps = bita_steps(decoding, prompt, StopCondition(new_tokens))
        assert [t for r in steps for t in r.emitted] == reference


RAW_PROBABILITIES = Reliability(tuple(i / 100 for i in range(1, 101)), (tuple(i / 100 for i in range(1, 101)),))


def tree_of(spec: str, depth: int = 3):
    """A static tree spec's DraftTree (no mask drafts for ''), or for 'dynamic:ROWS' a dynamic shape of
    ``depth``-mask groups scoring drafts by their raw probabilities (tiny random adapters have no calibration)."""
    if not spec:
        return EMPTY_TREE
    if spec.startswith("dynamic:"):
        return DynamicShape(int(spec.split(":")[1]), depth, 4, 1.0, RAW_PROBABILITIES)
    return parse_tree_spec(spec)
