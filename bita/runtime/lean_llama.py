"""A lean forward for the Llama family (Llama, SmolLM2, Mistral, Qwen2) over the same HF weights.

transformers' modeling code costs about a fifth of a pass on a 2-vCPU CPU (docs/speed.md: 46.7
-> 36.8 ms for one row on an AMD EPYC with AVX-512, logits bit-identical). This forward does what
it does for these architectures, gpt-fast style: QKV and gate/up fused once, one layer loop
(``run_layers``) whose elementwise work (RMSNorm, rotary, SiLU x up) runs on ``LayerOps``: transformers'
own operations in its order (``TorchOps``) or native.py's kernels on a CPU, or triton_layer.py's fused kernels
on a GPU (``FusedLayerOps``: each residual added by the norm after it, rotary with the cache write), and whose
attention is the caller's; keys and values written in place into a ``StaticKV`` (no concatenation, no crop;
its buffers pooled across requests), SDPA with ``enable_gqa`` under a boolean mask (on CUDA the query groups
folded into rows instead), and each linear on the one path the machine's kernel plan chose (kernel_plan.py); a
pass's token rows attend by ``exact_attention``, so that a row computes the same bits whatever else its pass
holds.

A runtime (runtime.py, chosen at load by build.py) runs its passes here where ``lean_unsupported`` finds
nothing against it: on a CPU as they come, on a CUDA device at padded row buckets replayed as CUDA
graphs (padded.py). Every other architecture and quantised layers keep transformers' path
(transformers_forward.py). HF ``generate`` always runs transformers' code.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import torch
import torch.nn.functional as F
from torch import nn

from . import native
from .blocks import blocks_of, fused, with_blocks
from .exact_attention import ExactLayout, exact_attention, exact_layout
from .kernel_plan import STOCK, KernelPlan, PlannedLinear, Product
from .native_stack import NativeStack
from .static_kv import CachePool, StaticKV

# attend(layer, q, keys, values): a layer's attention of the pass's rows, q [R, heads, head_dim] (rotated), over
# keys, values [1, kv_heads, K, head_dim] (what the cache's write returned) -> [R, heads, head_dim]
Attend = Callable[[int, torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]

LEAN_TYPES = ("llama", "mistral", "qwen2")
ROTARY_BLOCK = 256  # the rotary table grows by whole blocks of positions
# Rotary types whose scaling transformers bakes into a fixed ``inv_freq`` (Llama 3.x's "llama3" too);
# "dynamic" recomputes it with the length and "yarn" scales attention, which this forward does not.
STATIC_ROPE_TYPES = ("default", "linear", "llama3")


def lean_unsupported(model: nn.Module) -> str | None:
    """Why the lean forward cannot run ``model`` (None: it can)."""
    config = getattr(model, "config", None)
    if config is None or config.model_type not in LEAN_TYPES:
        return f"architecture {getattr(config, 'model_type', type(model).__name__)!r} is not one of {LEAN_TYPES}"
    rope = getattr(config, "rope_parameters", None) or {}
    sliding = getattr(config, "sliding_window", None) or any(
        kind != "full_attention" for kind in getattr(config, "layer_types", None) or ())
    scaling = getattr(getattr(model.model, "rotary_emb", None), "attention_scaling", 1.0)
    if rope.get("rope_type", "default") not in STATIC_ROPE_TYPES or scaling != 1.0 or sliding:
        return "rotary scaling that changes with the length or scales attention, or a sliding window"
    if config.hidden_act != "silu" or getattr(config, "final_logit_softcapping", None):
        return "an activation other than SiLU, or soft-capped logits"
    linears = [m for m in model.model.layers.modules() if isinstance(m, nn.Linear)]
    if any(type(m) is not nn.Linear or m.weight.device.type not in ("cpu", "cuda")
           and not (m.weight.is_meta and blocks_of(m)) for m in linears):  # meta: held in GGUF blocks alone
        return "quantised layers, or weights on a device other than a CPU or CUDA GPU"
    return None


# store(layer, projected): a layer's rotary and cache write for projected [R, (heads + 2 kv_heads) head_dim] (the
# rows' queries, keys, values) -> the rotated queries [R, heads, head_dim] and the keys, values [1, kv_heads, K,
# head_dim] the rows attend over (``LeanLlama.rotated_store``, or triton_layer.rotate_store's one kernel)
Store = Callable[[int, torch.Tensor], tuple[torch.Tensor, torch.Tensor, torch.Tensor]]


class LayerOps(Protocol):
    """A layer's elementwise work, one call each (native.py's functions, ``TorchOps``)."""

    def rms_norm(self, x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
        """transformers' LlamaRMSNorm of x [R, H] (rows may be apart, the last dimension contiguous) -> [R, H]."""

    def rotate_(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        """Rotary embedding in place on x [R, heads, D] by cos, sin [R, D]: x cos + rotate_half(x) sin. Returns x."""

    def silu_mul(self, gate_up: torch.Tensor) -> torch.Tensor:
        """gate_up [R, 2I] (gate, then up) -> silu(gate) x up [R, I]."""


class FusedLayerOps(Protocol):
    """A layer's elementwise work with the residual's add and the cache write fused in (triton_layer.py)."""

    def rms_norm(self, x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
        """As LayerOps.rms_norm (the first layer's input norm)."""

    def add_rms_norm(self, residual: torch.Tensor, x: torch.Tensor, weight: torch.Tensor,
                     eps: float) -> tuple[torch.Tensor, torch.Tensor]:
        """residual + x [R, H] and its RMSNorm by weight [H]: (sum, normed), each [R, H]."""

    def rotate_store(self, projected: torch.Tensor, heads: int, cos: torch.Tensor, sin: torch.Tensor,
                     positions: torch.Tensor, slots: torch.Tensor, keys: torch.Tensor,
                     values: torch.Tensor) -> torch.Tensor:
        """A layer's rotary and cache write (a ``Store``'s work): projected [R, (heads + 2 kv_heads) D] at
        ``positions`` [R] in the tables cos, sin [T, D], written at ``slots`` [R] of keys, values [kv_heads, K, D];
        returns the rotated queries [R, heads, D]."""

    def silu_mul(self, gate_up: torch.Tensor) -> torch.Tensor:
        """As LayerOps.silu_mul."""


class TorchOps:
    """``LayerOps`` as transformers computes them, operation for operation (bit-identical to its forward)."""

    @staticmethod
    def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
        wide = x.float()  # cast once, as LlamaRMSNorm
        return weight * (wide * torch.rsqrt(wide.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)

    @staticmethod
    def rotate_(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        half = x.shape[-1] // 2
        return x.copy_(x * cos[:, None] + torch.cat([-x[..., half:], x[..., :half]], -1) * sin[:, None])

    @staticmethod
    def silu_mul(gate_up: torch.Tensor) -> torch.Tensor:
        gate, up = gate_up.chunk(2, -1)
        return F.silu(gate) * up


def fused_product(modules: list[nn.Linear]) -> Product:
    """The weight [sum out, in] and bias [sum out] (or None) of linears sharing an input, concatenated once: the
    modules' own weights become views of the concatenation, so the model holds each weight once (transformers'
    path, HF generate, reads the same storage). Linears already fused (views of one storage, in order) are
    taken as they are, not concatenated again. The weight carries the modules' GGUF blocks, fused, where each is
    held in blocks of one type (runtime/blocks.py)."""
    weights = [m.weight.detach() for m in modules]
    total = sum(weight.shape[0] for weight in weights)
    first = weights[0]
    if len(weights) == 1:
        weight = first
    elif _adjacent(weights):
        weight = first.new_empty(0).set_(first.untyped_storage(), first.storage_offset(), (total, first.shape[1]),
                                         (first.shape[1], 1))
    else:
        weight, offset = torch.cat(weights), 0
        for module in modules:
            rows = module.weight.shape[0]
            module.weight.data = weight[offset:offset + rows]
            offset += rows
    return _with_blocks_and_bias(weight, modules)


def fused_shape(modules: list[nn.Linear]) -> Product:
    """``fused_product``'s weight as a meta tensor of its shape, carrying its blocks, and its bias; nothing copied."""
    weight = modules[0].weight
    rows = sum(module.weight.shape[0] for module in modules)
    return _with_blocks_and_bias(torch.empty(rows, weight.shape[1], dtype=weight.dtype, device="meta"), modules)


def _with_blocks_and_bias(weight: torch.Tensor, modules: list[nn.Linear]) -> Product:
    """The fused product of ``modules`` with ``weight`` [sum out, in]: it carries their blocks fused
    (runtime/blocks.py), and their biases concatenated [sum out] (None unless each has one)."""
    biases = [m.bias for m in modules]
    return (with_blocks(weight, fused([blocks_of(module) for module in modules])),
            torch.cat(biases).detach() if all(b is not None for b in biases) else None)


def _adjacent(weights: list[torch.Tensor]) -> bool:
    """Whether contiguous ``weights`` [out_i, in] lie one after the other in one storage."""
    storage, end = weights[0].untyped_storage().data_ptr(), weights[0].storage_offset()
    for weight in weights:
        if (not weight.is_contiguous() or weight.untyped_storage().data_ptr() != storage
                or weight.storage_offset() != end):
            return False
        end += weight.numel()
    return True


def fused_groups(model: nn.Module) -> list[list[nn.Linear]]:
    """The linears the lean forward runs as one product each, in a pass's order: per layer Q/K/V, O, gate/up,
    down."""
    groups = []
    for layer in model.model.layers:
        attention, mlp = layer.self_attn, layer.mlp
        groups += [[attention.q_proj, attention.k_proj, attention.v_proj], [attention.o_proj],
                   [mlp.gate_proj, mlp.up_proj], [mlp.down_proj]]
    return groups


class LeanLlama:
    """The decoder stack of a Llama-family ``model`` (embedding and LM head stay the model's), its linears
    on ``plan``'s layer path (None: STOCK). Where native.py runs here (``native``), a layer's elementwise work
    is native too and every row attends by native attention (row-invariant by construction); else its token
    rows attend by exact_attention and its mask rows by SDPA."""

    buckets = ()  # every pass runs its own rows
    logit_rows = 0  # the LM head takes the rows as given
    logit_head = None  # the model's LM head
    exact_rows = True  # a pass's token rows attend row-invariantly
    token_rows = False  # Runtime.run embeds a pass's ids

    def __init__(self, model: nn.Module, plan: KernelPlan | None = None):
        config = model.config
        self.heads, self.kv_heads = config.num_attention_heads, config.num_key_value_heads
        self.head_dim = getattr(config, "head_dim", None) or config.hidden_size // self.heads
        self.eps = config.rms_norm_eps
        self.inv_freq = model.model.rotary_emb.inv_freq
        self.cos = self.sin = torch.empty(0, 2 * len(self.inv_freq))
        self.max_positions = config.max_position_embeddings
        path = plan.layers if plan is not None else STOCK
        products = [PlannedLinear(*fused_product(group), path) for group in fused_groups(model)]
        self.layers = [(layer.input_layernorm.weight, qkv, out, layer.post_attention_layernorm.weight, gate_up, down)
                       for layer, (qkv, out, gate_up, down) in zip(model.model.layers, zip(*[iter(products)] * 4))]
        self.norm = model.model.norm.weight
        self.input_embeddings = model.get_input_embeddings()  # a PaddedLean looks token rows up inside its pass
        self.output_embeddings = model.get_output_embeddings()  # the LM head (a PaddedLean may run it otherwise)
        self.dtype, self.device = self.norm.dtype, self.norm.device
        self.native = self.device.type == "cpu" and native.attention_unsupported(
            self.heads, self.kv_heads, self.head_dim, self.dtype) is None
        self.tiles = self.native and native.attention_on_tiles(self.head_dim, self.dtype)  # attention on AMX tiles
        self.caches = CachePool(lambda: StaticKV(len(self.layers), self.kv_heads, self.head_dim, self.dtype,
                                                 self.device))
        self.stack = NativeStack.of(self)  # the stack in one native call a pass, where every product is native

    @property
    def kind(self) -> str:
        """``lean+native+stack`` where the whole stack runs in one native call, ``lean+native`` where its layers' calls
        are native from Python, else ``lean``; ``+amx-attention`` after ``native`` where attention runs on AMX tiles
        (other bits, other pass costs)."""
        return "lean" + ("+native" if self.native else "") + ("+amx-attention" if self.tiles else "") + (
            "+stack" if self.one_call else "")

    @property
    def one_call(self) -> NativeStack | None:
        """The stack that runs a pass in one native call (``stack``, while attention is native), else None."""
        return self.stack if self.native else None

    def describe(self) -> str:
        return "lean forward, static KV cache" + (", native layers and attention" if self.native else "") + (
            " (attention on AMX tiles)" if self.tiles else "") + (" in one native call a pass" if self.one_call else "")

    def new_cache(self, prompts: list[tuple[torch.Tensor, torch.Tensor]] = (), rows: int = 0) -> StaticKV:
        """An empty cache from this forward's pool holding ``prompts`` (per layer, keys and values [1, kv_heads,
        P, head_dim]) in its first P slots, with room for ``rows`` slots past them (``release`` it after)."""
        cache = self.caches.take()
        cache.hold_prompts(list(prompts))
        cache.reserve(rows)
        return cache

    def release(self, cache: StaticKV) -> None:
        """A request is done with ``cache``: the next one may reuse it."""
        self.caches.give_back(cache)

    def fastest(self) -> LeanLlama:
        """Itself: its passes run no slower for being row-invariant."""
        return self

    def grow_rotary(self, positions: int) -> None:
        """Make the rotary table cover positions 0 .. ``positions`` - 1, in whole blocks of ``ROTARY_BLOCK``
        computed at once: a position's cos and sin must not depend on which other positions share its
        pass (a vectorised cos and a scalar one may round differently, and which one a value gets
        depends on where it sits in the tensor)."""
        if positions <= self.cos.shape[0]:
            return
        count = -(-positions // ROTARY_BLOCK) * ROTARY_BLOCK
        freqs = torch.arange(count, device=self.device).float()[:, None] * self.inv_freq.float()[None]
        angles = torch.cat([freqs, freqs], -1)
        self.cos, self.sin = angles.cos().to(self.dtype), angles.sin().to(self.dtype)

    @torch.inference_mode()
    def forward(self, cache: StaticKV, embeds: torch.Tensor, positions: torch.Tensor, allowed: torch.Tensor,
                ordinary: int) -> torch.Tensor:
        """Rows embeds [R, H] at ``positions`` [R], written at the cache's next R slots; ``allowed``
        [R, length + R] bool: which slots each row sees; the first ``ordinary`` rows are tokens, the rest
        mask rows. Returns final-norm hidden states [R, H].

        Row-invariant: every row attends by native.py's attention (``native``; the whole stack one native call
        where every product is native too: ``stack``), else the token rows by ``exact_attention`` and the mask rows
        by SDPA; a linear pads a pass of fewer rows than its kernel's floor (kernel_plan.row_floor)."""
        rows = embeds.shape[0]
        exact = exact_layout(allowed, ordinary, cache.base, self.heads // self.kv_heads, self.device) \
            if ordinary and not self.native else None
        cache.reserve(max(rows, exact.region_end - cache.length if exact else 0))
        self.grow_rotary(int(positions.max()) + 1)
        if self.one_call is not None:
            hidden = self.one_call.run(embeds, *self.rotary_rows(positions), allowed, cache)
        else:
            ops = native if self.native else TorchOps
            hidden = self.run_layers(embeds, self.rotated_store(positions, cache.append, ops),
                                     self.attention(cache, allowed, exact), ops)
        cache.advance(rows)
        return hidden

    def attention(self, cache: StaticKV, allowed: torch.Tensor, exact: ExactLayout | None) -> Attend:
        """How ``forward``'s rows attend under allowed [R, length + R]: natively (``native``), else by SDPA, the token
        rows by ``exact_attention`` where ``exact`` lays them out."""
        if self.native:
            return lambda layer, q, keys, values: native.attend(q, *cache.buffers(layer), allowed)
        if exact is None:
            return self.sdpa(allowed)
        return lambda layer, q, keys, values: self.attend_exact(q, keys, values, exact, cache.buffers(layer))

    def rotary_rows(self, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """cos, sin [R, head_dim] of rows at ``positions`` [R] (``grow_rotary`` first)."""
        positions = positions.to(self.device)
        return self.cos[positions], self.sin[positions]

    def rotated_store(self, positions: torch.Tensor,
                      write: Callable[[int, torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]],
                      ops: LayerOps) -> Store:
        """A ``Store`` for rows at ``positions`` [R] (``grow_rotary`` first): ``ops.rotate_`` on the queries and keys
        in place, then ``write(layer, keys, values)`` of the keys and values [1, kv_heads, R, head_dim], which
        returns the keys and values [1, kv_heads, K, head_dim] to attend over."""
        cos, sin = self.rotary_rows(positions)
        heads, kv_heads, dim = self.heads, self.kv_heads, self.head_dim
        q_size, kv_size = heads * dim, kv_heads * dim

        def store(layer: int, projected: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
            rows = projected.shape[0]
            ops.rotate_(projected[:, :q_size + kv_size].view(rows, heads + kv_heads, dim), cos, sin)
            k, v = (projected[:, start:start + kv_size].view(rows, kv_heads, dim).transpose(0, 1)[None]
                    for start in (q_size, q_size + kv_size))
            return projected[:, :q_size].view(rows, heads, dim), *write(layer, k, v)
        return store

    def run_layers(self, x: torch.Tensor, store: Store, attend: Attend, ops: LayerOps | FusedLayerOps,
                   layers: list[tuple] | None = None) -> torch.Tensor:
        """The decoder stack over rows x [R, H], a layer's elementwise work on ``ops``; ``store(layer, projected)``
        rotates the layer's queries and keys and writes its keys and values to the cache (``Store``), and
        ``attend(layer, q, keys, values)`` attends with the rows' queries q [R, heads, head_dim] (``Attend``). The
        residual of each half is added by the norm after it where ``ops`` fuse the two (``FusedLayerOps``), else
        by the linear that ends the half (natively as it stores, on the native path). ``layers``: in place of
        ``self.layers`` (the same weights on other linear paths). Returns [R, H]."""
        rows, eps, q_size = x.shape[0], self.eps, self.heads * self.head_dim
        layers = layers or self.layers
        add_rms_norm = getattr(ops, "add_rms_norm", None)

        def add_then_norm(x: torch.Tensor, linear: PlannedLinear, inputs: torch.Tensor,
                          weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            """x + linear(inputs) and its RMSNorm by weight: (the new residual stream, its norm), each [R, H]."""
            if add_rms_norm is not None:
                return add_rms_norm(x, linear(inputs), weight, eps)
            x = linear(inputs, residual=x)
            return x, ops.rms_norm(x, weight, eps)
        norms_after = [layer[0] for layer in layers[1:]] + [self.norm]  # the norm after each layer's residual
        normed = ops.rms_norm(x, layers[0][0], eps)
        for index, ((_, qkv, out, norm_post, gate_up, down), norm_next) in enumerate(zip(layers, norms_after)):
            q, keys, values = store(index, qkv(normed))
            attended = attend(index, q, keys, values)
            x, normed = add_then_norm(x, out, attended.reshape(rows, q_size), norm_post)
            x, normed = add_then_norm(x, down, ops.silu_mul(gate_up(normed)), norm_next)
        return normed

    def sdpa(self, allowed: torch.Tensor, fold_groups: bool = False) -> Attend:
        """Rows attend by SDPA under allowed [R, K] bool. ``fold_groups``: the G query heads that share a
        key/value head become G x R rows of one call per key/value head, under the mask repeated G times
        (built once here, additive: 0 where allowed, -inf elsewhere, in the model's dtype, the mask SDPA
        would make of the boolean one at every call), so SDPA needs no ``enable_gqa``, which no fused backend
        takes with a mask (the CUDA path); else ``enable_gqa`` (the CPU path, bit-identical to transformers' there)."""
        groups, dim = self.heads // self.kv_heads, self.head_dim
        mask = allowed.to(self.device)
        if fold_groups:  # additive, once a pass: SDPA turns a boolean mask into it itself, at each layer's call
            mask = torch.zeros(mask.shape, dtype=self.dtype, device=self.device).masked_fill_(
                ~mask, float("-inf")).repeat(groups, 1)
        mask = mask[None, None]

        def attend(layer: int, q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
            rows = q.shape[0]
            if not fold_groups:
                return F.scaled_dot_product_attention(q.transpose(0, 1)[None], keys, values, attn_mask=mask,
                                                      enable_gqa=True)[0].transpose(0, 1)
            # [R, kv_heads x G, d] -> [1, kv_heads, G x R, d]: head h = kv head h // G
            folded = q.view(rows, self.kv_heads, groups, dim).permute(1, 2, 0, 3).reshape(1, self.kv_heads,
                                                                                          groups * rows, dim)
            attended = F.scaled_dot_product_attention(folded, keys, values, attn_mask=mask)
            return attended.view(self.kv_heads, groups, rows, dim).permute(2, 0, 1, 3)
        return attend

    @staticmethod
    def attend_exact(q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, exact: ExactLayout,
                     buffers: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        """q [R, heads, d]: the first ``exact.count`` rows by exact_attention over the whole ``buffers``, the
        other rows (mask rows) by SDPA over the valid keys, values [1, kv_heads, K, d] under
        ``exact.others_allowed``. Returns [R, heads, d]."""
        count = exact.count
        if count == q.shape[0]:
            return exact_attention(q, *buffers, exact)
        return torch.cat([exact_attention(q[:count], *buffers, exact), F.scaled_dot_product_attention(
            q[count:].transpose(0, 1)[None], keys, values, attn_mask=exact.others_allowed,
            enable_gqa=True)[0].transpose(0, 1)])
