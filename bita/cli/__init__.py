"""Command line: ``bita generate ...`` (or ``python -m bita ...``). Errors print one line and exit
non-zero; notices go through ``logging`` (warnings only, unless ``-v``), the command's output to stdout.

One module per group of commands (generate; make-data, train, calibrate; bench, pass-cost; measure; space
build and push, over deploy.py), each registering its sub-commands; the options they share are in
arguments.py.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

from .. import __version__
from ..errors import BitaError
from . import bench, generate, measure, space, training
from .arguments import DefaultsShown, add_model_arguments, add_weights_argument, load_from, show_defaults

__all__ = ["add_model_arguments", "add_weights_argument", "build_parser", "load_from", "main"]

DESCRIPTION = ("BiTA: lossless speculative decoding of a Hugging Face causal LM by bi-directional tuning "
               "(Lin et al., IJCAI 2024). Greedy output is identical to plain decoding.")
LOG_LEVELS = (logging.WARNING, logging.INFO, logging.DEBUG)  # by the count of -v


def build_parser() -> argparse.ArgumentParser:
    prog = "python -m bita" if Path(sys.argv[0]).name == "__main__.py" else "bita"
    parser = argparse.ArgumentParser(prog=prog, description=DESCRIPTION, formatter_class=DefaultsShown)
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument("-v", "--verbose", action="count", default=0,
                        help="say more: -v progress and notices (the tree chosen, one-off conversions), -vv debug")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for group in (generate, training, bench, measure, space):
        group.add_commands(commands)
    show_defaults(parser)
    return parser


def print_report(report: dict, as_json: bool) -> None:
    if as_json:
        print(json.dumps(report, ensure_ascii=False))
        return
    print(report["text"])
    details = {k: v for k, v in report.items() if k != "text" and not isinstance(v, (list, dict))}
    print("\n---\n" + "  ".join(f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}" for k, v in details.items()),
          file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=LOG_LEVELS[min(args.verbose, 2)], format="%(message)s")
    try:
        report = args.run(args)
    except BitaError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    print_report(report, getattr(args, "json", False))
    return 0
