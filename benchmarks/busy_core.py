"""An AR pass and a tree pass on a quiet machine and with another process keeping one core busy, under each way of
waiting that OpenMP offers the pass's threads: what a warm run costs on a shared machine.

A pass of the lean forward runs a few hundred OpenMP parallel regions (each layer's products, attention, norms). By
default libgomp's threads spin (about 300,000 rounds) at the end of each region before they sleep: on a quiet
machine that saves a wake-up a region; where another process holds one of the two cores, a thread spins on a peer
that is not running. Each policy runs in its own process (libgomp reads them when torch loads it), in rounds that
alternate the policies, quiet and busy, so a machine whose speed drifts skews all alike. The passes of a request
run on one thread fewer for each busy core (bita/runtime/threads.py): the "1 thread" row, here set for a whole
process (its first run measures a profile of its own, keyed by the thread count).

    PYTHONPATH=. .venv/bin/python benchmarks/busy_core.py [--rounds 3] [--dtype auto] [--tree efficient:2]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys

from bita.runtime.device import describe_cpu

POLICIES = {"default": {}, "GOMP_SPINCOUNT=10000": {"GOMP_SPINCOUNT": "10000"},
            "GOMP_SPINCOUNT=1000": {"GOMP_SPINCOUNT": "1000"},
            "OMP_WAIT_POLICY=PASSIVE": {"OMP_WAIT_POLICY": "PASSIVE"}, "1 thread": {"OMP_NUM_THREADS": "1"}}


def pass_ms(policy: dict, dtype: str, tree: str) -> tuple[float, float]:
    """(AR pass, tree pass) median ms after 300 tokens, from ``bita pass-cost`` in a process of its own."""
    found = subprocess.run([sys.executable, "-m", "bita", "pass-cost", "--trees", tree, "--repeats", "20", "--json",
                            "--dtype", dtype], capture_output=True, text=True, check=True,
                           env={**os.environ, **policy}).stdout
    passes = json.loads(found.splitlines()[-1])["passes"]
    return 1000 * passes[0]["seconds"], 1000 * passes[1]["seconds"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--dtype", default="auto")
    parser.add_argument("--tree", default="efficient:2")
    args = parser.parse_args()
    times = {(name, load): [] for name in POLICIES for load in ("quiet", "busy")}
    for _ in range(args.rounds):
        for load in ("quiet", "busy"):
            peer = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if load == "busy" else None
            try:
                for name, policy in POLICIES.items():
                    times[name, load].append(pass_ms(policy, args.dtype, args.tree))
            finally:
                if peer is not None:
                    peer.kill()
    print(f"{describe_cpu()}; --dtype {args.dtype}; median of {args.rounds} processes, each the median of 20 passes "
          f"after 300 tokens (min-max over processes)\n")
    print(f"| policy | AR pass quiet, ms | AR pass busy, ms | busy / quiet | {args.tree} quiet | {args.tree} busy |")
    print("|---|---:|---:|---:|---:|---:|")
    for name in POLICIES:
        quiet, busy = times[name, "quiet"], times[name, "busy"]
        cell = lambda runs, i: (f"{statistics.median(r[i] for r in runs):.1f} "  # noqa: E731
                                f"({min(r[i] for r in runs):.1f}-{max(r[i] for r in runs):.1f})")
        ratio = statistics.median(r[0] for r in busy) / statistics.median(r[0] for r in quiet)
        print(f"| {name} | {cell(quiet, 0)} | {cell(busy, 0)} | {ratio:.2f}x | {cell(quiet, 1)} | {cell(busy, 1)} |")


if __name__ == "__main__":
    main()
