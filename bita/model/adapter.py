"""The BiTA adapter: learnable prompt tokens and mask-token embeddings.

Prompts are *deep* (free key/values in every layer, the paper's choice) or *shallow*
(input embeddings whose key/values the frozen model computes; kept for the ablation).
Deep prompts may be *reparameterised* while training (prefix-tuning's MLP: per prompt token a
free vector, mapped by a two-layer MLP to every layer's key/value); ``folded`` turns such an
adapter into plain key/values, so inference never sees the MLP.

Saved as a folder (adapter_files.py: the tensors, a config naming the base model and recording its
identity so that a mismatched adapter is refused, the draft statistics, a model card) and shared
through the Hugging Face Hub with ``huggingface_hub``'s ``ModelHubMixin``: ``push_to_hub(USER/NAME)``,
``BitaAdapter.from_pretrained(USER/NAME or a folder)``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
from huggingface_hub import ModelCard, ModelHubMixin
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file
from torch import nn
from transformers import DynamicCache

from ..errors import BitaError
from ..runtime.transformers_forward import kv_shapes
from .adapter_card import is_generated_card, model_card
from .adapter_files import (ACCEPTANCE_NAME, CARD_NAME, FORECASTS_NAME, LEGACY_CONFIG_NAME, LEGACY_WEIGHTS_NAME,
                            WEIGHTS_NAME, adapter_folder, adapter_paths, atomic_write, config_texts, read_config)

PROMPT_STYLES = ("deep", "shallow")


@dataclass
class BaseIdentity:
    """What an adapter was made for. ``name``: what the base model was loaded by (a Hub id, a path,
    ``SmolLM2-135M-Instruct`` for the embedded default); ``revision``: its Hub commit, where it came
    from the Hub; ``kv_shapes``: per layer [kv_heads, head_dim]."""

    name: str
    model_type: str
    num_layers: int
    hidden_size: int
    kv_heads: int
    vocab_size: int
    fingerprint: str
    kv_shapes: list[list[int]]
    revision: str | None = None

    def mismatches(self, other: BaseIdentity) -> list[str]:
        """Human-readable differences (the name alone is not one: paths move)."""
        keys = ("model_type", "num_layers", "hidden_size", "kv_heads", "vocab_size", "kv_shapes", "fingerprint")
        return [f"{k}: adapter has {getattr(self, k)!r}, model has {getattr(other, k)!r}"
                for k in keys if getattr(self, k) != getattr(other, k)]


@dataclass
class AdapterConfig:
    prompt_tokens: int
    mask_tokens: int
    base: BaseIdentity
    init_std: float = 0.02
    prompt_style: str = "deep"  # one of PROMPT_STYLES
    prompt_reparam: int = 0  # hidden width of the training-time prompt MLP (deep only); 0 = free key/values
    training: dict = field(default_factory=dict)
    acceptance: dict = field(default_factory=dict)  # draft-rank statistics, see calibration.py
    forecasts: dict = field(default_factory=dict)  # candidate trees' forecasts from them (plan/forecast_store.py)

    @classmethod
    def from_dict(cls, data: dict) -> AdapterConfig:
        """From ``adapter_files.read_config``'s dict (TypeError where a field is missing or unknown)."""
        return cls(**{**data, "base": BaseIdentity(**data["base"])})


def weights_fingerprint(model: nn.Module) -> str:
    """sha256 over a strided sample of the input embeddings, rounded to bf16 precision so
    that fp32, bf16 and k-bit loads of the same weights agree (k-bit loading leaves
    embeddings unquantised)."""
    weight = model.get_input_embeddings().weight.detach()
    sample = weight.flatten()[:: max(1, weight.numel() // 65536)][:65536]
    rounded = sample.to(torch.bfloat16).to(torch.float32).cpu().numpy().tobytes()
    return hashlib.sha256(rounded + str(tuple(weight.shape)).encode()).hexdigest()[:16]


def base_identity(model: nn.Module, name: str | None = None) -> BaseIdentity:
    config = model.config.get_text_config()
    shapes = kv_shapes(model)
    return BaseIdentity(
        name=name or str(getattr(config, "name_or_path", "") or config.model_type),
        model_type=config.model_type,
        num_layers=len(shapes),
        hidden_size=model.get_input_embeddings().weight.shape[1],
        kv_heads=shapes[0][0],
        vocab_size=model.get_output_embeddings().weight.shape[0],
        fingerprint=weights_fingerprint(model),
        kv_shapes=shapes,
        revision=getattr(config, "_commit_hash", None),  # set by transformers for a model from the Hub
    )


class BitaAdapter(nn.Module, ModelHubMixin, library_name="bita-decoding", tags=["bita", "speculative-decoding"],
                  paper_url="https://arxiv.org/abs/2401.12522"):
    """Learnable parameters of BiTA (the base model stays frozen).

    Deep:    prompt_keys[l], prompt_values[l]: [kv_heads_l, P, head_dim_l], raw cache entries.
    Reparameterised deep: prompt_seeds [P, hidden] -> prompt_mlp -> [P, sum_l 2 * kv_heads_l * head_dim_l].
    Shallow: prompt_embeddings: [P, hidden], run through the frozen model at positions 0..P-1.
    mask_embeddings: [n, hidden], input embeddings of the n mask tokens.
    P = 0 gives mask tokens only.
    """

    def __init__(self, config: AdapterConfig):
        super().__init__()
        self.config = config
        self._hub_mixin_config = None  # else the mixin writes it as config.json, transformers' file name
        std, p = config.init_std, config.prompt_tokens
        deep = config.prompt_style == "deep" and p > 0
        shapes = config.base.kv_shapes if deep and not config.prompt_reparam else []

        def param(*shape: int) -> nn.Parameter:
            return nn.Parameter(torch.randn(*shape) * std)

        if deep and config.prompt_reparam:
            width, hidden = config.prompt_reparam, config.base.hidden_size
            self.prompt_seeds = param(p, hidden)
            self.prompt_mlp = nn.Sequential(nn.Linear(hidden, width), nn.Tanh(),
                                            nn.Linear(width, sum(2 * h * d for h, d in config.base.kv_shapes)))
        self.prompt_keys = nn.ParameterList([param(h, p, d) for h, d in shapes])
        self.prompt_values = nn.ParameterList([param(h, p, d) for h, d in shapes])
        if config.prompt_style == "shallow" and p > 0:
            self.prompt_embeddings = param(p, config.base.hidden_size)
        self.mask_embeddings = param(config.mask_tokens, config.base.hidden_size)

    @classmethod
    def create(cls, model: nn.Module, prompt_tokens: int = 16, mask_tokens: int = 3,
               seed: int = 0, name: str | None = None, prompt_style: str = "deep",
               prompt_reparam: int = 0) -> BitaAdapter:
        """A freshly initialised adapter for ``model`` (N(0, 0.02), seeded)."""
        if prompt_tokens < 0 or mask_tokens < 1 or prompt_reparam < 0:
            raise BitaError("an adapter needs prompt_tokens >= 0, mask_tokens >= 1 and prompt_reparam >= 0")
        if prompt_style not in PROMPT_STYLES:
            raise BitaError(f"prompt_style must be one of {PROMPT_STYLES}, not {prompt_style!r}")
        if prompt_reparam and prompt_style != "deep":
            raise BitaError("only deep prompts can be reparameterised")
        config = AdapterConfig(prompt_tokens, mask_tokens, base_identity(model, name), prompt_style=prompt_style,
                               prompt_reparam=prompt_reparam)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            adapter = cls(config)
        return adapter.to(model.get_input_embeddings().weight.device)

    @property
    def n_prompt(self) -> int:
        return self.config.prompt_tokens

    @property
    def n_masks(self) -> int:
        return self.config.mask_tokens

    def mask_rows(self, n_masks: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
        """A decoding pass's mask embeddings [n_masks, hidden] (the first ``n_masks``) in ``dtype`` on ``device``: the
        same tensor pass after pass while the embeddings stay as they are (their version counter, storage and dtype:
        an optimiser's or a load's in-place write, or a move, makes it again), so a padded pass's table copies it
        once (padded.PassBuffers); where autograd records, made each call, so that gradients reach the
        embeddings. A write through ``.data`` bumps no version counter: write under ``torch.no_grad()`` instead."""
        embeddings = self.mask_embeddings
        if torch.is_grad_enabled() and embeddings.requires_grad:
            return embeddings[:n_masks].to(device, dtype)
        key, cache = (n_masks, dtype, device), self.__dict__.setdefault("_mask_rows", {})
        stamp = embeddings._version, embeddings.data_ptr(), embeddings.dtype
        made, rows = cache.get(key, (None, None))
        if made != stamp:
            rows = embeddings.detach()[:n_masks].to(device, dtype)
            cache[key] = stamp, rows
        return rows

    def prompt_key_values(self, model: nn.Module, dtype: torch.dtype) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Per layer, prompt keys and values [1, kv_heads, P, head_dim] (empty list when P = 0)."""
        if not self.n_prompt:
            return []
        if self.config.prompt_style == "deep":
            return [(k.to(dtype)[None], v.to(dtype)[None]) for k, v in zip(*self.deep_prompts())]
        cache = DynamicCache()
        model.base_model(inputs_embeds=self.prompt_embeddings.to(dtype)[None], past_key_values=cache, use_cache=True)
        return [(layer.keys, layer.values) for layer in cache.layers]

    def deep_prompts(self) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        """Per layer, deep prompt keys and values [kv_heads_l, P, head_dim_l] (through the MLP
        when reparameterised)."""
        if not self.config.prompt_reparam:
            return list(self.prompt_keys), list(self.prompt_values)
        flat = self.prompt_mlp(self.prompt_seeds)  # [P, sum_l 2 * kv_heads_l * head_dim_l]
        keys, values, start = [], [], 0
        for heads, dim in self.config.base.kv_shapes:
            for out in (keys, values):
                out.append(flat[:, start:start + heads * dim].view(-1, heads, dim).transpose(0, 1))
                start += heads * dim
        return keys, values

    def folded(self) -> BitaAdapter:
        """The same adapter with a reparameterised prompt replaced by its plain key/values."""
        if not self.config.prompt_reparam:
            return self
        with torch.no_grad():
            keys, values = self.deep_prompts()
        plain = type(self)(dataclasses.replace(self.config, prompt_reparam=0))
        with torch.no_grad():  # in-place writes that bump the version counters (``.data``'s would not: mask_rows)
            plain.mask_embeddings.copy_(self.mask_embeddings)
            for target, source in ((plain.prompt_keys, keys), (plain.prompt_values, values)):
                for parameter, value in zip(target, source):
                    parameter.copy_(value)
        return plain.to(self.mask_embeddings.device)

    def prompt_cache(self, model: nn.Module, batch: int, dtype: torch.dtype,
                     context: list[tuple[torch.Tensor, torch.Tensor]] | None = None) -> DynamicCache:
        """A cache whose first P slots of every layer hold the prompt key/values, followed by
        ``context`` (per layer, keys and values [batch, kv_heads, T, head_dim]) when given."""
        prompts = self.prompt_key_values(model, dtype)
        layers = []
        for layer in range(len(self.config.base.kv_shapes)):
            keys, values = [], []
            if prompts:
                keys.append(prompts[layer][0].expand(batch, -1, -1, -1))
                values.append(prompts[layer][1].expand(batch, -1, -1, -1))
            if context is not None:
                keys.append(context[layer][0])
                values.append(context[layer][1])
            if keys:
                layers.append((torch.cat(keys, dim=2), torch.cat(values, dim=2)))
        return DynamicCache(ddp_cache_data=layers) if layers else DynamicCache()

    def check_compatible(self, model: nn.Module) -> None:
        problems = self.config.base.mismatches(base_identity(model))
        if problems:
            raise BitaError(f"adapter was made for {self.config.base.name!r}, not this model: " + "; ".join(problems))

    def save(self, directory: str | os.PathLike) -> Path:
        """Write the adapter's folder (adapter_files.py: tensors, config, statistics, model card); each
        file atomically (a temporary file, then a rename)."""
        self.save_pretrained(directory)
        return Path(directory)

    def _save_pretrained(self, save_directory: Path) -> None:
        """ModelHubMixin's hook under ``save_pretrained`` and ``push_to_hub``: the tensors, the config
        and the statistics; a model card this class generated earlier is removed, so that the mixin
        writes a fresh one (a card of the user's own stays)."""
        tensors = {name: p.detach().float().cpu().contiguous() for name, p in self.named_parameters()}
        atomic_write(save_directory / WEIGHTS_NAME, lambda path: save_file(tensors, path))
        for name, text in config_texts(asdict(self.config)).items():
            atomic_write(save_directory / name, lambda path, text=text: Path(path).write_text(text))
        stale = (LEGACY_CONFIG_NAME, LEGACY_WEIGHTS_NAME) + (() if self.config.acceptance else (ACCEPTANCE_NAME,)) \
            + (() if self.config.forecasts else (FORECASTS_NAME,))
        for name in stale:
            (save_directory / name).unlink(missing_ok=True)
        card = save_directory / CARD_NAME
        if card.is_file() and is_generated_card(card.read_text()):
            card.unlink()

    def generate_model_card(self, repo_id: str | None = None) -> ModelCard:
        """The model card (``base_model:`` and the training figures); ``repo_id``: the repository
        its usage example names."""
        return model_card(asdict(self.config), sum(p.numel() for p in self.parameters()), repo_id)

    def push_to_hub(self, repo_id: str, **kwargs) -> str:
        """ModelHubMixin's upload (``create_repo`` and one ``upload_folder`` commit), with a model card
        naming ``repo_id``. Returns the commit's URL."""
        kwargs["model_card_kwargs"] = {"repo_id": repo_id, **(kwargs.get("model_card_kwargs") or {})}
        return super().push_to_hub(repo_id, **kwargs)

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path: str | os.PathLike, *, model: nn.Module | None = None,
                        revision: str | None = None, cache_dir: str | Path | None = None,
                        local_files_only: bool | None = None, token: str | bool | None = None,
                        force_download: bool = False) -> BitaAdapter:
        """An adapter from a folder or a Hub repository ``USER/NAME`` (from the local Hugging Face
        cache where it is there, else downloaded: adapter_files.adapter_folder); given ``model``,
        checked to be made for it and placed on its device."""
        folder = adapter_folder(pretrained_model_name_or_path, revision, cache_dir, local_files_only, token,
                                force_download)
        return cls.load(folder, model)

    @classmethod
    def load(cls, directory: str | os.PathLike, model: nn.Module | None = None) -> BitaAdapter:
        """Load the adapter in folder ``directory`` (either format) and, given ``model``, check it was
        made for that model."""
        directory = Path(directory)
        paths = adapter_paths(directory)
        if paths is None:
            adapter_folder(directory)  # raises its one-line error
        config_path, weights_path = paths
        try:
            config = AdapterConfig.from_dict(read_config(config_path))
        except (ValueError, TypeError, KeyError) as error:
            raise BitaError(f"corrupted adapter config {str(config_path)!r}: {error}") from None
        try:
            tensors = load_file(str(weights_path))
        except (SafetensorError, OSError, ValueError) as error:
            raise BitaError(f"corrupted adapter weights {str(weights_path)!r}: {error}") from None
        adapter = cls(config)
        try:
            adapter.load_state_dict(tensors, strict=True)
        except RuntimeError as error:
            raise BitaError(f"adapter weights do not match their config in {str(directory)!r}: {error}") from None
        if model is not None:
            adapter.check_compatible(model)
            adapter.to(model.get_input_embeddings().weight.device)
        return adapter
