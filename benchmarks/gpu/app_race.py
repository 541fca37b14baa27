"""The AR-vs-BiTA race driven through the app's own API: ``app.py`` started on a free local port, then ``/race``
asked through gradio_client for each prompt, greedy, one after another, as a visitor would press Race.

    PYTHONPATH=. python benchmarks/gpu/app_race.py --model default --device cuda --dtype bfloat16 --prompts 8 \\
        [--prompts-file mt80.jsonl] [--max-new-tokens 128] [--tree auto] [--deadline 600] --out DIR

Per prompt: AR's and BiTA's tok/s (each lane's tokens over its own passes' seconds, read from the race's
figure), their ratio, and whether both lanes gave the same text (the race's table says so, from the token ids).
Writes to --out: app-race.json (those, and the ratio's median with its 25th-75th percentiles), app-race.md (the
same with the device, the commit and the command), figures/ (each race's two Plotly figures as JSON) and the
app's log. The app is stopped on every exit: done, an error, Ctrl-C, SIGTERM or --deadline (then what was raced
so far is written, and the exit status is 1).
"""

from __future__ import annotations

import argparse
import json
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

from bita.bench.suites import load_prompts
from bita.errors import BitaError
from bita.runtime.device import describe_device
from bita.serve.app_process import running_app
from bita.serve.reports import SAME_TEXT

ROOT = Path(__file__).resolve().parents[2]
GREEDY = (0, 1, 0, "")  # temperature, top-p, top-k, seed: the race's sampling settings


def parse_arguments(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="default", help="app.py's --model")
    parser.add_argument("--device", default="auto", help="app.py's --device: auto, cpu, cuda, cuda:N")
    parser.add_argument("--dtype", default="auto", help="app.py's --dtype: auto, float32, bfloat16, float16")
    parser.add_argument("--prompts", type=int, default=8, help="the first N prompts (default 8)")
    parser.add_argument("--prompts-file", help="JSONL as `bita bench --prompts` reads it (default: MT-Bench's "
                                               "first turns)")
    parser.add_argument("--max-new-tokens", type=int, default=128)
    parser.add_argument("--tree", default="auto", help="the race's draft tree (default: auto, as the page opens)")
    parser.add_argument("--deadline", type=float, default=600, help="seconds for everything, the app's start too")
    parser.add_argument("--out", type=Path, required=True, help="folder for the results")
    args = parser.parse_args(argv)
    if args.prompts < 1 or args.max_new_tokens < 1 or args.deadline <= 0:
        parser.error("--prompts and --max-new-tokens must be at least 1, --deadline above 0")
    return args


def race_prompts(prompts_file: str | None, count: int) -> list[tuple[str, str]]:
    """(id, text) of the first ``count`` prompts; BitaError for one of several turns (a race takes one message)."""
    prompts = load_prompts("mt-bench", prompts_file, limit=count)
    several = [prompt.id for prompt in prompts if len(prompt.messages) != 1]
    if several:
        raise BitaError(f"the race takes one user message, and these prompts have several turns: {several}")
    return [(prompt.id, prompt.messages[0]["content"]) for prompt in prompts]


def plotly_json(plot) -> dict:
    """A gr.Plot output as gradio_client returns it, as the figure's Plotly JSON."""
    figure = plot.get("plot", plot) if isinstance(plot, dict) else plot
    return json.loads(figure) if isinstance(figure, str) else figure


def lane_rates(figure: dict) -> dict[str, float]:
    """Each lane's tok/s from the race's figure (viz/race.py: a lane is a trace named 'NAME: ...' whose last
    point is its tokens after its passes' seconds)."""
    rates = {}
    for trace in figure["data"]:
        seconds, tokens = trace["x"][-1], trace["y"][-1]
        rates[trace["name"].split(":")[0]] = tokens / seconds if seconds > 0 else 0.0
    return rates


def race_once(client, prompt: str, args: argparse.Namespace, timeout: float) -> tuple[dict, list[dict]]:
    """One race through ``/race``: (its figures, AR and BiTA tok/s, their ratio, same text), and its two figures."""
    job = client.submit(prompt, None, args.tree, args.max_new_tokens, None, *GREEDY, api_name="/race")
    try:
        _, _, table, race_plot, speed_plot = job.result(timeout=timeout)
    except TimeoutError:
        job.cancel()
        raise
    figures = [plotly_json(race_plot), plotly_json(speed_plot)]
    rates = lane_rates(figures[0])
    ar, bita = rates["AR"], rates["BiTA"]
    return {"ar_tok_s": ar, "bita_tok_s": bita, "ratio": bita / ar if ar > 0 else 0.0,
            "identical": SAME_TEXT in table}, figures


def ratio_summary(results: list[dict]) -> dict:
    """The BiTA/AR ratio's median and 25th and 75th percentiles over the prompts raced."""
    ratios = [result["ratio"] for result in results]
    if not ratios:
        return {}
    p25, median, p75 = statistics.quantiles(ratios, n=4, method="inclusive") if len(ratios) > 1 else ratios * 3
    return {"ratio_median": median, "ratio_p25": p25, "ratio_p75": p75,
            "identical_prompts": sum(result["identical"] for result in results), "raced": len(ratios)}


def device_name(device: str) -> str:
    """The GPU's name on CUDA, else this CPU's model (/proc/cpuinfo)."""
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    return describe_device(torch.device(device))


def commit() -> str:
    """The commit packed for a GPU machine (.gpu/c/commit), else the checkout's."""
    packed = ROOT / ".gpu" / "c" / "commit"
    if packed.is_file():
        return packed.read_text().strip()
    done = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    return done.stdout.strip() or "unknown"


def markdown(report: dict) -> str:
    """The report as a short Markdown page: where and how it ran, one row per prompt, the ratio's median."""
    rows = [f"| {r['id']} | {r['ar_tok_s']:.1f} | {r['bita_tok_s']:.1f} | {r['ratio']:.2f} | "
            f"{'yes' if r['identical'] else 'NO'} |" for r in report["prompts"]]
    summary = report["summary"]
    headline = (f"BiTA / AR tok/s: median **{summary['ratio_median']:.2f}x** (25th-75th percentile "
                f"{summary['ratio_p25']:.2f}-{summary['ratio_p75']:.2f}), same text in "
                f"{summary['identical_prompts']} of {summary['raced']}" if summary else "No prompt was raced")
    return "\n".join([
        "# The race through the app's API", "",
        f"Device: {report['device']}. Commit: {report['commit']}. App started in {report['start_s']:.0f} s.", "",
        f"```\n{report['command']}\n```", "", headline + ("" if report["complete"] else " (stopped at the deadline)")
        + ".", "", "| prompt | AR tok/s | BiTA tok/s | ratio | same text |", "|---|---:|---:|---:|---|", *rows, ""])


def write(out: Path, report: dict) -> None:
    (out / "app-race.json").write_text(json.dumps(report, indent=1) + "\n")
    (out / "app-race.md").write_text(markdown(report))


def stop_on_sigterm() -> None:
    """SIGTERM (``timeout``'s) raises SystemExit, so the app's process is stopped on the way out."""
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("app_race: terminated"))


def main(argv: list[str] | None = None) -> int:
    args = parse_arguments(argv)
    stop_on_sigterm()
    started = time.perf_counter()

    def left() -> float:
        """Seconds to the deadline."""
        return args.deadline - (time.perf_counter() - started)

    prompts = race_prompts(args.prompts_file, args.prompts)
    (args.out / "figures").mkdir(parents=True, exist_ok=True)
    command = " ".join([Path(sys.executable).name, *sys.argv])
    report = {"device": device_name(args.device), "commit": commit(), "command": command,
              "max_new_tokens": args.max_new_tokens, "tree": args.tree, "complete": False, "prompts": []}
    app_args = ("--model", args.model, "--device", args.device, "--dtype", args.dtype,
                "--max-new-tokens", str(args.max_new_tokens))
    print(f"app_race: starting app.py {' '.join(app_args)} on {report['device']}", flush=True)
    with running_app(ROOT, args.out / "app.log", app_args, timeout_s=left()) as app:
        from gradio_client import Client

        report["start_s"] = app.start_s
        print(f"app_race: serving at {app.url} after {app.start_s:.0f} s", flush=True)
        client = Client(app.url, verbose=False)
        for index, (prompt_id, text) in enumerate(prompts):
            try:
                if left() <= 0:
                    raise TimeoutError
                result, figures = race_once(client, text, args, left())
            except TimeoutError:
                print(f"app_race: deadline reached during {prompt_id}", flush=True)
                break
            report["prompts"].append({"id": prompt_id, **result})
            for name, figure in zip(("race", "speed"), figures):
                (args.out / "figures" / f"{index:02d}-{name}.json").write_text(json.dumps(figure))
            report["summary"] = ratio_summary(report["prompts"])
            write(args.out, report)
            print(f"app_race: {prompt_id}: AR {result['ar_tok_s']:.1f} tok/s, BiTA {result['bita_tok_s']:.1f} "
                  f"tok/s, {result['ratio']:.2f}x, {'same text' if result['identical'] else 'TEXTS DIFFER'}",
                  flush=True)
        report["complete"] = len(report["prompts"]) == len(prompts)
    report["summary"] = ratio_summary(report["prompts"])
    write(args.out, report)
    print(markdown(report), flush=True)
    return 0 if report["complete"] else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BitaError as error:
        sys.exit(f"error: {error}")
