"""llama.cpp as a baseline: what a CPU user would run instead of HF ``generate``, timed in the bench's run.

It runs through llama-cpp-python where that is installed (an optional extra, ``pip install
"bita-decoding[llamacpp]"``; there is no wheel for most CPUs, so pip builds llama.cpp from source, a few
minutes on two cores), on the GGUF the loaded model came from, with torch's thread count. Where our forward
reads that file's blocks (``--weights blocks``, or ``auto`` where it chose them), llama.cpp runs the file as
shipped (the default model's Q4_1), what a user of llama.cpp runs. Where our forward runs de-quantised weights,
llama.cpp takes them in the loaded model's precision: the file is converted once by llama.cpp's own quantizer to
BF16 or F32 and cached under the cache folder, so that it decodes the very weights our forward runs. Its tokens are
compared with BiTA's like any baseline's: llama.cpp's kernels round otherwise, so in bf16 they may part
at a near tie. The model loads once a process, outside any timing; a run times prompt processing and
decoding, as HF ``generate``'s does.
"""

from __future__ import annotations

import atexit
import importlib.util
import logging
from pathlib import Path

import torch

from ..decode.sampling import Sampling
from ..decode.stopping import make_stop
from ..generate import RunResult, check_sampling, validate_request
from ..model.loading import DEFAULT_MODEL, DEFAULT_NAME, LoadedModel, gguf_of
from ..package_data import cache_root
from ..runtime.device import timed

LLAMACPP = "llama_cpp"  # llama-cpp-python's module
FILE_TYPES = {torch.bfloat16: "BF16", torch.float32: "F32", torch.float16: "F16"}  # llama.cpp's names
logger = logging.getLogger(__name__)
_loaded: dict[tuple[str, int], object] = {}  # (GGUF path, threads) -> a llama_cpp.Llama, loaded once a process


@atexit.register
def _close() -> None:
    """Free llama.cpp's models before the interpreter tears its modules down (their finaliser needs them)."""
    while _loaded:
        _loaded.popitem()[1].close()


def source_gguf(loaded: LoadedModel) -> Path | None:
    """The GGUF ``loaded`` was converted from (None: loaded from a transformers checkpoint)."""
    return gguf_of(DEFAULT_MODEL if loaded.name == DEFAULT_NAME else loaded.name)


def absent_because(loaded: LoadedModel) -> str | None:
    """Why llama.cpp cannot run ``loaded`` here (None: it can)."""
    if importlib.util.find_spec(LLAMACPP) is None:
        return "llama-cpp-python is not installed (pip install \"bita-decoding[llamacpp]\": it builds llama.cpp)"
    if loaded.device.type != "cpu":
        return f"it is timed on a CPU, and this model runs on {loaded.device}"
    if loaded.runtime.dtype not in FILE_TYPES and not loaded.runtime.reads_blocks:
        return f"llama.cpp has no GGUF type for {loaded.runtime.dtype}"
    if source_gguf(loaded) is None:
        return "llama.cpp runs GGUF files, and this model was not loaded from one"
    return None


def gguf_in_dtype(gguf: Path, dtype: torch.dtype) -> Path:
    """``gguf`` in llama.cpp's type for ``dtype``: converted once by llama.cpp's quantizer (re-quantising a
    quantised file dequantises it, as transformers does), cached beside the converted checkpoints."""
    import llama_cpp

    kind = FILE_TYPES[dtype]
    target = cache_root() / "llamacpp" / f"{gguf.stem}-{gguf.stat().st_size}-{kind}.gguf"
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    logger.info("converting %s to %s once for llama.cpp (%s)", gguf.name, kind, target)
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = getattr(llama_cpp, f"LLAMA_FTYPE_{'ALL' if kind == 'F32' else 'MOSTLY'}_{kind}")
    params.allow_requantize = True
    partial = target.with_suffix(".part")
    if llama_cpp.llama_model_quantize(str(gguf).encode(), str(partial).encode(), params) != 0:
        raise RuntimeError(f"llama.cpp could not convert {gguf} to {kind}")
    partial.replace(target)
    return target


def llama_for(loaded: LoadedModel):
    """llama.cpp's model for ``loaded`` (its GGUF as shipped where our forward reads its blocks, else in its dtype;
    torch's threads), loaded once a process."""
    import llama_cpp

    gguf = source_gguf(loaded)
    path = gguf if loaded.runtime.reads_blocks else gguf_in_dtype(gguf, loaded.runtime.dtype)
    threads = torch.get_num_threads()
    key = (str(path), threads)
    if key not in _loaded:
        _loaded[key] = llama_cpp.Llama(str(path), n_ctx=loaded.context_limit, n_threads=threads,
                                       n_threads_batch=threads, verbose=False)
    return _loaded[key]


def run_llamacpp(loaded: LoadedModel, prompt_ids: list[int], max_new_tokens: int,
                 sampling: Sampling | None = None) -> RunResult:
    """llama.cpp's decoding of ``prompt_ids`` (the same token ids), greedy or sampled with the same settings
    (its own random stream, seeded with ``sampling.seed``), cut at EOS and the length like the other
    methods; method "llamacpp"."""
    sampling = check_sampling(sampling)
    validate_request(loaded, prompt_ids, max_new_tokens)
    llama = llama_for(loaded)
    stop = make_stop(loaded, max_new_tokens)
    settings = dict(temp=0.0, top_k=1) if sampling.greedy else dict(
        temp=sampling.temperature, top_k=sampling.top_k, top_p=sampling.top_p)
    if not sampling.greedy:
        llama.set_seed(sampling.seed)

    def decode() -> tuple[list[int], str | None]:
        tokens, finish = [], None
        for token in llama.generate(prompt_ids, min_p=0.0, repeat_penalty=1.0, reset=True, **settings):
            tokens.append(int(token))
            if finish := stop.add(tokens[-1]):
                break
        return tokens, finish

    (tokens, finish), seconds = timed(loaded.device, decode)
    return RunResult("llamacpp", tokens, loaded.tokenizer.decode(tokens, skip_special_tokens=True), seconds, finish)
