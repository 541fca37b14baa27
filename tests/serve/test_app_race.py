"""benchmarks/gpu/app_race.py on this CPU, as check.sh runs it on a GPU: the app started, one prompt of a prompts
file raced through /race on the default model, the report written. Slow (the app's start: a minute or two)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_one_race_through_the_api_is_reported_with_the_same_text(tmp_path):
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text(json.dumps({"id": "colours", "prompt": "Name three colours."}) + "\n")
    done = subprocess.run([sys.executable, "benchmarks/gpu/app_race.py", "--device", "cpu", "--dtype", "float32",
                           "--prompts-file", str(prompts), "--prompts", "1", "--max-new-tokens", "8",
                           "--tree", "efficient:3/chain-groups", "--deadline", "800", "--out", str(tmp_path / "out")],
                          cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"},
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    report = json.loads((tmp_path / "out" / "app-race.json").read_text())
    (raced,) = report["prompts"]
    assert raced["id"] == "colours" and raced["identical"] and raced["ar_tok_s"] > 0 and raced["bita_tok_s"] > 0
    assert raced["ratio"] == raced["bita_tok_s"] / raced["ar_tok_s"] and report["complete"]
    assert report["summary"]["ratio_median"] == raced["ratio"] and report["summary"]["identical_prompts"] == 1
    assert report["device"].startswith("cpu (") and report["commit"]
    assert (tmp_path / "out" / "figures" / "00-race.json").is_file() and "| colours |" in (
        tmp_path / "out" / "app-race.md").read_text()
