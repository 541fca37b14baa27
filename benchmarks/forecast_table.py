"""Forecast tau of draft configurations at several temperatures, from the shipped adapter's stored
statistics alone (no decoding): what `auto` weighs, to set beside tau measured by `bench` or
benchmarks/acceptance.py on the same configurations.

    PYTHONPATH=. python benchmarks/forecast_table.py --temperatures 0,0.7,1.0 "efficient:2|both" "efficient:2,1|masks"

A configuration is ``TREE|DRAFTS`` as in benchmarks/acceptance.py (DRAFTS masks or both: both adds
the default n-gram chain).
"""

import argparse

from bita.decode.sampling import Sampling
from bita.model.loading import load_model
from bita.model.shipped import resolve_adapter
from bita.plan.sampled_forecast import forecasting
from bita.plan.tree_plan import DEFAULT_NGRAM_TOKENS, resolve_tree


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("configs", nargs="+", help="TREE|DRAFTS")
    parser.add_argument("--temperatures", default="0,0.7,1.0", help="comma list (0: greedy)")
    args = parser.parse_args()
    temperatures = [float(t) for t in args.temperatures.split(",")]
    adapter, _ = resolve_adapter(load_model("default", "cpu"), None)
    print("| configuration | " + " | ".join(f"T = {t}" for t in temperatures) + " |")
    print("|---|" + "---:|" * len(temperatures))
    for config in args.configs:
        spec, drafts = (config.split("|") + ["masks"])[:2]
        tree, chain = resolve_tree(spec, adapter), DEFAULT_NGRAM_TOKENS if drafts == "both" else 0
        taus = []
        for temperature in temperatures:
            forecaster, passes = forecasting(adapter, Sampling(temperature, seed=0))
            taus.append(f"{forecaster(tree, passes, chain).tokens_per_pass:.3f}")
        print(f"| `{config}` | " + " | ".join(taus) + " |")


if __name__ == "__main__":
    main()
