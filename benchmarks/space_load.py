"""Visitors at once on the app as a Space runs it (``SPACE_ID`` set, so with the Space's caps):
eight gradio_client clients ask /chat together, greedy; each answer is compared with the same
prompt's answer asked alone, lost requests are counted, and the waits (ask to first streamed
update) and answer times are reported as p50/p95.

    PYTHONPATH=. .venv/bin/python benchmarks/space_load.py [--clients 8] [--max-new-tokens 64] [--url URL]
"""

import argparse
import json
from pathlib import Path

from bita.runtime.device import describe_cpu
from bita.serve.app_process import running_app
from bita.serve.load import load_test

ROOT = Path(__file__).resolve().parents[1]
ADAPTER = "SmolLM2-135M-Instruct-bita"
PROMPTS = ["Name three fruits and their colours.", "What is the capital of France? Answer in one sentence.",
           "Write a haiku about the sea.", "Give two tips for sleeping well.",
           "Explain what a prime number is in one sentence.", "List three animals that live in the desert.",
           "Write a Python function that adds two numbers.", "Why is the sky blue? Answer briefly."]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=8, choices=range(1, len(PROMPTS) + 1), metavar="1-8")
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--url", help="a running app (default: start app.py here with SPACE_ID set)")
    parser.add_argument("--json", type=Path, help="write the figures and every answer here")
    args = parser.parse_args()
    prompts, settings = PROMPTS[: args.clients], (ADAPTER, "auto", args.max_new_tokens)
    if args.url:
        report = load_test(args.url, prompts, settings)
    else:
        env = {"SPACE_ID": "bita-bench/space", "HF_HUB_OFFLINE": "1"}
        with running_app(ROOT, ROOT / "test-artifacts" / "space-load-server.log", env=env) as app:
            report = load_test(app.url, prompts, settings)
    summary = {**report.summary(), "max_new_tokens": args.max_new_tokens, "machine": describe_cpu()}
    print(json.dumps(summary, indent=1))
    for answer, alone in zip(report.together, report.alone):
        print(f"wait {answer.wait_s:5.1f} s, answer {answer.total_s:5.1f} s (alone {alone.total_s:4.1f} s), "
              f"{'identical' if answer.text == alone.text else 'DIFFERENT'}: {answer.prompt}")
    for lost in report.lost:
        print(f"LOST {lost}")
    if args.json:
        answers = [{"prompt": a.prompt, "text": a.text, "alone": b.text, "wait_s": a.wait_s, "total_s": a.total_s}
                   for a, b in zip(report.together, report.alone)]
        args.json.write_text(json.dumps({**summary, "answers": answers, "lost_requests": report.lost}, indent=1) + "\n")


if __name__ == "__main__":
    main()
