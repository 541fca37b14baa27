"""How long a person waits for the app: ``python app.py`` from process start to serving, then through the API the
first chat's first update (greedy), a second greedy chat's, and chats at temperatures never asked before (each a
new sampling setting: planned from the stored forecasts of the nearest setting, nothing forecast or timed).

    PYTHONPATH=. .venv/bin/python benchmarks/app_start.py [--starts 2] [--tokens 32] [-- app flags...]

Run it twice: the first start of a machine measures its profile (cold), the later ones read it (warm).
"""

import argparse
import json
import time
from pathlib import Path

from bita.runtime.device import describe_cpu
from bita.serve.app_process import running_app

REPO = Path(__file__).resolve().parents[1]
PROMPT = "Give three tips for staying focused while studying."
TEMPERATURES = (0, 0, 0.83, 0.61, 1.17)  # greedy twice, then settings no adapter ships


def first_update(client, temperature: float, tokens: int) -> tuple[float, float]:
    """(seconds to the chat's first streamed update, to its last) for ``PROMPT`` at ``temperature``."""
    asked = time.perf_counter()
    job = client.submit(PROMPT, None, "auto", tokens, None, temperature, 0.95, 0, 0, api_name="/chat")
    first = None
    for _ in job:
        first = first or time.perf_counter()
    job.result()
    done = time.perf_counter()
    return (first or done) - asked, done - asked


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--starts", type=int, default=2)
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("app_args", nargs="*")
    args = parser.parse_args()
    from gradio_client import Client

    results = []
    for start in range(args.starts):
        with running_app(REPO, REPO / "benchmarks" / "app-start.log", tuple(args.app_args)) as app:
            client = Client(app.url, verbose=False)
            chats = [first_update(client, temperature, args.tokens) for temperature in TEMPERATURES]
        results.append({"start_s": app.start_s, "chats": [{"temperature": t, "first_update_s": first, "total_s": total}
                                                          for t, (first, total) in zip(TEMPERATURES, chats)]})
        print(json.dumps(results[-1]))
    print(f"{describe_cpu()}: app served after " + ", ".join(f"{r['start_s']:.1f}" for r in results) + " s; first "
          "updates (s) at temperatures " + ", ".join(map(str, TEMPERATURES)) + ": "
          + "; ".join(", ".join(f"{c['first_update_s']:.2f}" for c in r["chats"]) for r in results))


if __name__ == "__main__":
    main()
