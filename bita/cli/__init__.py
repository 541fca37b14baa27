"""Command line: ``python -m bita generate ...``. Errors print one line and exit non-zero.

One module per group of commands (generate; make-data, train, calibrate; bench, pass-cost; space
build and push, over deploy.py), each registering its sub-commands; the options they share are in
arguments.py.
"""

from __future__ import annotations

import argparse
import json
import sys

from ..errors import BitaError
from . import generate, measure, space, training
from .arguments import add_model_arguments, load_from

__all__ = ["add_model_arguments", "build_parser", "load_from", "main"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bita", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    for group in (generate, training, measure, space):
        group.add_commands(commands)
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
