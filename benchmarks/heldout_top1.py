"""Held-out top-1 accuracy per mask depth of several adapters on the same samples, the
measure that training logs, so adapters trained on different data compare fairly.

    python benchmarks/heldout_top1.py --data assets/data/sharegpt-smollm2 --samples 64 \\
        default runs/adapter
"""

import argparse
import json

from bita.model.loading import load_model
from bita.model.shipped import resolve_adapter
from bita.training.objective import SarObjective
from bita.training.train import TrainConfig, evaluate, split_samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("adapters", nargs="+", help="adapter directories, shipped names, or 'default'")
    parser.add_argument("--data", default="assets/data/sharegpt-smollm2")
    parser.add_argument("--samples", type=int, default=64)
    args = parser.parse_args()
    loaded = load_model("default", "cpu")
    config = TrainConfig(data=args.data, eval_samples=args.samples)
    _, heldout = split_samples(config)
    for name in args.adapters:
        adapter, _ = resolve_adapter(loaded, None if name == "default" else name)
        top1 = evaluate(SarObjective(adapter, loaded.model), heldout, config, loaded.device)
        print(json.dumps({"adapter": name, "samples": len(heldout), "heldout_top1": [round(a, 4) for a in top1]}))


if __name__ == "__main__":
    main()
