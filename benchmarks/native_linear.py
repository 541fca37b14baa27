"""native_linear.c at HEAD (or ``--old REV``) against the working tree's, on the default model's layers as the
lean forward runs them (its fused Q/K/V and gate/up weights, 30 layers: every layer product in sequence), in one
process, interleaved (old, new, old, new, ...) so that both see the same machine load; or, with ``--amx``, the
runtime library's native path (old) against its AMX path (new, native_amx.c: bf16 only, where it runs).

    PYTHONPATH=. .venv/bin/python benchmarks/native_linear.py [--rounds 15] [--rows 1,2,4,8,12,16,24,32]
        [--threads N] [--clock cpu] [--old REV | --old-file C | --amx] [--new-file C]

Each version is compiled alone (native_linear.c and the working tree's native_simd.h, native.py's flags) into a
temporary library and called through ctypes; the weights are packed once (the packing is the same in both).
Prints, per dtype and row count, the median ms of a sweep over all products and its 25-75 % spread, the ratio
new / old, and whether the two agree bitwise (they do where no input or partial sum is subnormal; the AMX path sums
in another order, so it does not).
"""
import argparse
import ctypes
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import torch

from bita.model.loading import load_model
from bita.runtime import native
from bita.runtime.device import describe_device
from bita.runtime.kernels import run_products

SOURCE = Path(native.__file__).with_name("native_linear.c")


def build(source: str, folder: Path, name: str) -> ctypes.CDLL:
    """``source`` (native_linear.c's text) compiled with native.py's flags into ``folder``/``name``.so."""
    path = folder / f"{name}.c"
    path.write_text(source)
    target = folder / f"{name}.so"
    compiler = native._compiler()
    subprocess.run([compiler, *native.FLAGS, f"-I{SOURCE.parent}", str(path), "-o", str(target)], check=True)
    library = ctypes.CDLL(str(target))
    for function in ("bita_linear_bf16", "bita_linear_f32"):
        getattr(library, function).argtypes = [ctypes.c_void_p] * 5 + [ctypes.c_int] * 4
    return library


def sweep(function, products: list, inputs: dict, outputs: dict) -> None:
    """Every product once by the C ``function``, at the rows of ``inputs``' x (one x per input width)."""
    threads = torch.get_num_threads()
    for index, (packed, bias, out_features, columns) in enumerate(products):
        x, y = inputs[columns], outputs[index]
        function(x.data_ptr(), packed.data_ptr(), bias.data_ptr() if bias is not None else None, None, y.data_ptr(),
                 x.shape[0], out_features, columns, threads)


def quartiles(times: list[float]) -> tuple[float, float, float]:
    """The median and the 25 % and 75 % points of ``times`` (ms)."""
    q1, median, q3 = statistics.quantiles(times, n=4)
    return median, q1, q3


@torch.inference_mode()
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", default="HEAD", help="the git revision of native_linear.c to compare with")
    parser.add_argument("--old-file", help="a native_linear.c to compare with, in place of --old's")
    parser.add_argument("--new-file", default=str(SOURCE), help="the native_linear.c to time (the working tree's)")
    parser.add_argument("--amx", action="store_true",
                        help="the runtime library's native path (old) against its AMX path (new), in bf16")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--rows", default="1,2,4,8,12,16,24,32")
    parser.add_argument("--dtypes", default="bfloat16,float32")
    parser.add_argument("--threads", type=int, default=0, help="OpenMP threads (0: torch's)")
    parser.add_argument("--clock", default="wall", choices=("wall", "cpu"),
                        help="cpu: this thread's CPU time (one thread only: a shared machine's waits left out)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.clock == "cpu" and torch.get_num_threads() != 1:
        parser.error("--clock cpu counts the calling thread's time alone: run it with --threads 1")
    clock = time.thread_time if args.clock == "cpu" else time.perf_counter
    assert native.unavailable() is None, native.unavailable()
    if args.amx:
        assert native.amx_unavailable() is None, native.amx_unavailable()
        args.dtypes = "bfloat16"
    generator = torch.Generator().manual_seed(0)
    with tempfile.TemporaryDirectory() as scratch:
        if args.amx:
            old = new = native._library
            names = ("native path (native_linear.c)", "AMX path (native_amx.c)")
        else:
            old_source = Path(args.old_file).read_text() if args.old_file else subprocess.run(
                ["git", "show", f"{args.old}:bita/runtime/native_linear.c"], check=True, capture_output=True,
                text=True, cwd=SOURCE.parent).stdout
            old = build(old_source, Path(scratch), "old")
            new = build(Path(args.new_file).read_text(), Path(scratch), "new")
            names = (f"{args.old_file or 'native_linear.c at ' + args.old}", args.new_file)
        for library in (old, new):
            library.bita_isa.restype = ctypes.c_char_p
        print(f"{describe_device(torch.device('cpu'))}; old: {names[0]} "
              f"({old.bita_isa().decode()}), new: {names[1]}; median ms of {args.rounds} sweeps over all layer "
              f"products [25-75 %] ({args.clock} time), old and new interleaved\n")
        for dtype_name in args.dtypes.split(","):
            dtype = getattr(torch, dtype_name)
            suffix = "bf16" if dtype == torch.bfloat16 else "f32"
            loaded = load_model("default", device="cpu", dtype=dtype_name, kernels="stock")
            head = loaded.model.get_output_embeddings()
            layers = run_products(loaded.model, [m for m in loaded.model.modules()
                                                 if type(m).__name__ == "Linear" and m is not head])
            kernels = ("native", "amx") if args.amx else ("native", "native")
            products = {name: [(native.pack(weight, kernel), bias.float().contiguous() if bias is not None else None,
                                weight.shape[0], weight.shape[1]) for weight, bias in layers]
                        for name, kernel in zip(("old", "new"), kernels)}
            functions = {"old": getattr(old, f"bita_linear_{suffix}"),
                         "new": new.bita_amx_linear if args.amx else getattr(new, f"bita_linear_{suffix}")}
            flops = 2 * sum(out * columns for _, _, out, columns in products["new"])
            print(f"{dtype_name}: {len(products['new'])} products, {flops / 1e9:.2f} GFLOP a row\n")
            print("| rows | old ms | new ms | new / old | GFLOP/s new | bitwise equal |\n"
                  "|---:|---:|---:|---:|---:|---|")
            for rows in map(int, args.rows.split(",")):
                inputs = {columns: torch.randn(rows, columns, generator=generator).to(dtype)
                          for _, _, _, columns in products["new"]}
                results = {}
                for name in ("old", "new"):
                    results[name] = [torch.empty(rows, out, dtype=dtype) for _, _, out, _ in products[name]]
                    sweep(functions[name], products[name], inputs, results[name])  # warm up; results compared
                equal = all(torch.equal(a, b) for a, b in zip(results["old"], results["new"]))
                times = {"old": [], "new": []}
                for _ in range(args.rounds):
                    for name in ("old", "new"):
                        started = clock()
                        sweep(functions[name], products[name], inputs, results[name])
                        times[name].append(1000 * (clock() - started))
                (old_ms, old_q1, old_q3), (new_ms, new_q1, new_q3) = quartiles(times["old"]), quartiles(times["new"])
                print(f"| {rows} | {old_ms:.1f} [{old_q1:.1f}-{old_q3:.1f}] | {new_ms:.1f} [{new_q1:.1f}-{new_q3:.1f}] "
                      f"| {new_ms / old_ms:.2f} | {flops * rows / new_ms / 1e6:.0f} | {'yes' if equal else 'NO'} |",
                      flush=True)
            print()


if __name__ == "__main__":
    main()
