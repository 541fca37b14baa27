"""Issue 47: which part of a row-invariant pass breaks the load-time probe on the GPU at hand?

    python3 benchmarks/gpu/invariance_parts.py [--device cuda] [--layers 2]

On an H100 (2026-11-26) both row-invariant forwards of SmolLM2 failed the probe by whole logits (worst 18-28,
every tree row, in fp32 too) while their causal passes agreed with transformers: a wrong result, not rounding.
This runs, on a random Llama of SmolLM2's widths (9 query heads, 3 key/value heads, head 64, hidden 576) in
float32, the probe (invariance.py) on the row-invariant forward with its parts swapped one at a time for torch's:

- attention: a torch reference (gather each row's visible keys, softmax) in place of logical_attention.attend;
- layer ops: TorchOps in place of triton_layer's kernels;
- linears: the fixed-tile Triton linears (``FIXED_TILES``) or cuBLAS at one shape (``one_shape``);
- graphs: CUDA graphs recorded, or the same buffers run eagerly.

A part whose swap turns a worst logit of ~10 into ~1e-5 is the broken one. Then each Triton kernel against
torch on inputs shaped as the probe's tree passes (prompt slots in front, siblings between).
"""
import argparse
import types

import torch
import torch.nn.functional as F
from transformers import LlamaConfig, LlamaForCausalLM

from bita.runtime import logical_attention, triton_layer
from bita.runtime.invariance import probe_row_invariance
from bita.runtime.lean_llama import LeanLlama, TorchOps
from bita.runtime.padded import FIXED_TILES, PaddedLean, PassWay, one_shape
from bita.runtime.runtime import Runtime
from bita.runtime.triton_linear import linear as triton_linear


def reference_attend(query, keys, values, order, counts, scaling=None):
    """logical_attention.attend's contract in torch: [R, heads, D] over each row's first counts[r] slots of order."""
    rows, heads, dim = query.shape
    groups = heads // keys.shape[0]
    taken = (torch.arange(order.shape[1], device=query.device)[None] < counts[:, None].long()).int()
    visible = torch.zeros(rows, keys.shape[1], dtype=torch.int, device=query.device)
    visible = visible.scatter_add_(1, order.long(), taken) > 0
    scores = torch.einsum("rhd,hkd->rhk", query.float(), keys.float().repeat_interleave(groups, 0)) * dim ** -0.5
    scores = scores.masked_fill(~visible[:, None], float("-inf"))
    weights = scores.softmax(-1)
    return torch.einsum("rhk,hkd->rhd", weights, values.float().repeat_interleave(groups, 0)).to(query.dtype)


def random_llama(layers: int, device: str) -> torch.nn.Module:
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=2048, hidden_size=576, intermediate_size=1536, num_hidden_layers=layers,
                         num_attention_heads=9, num_key_value_heads=3, max_position_embeddings=2048,
                         initializer_range=0.1, tie_word_embeddings=True)
    return LlamaForCausalLM(config).eval().requires_grad_(False).to(device)


def probe(model, graphs: bool, way: PassWay, attention: bool, ops: bool) -> str:
    forward = PaddedLean(LeanLlama(model), way, graphs=graphs)
    if not attention:
        forward.logical = types.SimpleNamespace(logical_order=logical_attention.logical_order, attend=reference_attend)
    if not ops:
        forward.ops = TorchOps
    try:
        return probe_row_invariance(Runtime(model, forward)).describe()
    except Exception as error:  # noqa: BLE001 - a part that fails to run is a finding too
        return f"failed: {error!r}"[:300]


def kernel_checks(device: str) -> None:
    generator = torch.Generator().manual_seed(1)

    def randn(*shape):
        return torch.randn(*shape, generator=generator).to(device)

    def report(what: str, ours: torch.Tensor, theirs: torch.Tensor) -> None:
        print(f"{what}: max |diff| {(ours - theirs).abs().max():.2e}")
    keys, values, query = randn(3, 200, 64), randn(3, 200, 64), randn(6, 9, 64)
    allowed = torch.zeros(6, 200, dtype=torch.bool)
    allowed[:, 4:100] = True  # the context after 4 prompt slots
    for row in range(6):  # each row's path: every other slot after the context
        allowed[row, 100 + 2 * torch.arange(row + 1)] = True
    order, counts = logical_attention.logical_order(allowed.to(device))
    report("logical attention vs torch", logical_attention.attend(query, keys, values, order, counts),
           reference_attend(query, keys, values, order, counts))
    x, weight = randn(5, 576), randn(576)
    report("rms_norm vs TorchOps", triton_layer.rms_norm(x, weight, 1e-5), TorchOps.rms_norm(x, weight, 1e-5))
    residual = randn(5, 576)
    report("add_rms_norm vs TorchOps", triton_layer.add_rms_norm(residual, x, weight, 1e-5)[1],
           TorchOps.rms_norm(residual + x, weight, 1e-5))
    projected, cos, sin, cache = randn(5, 15 * 64), randn(5, 64), randn(5, 64), randn(2, 3, 8, 64)
    positions, slots = torch.arange(5, device=device), torch.arange(1, 6, device=device)
    report("rotate_store vs TorchOps", triton_layer.rotate_store(projected.clone(), 9, cos, sin, positions, slots, *cache),
           TorchOps.rotate_(projected.clone().view(5, 15, 64)[:, :9], cos, sin))
    gate_up = randn(5, 3072)
    report("silu_mul vs TorchOps", triton_layer.silu_mul(gate_up), TorchOps.silu_mul(gate_up))
    x, weight = randn(5, 576), randn(960, 576)
    report("fixed-tile linear vs F.linear", triton_linear(x, weight), F.linear(x, weight))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--invariant-rows", type=int, default=64)
    args = parser.parse_args()
    kernel_checks(args.device)
    model = random_llama(args.layers, args.device)
    ways = {"fixed tiles": FIXED_TILES, "one shape": one_shape(args.invariant_rows)}
    print("| linears | graphs | attention | layer ops | probe |\n|---|---|---|---|---|")
    for name, way in ways.items():
        for graphs in ((False, True) if args.device == "cuda" else (False,)):
            for attention, ops in ((True, True), (False, True), (True, False), (False, False)):
                print(f"| {name} | {graphs} | {'Triton' if attention else 'torch'} | {'Triton' if ops else 'torch'} | "
                      f"{probe(model, graphs, way, attention, ops)} |", flush=True)


if __name__ == "__main__":
    main()
