"""Issue 47, bf16 on a GPU: are the passes row-invariant there, and what does invariance cost?

    python3 benchmarks/gpu/invariance_check.py --model /tmp/s/model.gguf [--dtype bfloat16]

Prints, for the default model on the GPU at hand:
1. the runtime the load chose (build.choose_lean: the quickest row-invariant forward the probe proves, else the
   fastest shapes) and, for every forward a GPU may run (build.graphed_forwards: Triton's fixed-tile linears at
   row buckets, one shape of 64 rows on cuBLAS, the fastest shapes with Triton's layer kernels and with
   transformers' operations), the probe (invariance.py) and the median milliseconds of an AR pass and of an
   8-row pass after 128 tokens;
2. what the one-shape design assumes of cuBLAS, tested directly: a linear of each of the model's shapes at 64
   rows gives a row the same bits whatever its index among them (a row at index 0 against the same row at other
   indices, among random rows); and, for contrast, whether a row alone gives the same bits as among 64.
"""
import torch
import torch.nn.functional as F
from loaded_on_gpu import loaded_from_arguments

from bita.runtime.build import graphed_forwards
from bita.runtime.invariance import probe_row_invariance
from bita.runtime.padded import INVARIANT_ROWS
from bita.runtime.precision import pass_milliseconds
from bita.runtime.runtime import Runtime

INDICES = (1, 7, 16, 31, 32, 47, 63)


def same_row(weight: torch.Tensor, rows: int, generator: torch.Generator) -> tuple[int, int]:
    """Of the rows INDICES (< rows), how many give row 0's bits when a random row sits at index 0 of a
    [rows, in] product and at that index of another; and whether a lone row's product equals it (1/0)."""
    x = torch.randn(rows, weight.shape[1], generator=generator).to(weight.device, weight.dtype)
    reference = F.linear(x, weight)[0]
    same = 0
    for index in (i for i in INDICES if i < rows):
        other = torch.randn(rows, weight.shape[1], generator=generator).to(weight.device, weight.dtype)
        other[index] = x[0]
        same += int(torch.equal(F.linear(other, weight)[index], reference))
    return same, int(torch.equal(F.linear(x[:1], weight)[0], reference))


def main() -> None:
    loaded = loaded_from_arguments(__doc__.splitlines()[0])
    runtime = loaded.runtime
    print(f"runtime: {runtime.describe()}\nkey: {runtime.key}\n")
    lean = getattr(runtime.forward, "lean", None)
    if lean is None:
        return
    print("| forward | probe | AR pass ms | 8-row pass ms |\n|---|---|---:|---:|")
    for forward in graphed_forwards(lean):
        candidate = Runtime(loaded.model, forward, plan=runtime.plan)
        try:
            probe, times = probe_row_invariance(candidate).describe(), pass_milliseconds(candidate)
        except Exception as error:  # noqa: BLE001 - a kernel failing here is what this check is for
            print(f"| {forward.kind} | failed: {error!r} | | |")
            continue
        print(f"| {forward.kind} | {probe} | {times['1 rows']:.3f} | {times['8 rows']:.3f} |")
    generator = torch.Generator().manual_seed(0)
    _, qkv, out, _, gate_up, down = lean.layers[0]
    shapes = {"qkv": qkv.weight, "out": out.weight, "gate_up": gate_up.weight, "down": down.weight,
              "head": loaded.model.get_output_embeddings().weight}
    dtype = str(runtime.dtype).removeprefix("torch.")
    print(f"\ncuBLAS, {dtype}: a row's bits at other indices among {INVARIANT_ROWS} rows; alone vs among them")
    print("| linear | out x in | same at other indices | alone = among |\n|---|---|---:|---:|")
    tested = sum(i < INVARIANT_ROWS for i in INDICES)
    for name, weight in shapes.items():
        same, alone = same_row(weight.detach(), INVARIANT_ROWS, generator)
        print(f"| {name} | {weight.shape[0]} x {weight.shape[1]} | {same}/{tested} | {'yes' if alone else 'no'} |")


if __name__ == "__main__":
    main()
