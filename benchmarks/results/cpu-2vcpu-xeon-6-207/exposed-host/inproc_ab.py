"""The exposed host work a step (benchmarks/exposed_host.py's stand-in) before and after this change, in ONE process
with the two alternating (this VM's times move 1.5x between processes): "before" puts back the three steps the change
replaced (the candidate ids and the cache's kept rows by ``torch.tensor`` of a list, the pass's mask rows sliced, cast
and repeated each pass, ``allowed_keys`` by torch's expand/ones/cat), "after" is the code as it is.

    PYTHONPATH=. .venv/bin/python benchmarks/results/cpu-2vcpu-xeon-6-207/exposed-host/inproc_ab.py [--rounds 8]
"""
import argparse
import statistics
import sys

import torch

from bita.decode import masks, step
from bita.model.adapter import BitaAdapter
from bita.plan.costs import quartiles
from bita.runtime import device, static_kv

sys.argv, arguments = sys.argv[:1], sys.argv[1:]
parser = argparse.ArgumentParser()
parser.add_argument("--rounds", type=int, default=8)
rounds = parser.parse_args(arguments).rounds


def old_allowed_keys(layout, n_prompt, n_cached):
    rows = layout.rows
    prompt = layout.is_mask[:, None].expand(rows, n_prompt)
    cached = torch.ones(rows, n_cached, dtype=torch.bool)
    return torch.cat([prompt, cached, layout.visible], dim=1)


def old_mask_rows(self, n_masks, groups, dtype, where):
    return self.mask_embeddings[:n_masks].to(where, dtype).repeat(groups, 1)


def old_long_tensor(values, offset=0):
    return torch.tensor(values) + offset if offset else torch.tensor(values)


NEW = {(step, "allowed_keys"): step.allowed_keys, (BitaAdapter, "mask_rows"): BitaAdapter.mask_rows,
       (step, "long_tensor"): step.long_tensor, (static_kv, "long_tensor"): static_kv.long_tensor}
OLD = {(step, "allowed_keys"): old_allowed_keys, (BitaAdapter, "mask_rows"): old_mask_rows,
       (step, "long_tensor"): old_long_tensor, (static_kv, "long_tensor"): old_long_tensor}
assert masks.allowed_keys is step.allowed_keys and device.long_tensor is step.long_tensor


def use(functions):
    for (owner, name), function in functions.items():
        setattr(owner, name, function)


from benchmarks.exposed_host import measure, stand_in, walk_as_on_a_gpu  # noqa: E402

torch.set_num_threads(1)
gpu_like = walk_as_on_a_gpu()
gpu_like.__enter__()
forward, run = stand_in("efficient:6,5,3", 4)
medians = {"before": [], "after": []}
for _ in range(rounds):
    for label, functions in (("before", OLD), ("after", NEW)):
        use(functions)
        figures, operations = measure(forward, run, 300)
        exposed = figures["exposed"]
        low, high = quartiles(exposed)
        medians[label].append(statistics.median(exposed))
        print(f"{label}: exposed {statistics.median(exposed):.1f} us ({low:.1f}-{high:.1f}), {len(exposed)} steps; "
              f"aten operations {statistics.median(operations)}", flush=True)
use(NEW)
ratios = [after / before for before, after in zip(medians["before"], medians["after"])]
low, high = quartiles(ratios)
print(f"after / before, per round: median {statistics.median(ratios):.3f} ({low:.3f}-{high:.3f}); "
      f"before {statistics.median(medians['before']):.1f} us, after {statistics.median(medians['after']):.1f} us")
