"""``python -m bita space build | push``: the Hugging Face Space's folder, and its upload."""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path


def add_commands(commands: argparse._SubParsersAction) -> None:
    """Register ``space build`` and ``space push``."""
    space = commands.add_parser("space", help="build the Hugging Face Space's folder, or push it to the Hub")
    actions = space.add_subparsers(dest="space_command", required=True)
    build = actions.add_parser("build", help="write the Space's folder (new, empty, or an earlier build)")
    build.add_argument("folder", type=Path)
    build.add_argument("--model", default="default", help="the model the Space serves: the default (embedded "
                       "SmolLM2-135M-Instruct), a .gguf file, a folder holding one, or gemma-3-270m-q4_k_m.gguf "
                       "(from its package); the GGUF travels in the Space's folder")
    build.add_argument("--source", type=Path, help="the repository checkout to build from (default: the working "
                       "directory)")
    build.set_defaults(run=run_build)
    push = actions.add_parser("push", help="upload a built folder (default: a fresh build) to a Space")
    push.add_argument("repo_id", help="the Space, as USER/NAME (created if missing)")
    push.add_argument("--folder", type=Path, help="a folder `space build` wrote (default: build one now)")
    push.add_argument("--token", help="a Hugging Face token with write access (default: $HF_TOKEN, or the "
                                      "one `hf auth login` stored)")
    push.add_argument("--private", action="store_true", help="create the Space private")
    push.set_defaults(run=run_push)


def run_build(args: argparse.Namespace) -> dict:
    from .deploy import build_space

    files = build_space(args.folder, args.source, args.model)
    size = sum((args.folder / path).stat().st_size for path in files)
    return {"text": f"wrote {len(files)} files ({size / 1e6:.1f} MB) to {args.folder}", "folder": str(args.folder),
            "files": len(files), "bytes": size}


def run_push(args: argparse.Namespace) -> dict:
    from .deploy import build_space, push_space

    if args.folder is not None:
        return {"text": f"pushed: {push_space(args.folder, args.repo_id, args.token, args.private)}"}
    with tempfile.TemporaryDirectory(prefix="bita-space-") as scratch:
        folder = Path(scratch) / "space"
        build_space(folder)
        return {"text": f"pushed: {push_space(folder, args.repo_id, args.token, args.private)}"}
