"""``python -m bita measure``: the machine profile (what was measured here, what it chose, by how much, when, with
its spread), and ``--refresh`` to measure this machine again on purpose (runtime/measured.py)."""

from __future__ import annotations

import argparse

from ..runtime.kernel_plan import summed_times
from ..runtime.runtime import Invariance
from .arguments import ADAPTER_HELP, add_model_arguments, add_weights_argument, load_from


def add_commands(commands: argparse._SubParsersAction) -> None:
    """Register ``measure``."""
    measure = commands.add_parser("measure", help="show this machine's profile (kernel plans, dtype choice, pass "
                                  "costs: measured once); --refresh measures it again")
    add_model_arguments(measure)
    add_weights_argument(measure)
    measure.add_argument("--adapter", help=ADAPTER_HELP)
    measure.add_argument("--refresh", action="store_true", help="drop this machine's entries and measure what "
                         "loading --model and planning its tree need, with progress")
    measure.add_argument("--json", action="store_true", help="print the profile's entries as one JSON object")
    measure.set_defaults(run=run_measure)


def summary(what: str, value: dict) -> str:
    """One line on what an entry chose and by how much."""
    if what == "kernel plan":
        parts = []
        for name in ("layers", "head"):
            times = value["seconds"]
            full = {path: 1000 * seconds for path, seconds in summed_times(times, name, times["rows"]).items()}
            others = ", ".join(f"{path} {full[path]:.1f}" for path in sorted(full, key=full.get) if path != value[name])
            parts.append(f"{name} {value[name]} {full.get(value[name], 0):.1f} ms summed over "
                         f"{'+'.join(map(str, times['rows']))} rows ({others or 'no other path'})")
        return "; ".join(parts)
    if what == "dtype choice":
        costs = {dtype: sum(value[dtype].values()) for dtype in ("float32", "bfloat16")}
        return (f"float32 {costs['float32']:.1f} ms, bfloat16 {costs['bfloat16']:.1f} ms (AR + 8-row pass); bf16 "
                f"{value['invariance']}")
    if what == "pass costs":
        spread = {rows: (low, high) for rows, low, high in value.get("spread", [])}
        return ", ".join(f"{rows} rows {1000 * seconds:.1f} ms" + (
            f" ({1000 * spread[rows][0]:.1f}-{1000 * spread[rows][1]:.1f})" if rows in spread else "")
            for rows, seconds in value["points"])
    if what == "row-invariance probe":
        return Invariance(**value).describe()
    return ", ".join(f"{name} {number:.1f}" for name, number in value.items() if isinstance(number, float))


def run_measure(args: argparse.Namespace) -> dict:
    from ..model.loading import pick_device
    from ..runtime.device import machine_key
    from ..runtime.measured import forget, profile_path, read_entries

    path = profile_path()
    here = machine_key(pick_device(args.device))
    dropped = []
    if args.refresh:
        from ..model.shipped import resolve_adapter
        from ..plan.autotree import cost_table, stored_forecasts

        dropped = forget(path, lambda key, entry: here not in key)
        loaded = load_from(args)
        adapter, _ = resolve_adapter(loaded, args.adapter)
        if adapter.config.acceptance:
            cost_table(loaded, adapter)
            stored_forecasts(adapter)
    entries, problem = read_entries(path)
    mine = {key: entry for key, entry in entries.items() if here in key}
    lines = [f"machine profile {path}" + (f" (cannot be used: {problem})" if problem else ""),
             f"this machine: {here}", f"{len(mine)} entries for it, {len(entries) - len(mine)} for others"
             + (f"; dropped and measured again: {', '.join(dropped)}" if dropped else "")]
    for entry in mine.values():
        stale = f"  STALE: {entry['stale']}" if entry.get("stale") else ""
        observed = entry.get("observed", {})
        runs = f"; real passes observed on {max(map(len, observed.values()))} runs" if observed else ""
        lines.append(f"- {entry.get('what', '?')}, measured {entry.get('measured_at', '?')} in "
                     f"{entry.get('took_s', 0):.1f} s{runs}: {summary(entry.get('what', ''), entry['value'])}{stale}")
    lines.append("measure again: python -m bita measure --refresh")
    return {"profile": str(path), "machine": here, "entries": mine, "text": "\n".join(lines)}
