"""``bita measure``: this machine's entries of the profile, each with what it chose, by how much, when and how long
it took, the spread and the runs observed; other machines' entries counted, not shown."""

import torch

from bita.cli import build_parser
from bita.runtime.device import machine_key
from bita.runtime.measured import PROFILE_FILE, write_entries

KERNELS = {"rows": [1, 4], "layers": [{"dot": 0.010, "native": 0.012, "stock": 0.05}, {"dot": 0.020, "native": 0.021}],
           "head": [{"dot": 0.002}, {"dot": 0.003}], "floors": {}}


def test_measure_shows_this_machines_entries_with_what_they_chose(tmp_path, monkeypatch):
    monkeypatch.setenv("BITA_CACHE", str(tmp_path))
    here = machine_key(torch.device("cpu"))
    entry = {"measured_at": "2026-11-29 01:00:00", "took_s": 4.2}
    write_entries(tmp_path / PROFILE_FILE, {
        f"{here}|plan": {**entry, "what": "kernel plan", "value": {"layers": "dot", "head": "dot", "seconds": KERNELS}},
        f"{here}|dtype": {**entry, "what": "dtype choice", "value": {
            "float32": {"1 rows": 14.0, "8 rows": 16.0}, "bfloat16": {"1 rows": 6.0, "8 rows": 8.0},
            "invariance": "row-invariant", "invariant": True}},
        f"{here}|probe": {**entry, "what": "row-invariance probe",
                          "value": {"rows": 32, "differing": 0, "worst": 0.0, "by_pass": {"prefill": 0}}},
        f"{here}|costs": {**entry, "what": "pass costs", "observed": {"1": [0.01, 0.011]}, "stale": "slower rows",
                          "value": {"key": "k", "ar": 0.01, "points": [[1, 0.01], [6, 0.012]],
                                    "spread": [[1, 0.009, 0.011], [6, 0.011, 0.013]]}},
        "another machine|plan": {**entry, "what": "kernel plan", "value": {}}})
    args = build_parser().parse_args(["measure"])
    text = args.run(args)["text"]
    assert "4 entries for it, 1 for others" in text and "measured 2026-11-29 01:00:00 in 4.2 s" in text
    # only paths timed at every row count are ranked (stock was dropped after one row)
    assert "layers dot 30.0 ms summed over 1+4 rows (native 33.0)" in text and "head dot 5.0 ms" in text
    assert "float32 30.0 ms, bfloat16 14.0 ms" in text and "row-invariant (32 rows bitwise equal at prefill" in text
    assert "6 rows 12.0 ms (11.0-13.0)" in text and "observed on 2 runs" in text and "STALE: slower rows" in text
    assert "another machine" not in text and "python -m bita measure --refresh" in text
