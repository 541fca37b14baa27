"""Token rows looked up inside the pass against embedded before it, in ONE process, the two alternating (this VM's
times move 1.5x between processes): the stand-in of benchmarks/exposed_host.py with its forward's ``token_rows`` on
(the ids staged with the positions, the embeddings looked up inside the pass) and off (``Runtime.run`` looks the ids
up, concatenates the mask rows and the pass copies the rows into its table, as every pass did before).

    PYTHONPATH=. .venv/bin/python benchmarks/results/cpu-2vcpu-xeon-6-207/exposed-host/token_rows_ab.py [--rounds 6]
"""
import argparse
import statistics

import torch

from benchmarks.exposed_host import measure, stand_in, walk_as_on_a_gpu
from bita.plan.costs import quartiles

parser = argparse.ArgumentParser()
parser.add_argument("--rounds", type=int, default=6)
rounds = parser.parse_args().rounds
torch.set_num_threads(1)
medians = {"embedded before": [], "inside the pass": []}
with walk_as_on_a_gpu():
    forward, run = stand_in("efficient:6,5,3", 4)
    for _ in range(rounds):
        for label, inside in (("embedded before", False), ("inside the pass", True)):
            forward.token_rows = inside
            figures, operations, _ = measure(forward, run, 300)
            exposed = figures["exposed"]
            low, high = quartiles(exposed)
            medians[label].append(statistics.median(exposed))
            print(f"{label}: exposed {statistics.median(exposed):.1f} us ({low:.1f}-{high:.1f}), {len(exposed)} steps; "
                  f"aten operations {statistics.median(operations)}", flush=True)
ratios = [inside / before for before, inside in zip(medians["embedded before"], medians["inside the pass"])]
low, high = quartiles(ratios)
print(f"inside / before, per round: median {statistics.median(ratios):.3f} ({low:.3f}-{high:.3f}); "
      f"before {statistics.median(medians['embedded before']):.1f} us, "
      f"inside {statistics.median(medians['inside the pass']):.1f} us")
