"""BiTA in the browser: colour-coded streaming chat, AR vs BiTA side by side, and a pass inspector.

    python app.py                 # the embedded SmolLM2-135M-Instruct on this machine's device
    python app.py --model PATH    # any HF causal LM or GGUF (the shipped adapter made for it, if any)
    python app.py --model PATH --adapter DIR   # with an adapter of your own

The Space's entry point: flags, threads, the model load (on a Space built for another model, that
one: bita/cli/deploy.py), launch. The page lives in ``bita/serve``
(page.py wires layout.py's components to handlers.py and inspector.py), decoding in ``bita``,
figures in ``viz``. One model load serves every user; each browser session keeps its own
conversation in a ``gr.State``; model work goes through one queue whose concurrency and length are
bounded. On a Hugging Face Space (``SPACE_ID`` set) the caps are tighter (space_runtime.py); model work runs on
one model thread, or on ZeroGPU inside ``spaces.GPU`` functions (model_work.py). Binds to localhost unless told
otherwise.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from functools import partial
from pathlib import Path

from bita.cli import add_model_arguments, add_weights_argument, load_from
from bita.cli.deploy import space_model
from bita.drafts.sources import DEFAULT_DRAFTS, DRAFT_OPTIONS
from bita.errors import BitaError
from bita.generate import MAX_NEW_TOKENS_LIMIT
from bita.runtime.cpu_quota import container_cpus
from bita.runtime.threads import set_configured
from bita.serve.decoding_files import MAX_OPENED_MB
from bita.serve.engine import Engine
from bita.serve.model_work import model_work_for
from bita.serve.page import PAGE_CSS, PAGE_JS, build_app
from bita.serve.space_runtime import Limits, ensure_model_package, limits_for

logger = logging.getLogger("app")


def parse_arguments(argv: list[str] | None = None) -> argparse.Namespace:
    """The CLI's model flags (--model, --device, --dtype, --quantize, --kernels) and the app's own."""
    limits = limits_for(os.environ)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_model_arguments(parser)
    add_weights_argument(parser)
    parser.add_argument("--host", help="address to bind (default: 127.0.0.1, or $GRADIO_SERVER_NAME)")
    parser.add_argument("--port", type=int, help="port (default: 7860, or $GRADIO_SERVER_PORT)")
    parser.add_argument("--concurrency", type=int, default=1, help="model requests served at once")
    parser.add_argument("--queue-size", type=int, default=limits.queue_size,
                        help="requests that may wait; more are turned away (default: 32, on a Space 16)")
    parser.add_argument("--max-new-tokens", type=int, default=limits.max_new_tokens,
                        help="the most new tokens one answer may ask for (default: 1024, on a Space 256)")
    parser.add_argument("--threads", type=int, default=container_cpus(),
                        help="torch threads (default: the CPUs the container's CPU quota allows)")
    parser.add_argument("--adapter", help="the adapter selected when a page opens: a shipped name or a directory "
                                          "(default: the shipped adapter made for this model, else untrained)")
    parser.add_argument("--tree", default="auto", help="the draft tree selected when a page opens")
    parser.add_argument("--drafts", choices=DRAFT_OPTIONS, default=DEFAULT_DRAFTS,
                        help="the drafts selected when a page opens")
    args = parser.parse_args(argv)
    for flag in ("concurrency", "queue_size", "threads"):
        if getattr(args, flag) < 1:
            parser.error(f"--{flag.replace('_', '-')} must be at least 1")
    if not 1 <= args.max_new_tokens <= MAX_NEW_TOKENS_LIMIT:
        parser.error(f"--max-new-tokens must be from 1 to {MAX_NEW_TOKENS_LIMIT}")
    if args.model == "default":  # a Space built for another model (space build --model) serves that one
        args.model = space_model(Path(__file__).resolve().parent) or args.model
    return args


def main() -> None:
    args = parse_arguments()
    logging.basicConfig(level=logging.INFO, format="%(message)s")  # a server's log: its notices are its record
    try:
        work = model_work_for(os.environ)
        if args.model == "default":
            ensure_model_package(os.environ)
    except BitaError as error:
        sys.exit(f"error: {error}")
    set_configured(args.threads)
    try:
        engine = Engine(partial(load_from, args), args.adapter, work)
    except BitaError as error:
        sys.exit(f"error: {error}")
    _, plan = engine.setup(engine.default_adapter, "auto")  # measure this device's pass costs before serving
    logger.info("tree for %s: %s", engine.default_adapter, plan.reason)
    limits = Limits(args.max_new_tokens, args.queue_size)
    build_app(engine, limits, args.concurrency, args.tree, args.drafts).launch(
        server_name=args.host, server_port=args.port, js=PAGE_JS, css=PAGE_CSS,
        max_file_size=f"{MAX_OPENED_MB}mb")  # a larger upload is refused before it is written to disk


if __name__ == "__main__":
    main()
