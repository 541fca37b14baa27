"""The layout is the data path: imports run one way, and the public API is what bita/__init__ exports.

runtime <- model <- drafts <- decode <- plan <- generate <- hf / bench / serve / cli (errors and package_data
under all): how a pass runs (runtime) knows nothing of what the model is (model: loading, the adapter), nor
of drafts or decoding; training depends on runtime, model and decode only; the figures (viz/) on step
records and drafts only, and only serve and cli draw them. Every module counts, in folders nested at any
depth; read from the source with ``ast``, so a lazy import inside a function counts too.
"""

import ast
import re
from pathlib import Path

import pytest

import bita

REPO = Path(__file__).resolve().parents[1]
CORE = {"errors", "package_data", "runtime", "model", "drafts", "decode", "plan", "generate", "branch", "saved"}
LEAVES = {"errors", "package_data"}  # what every part may import: errors, and where the shipped files are
ALLOWED = {  # part of bita (or viz) -> the parts of bita it may import besides itself
    "errors": set(),
    "package_data": set(),
    "runtime": LEAVES,
    "model": LEAVES | {"runtime"},
    "drafts": LEAVES,
    "decode": LEAVES | {"runtime", "model", "drafts"},
    "plan": LEAVES | {"runtime", "model", "drafts", "decode"},
    "generate": LEAVES | {"runtime", "model", "drafts", "decode", "plan"},
    "branch": LEAVES | {"runtime", "model", "drafts", "decode", "plan", "generate"},  # what-if from a forced token
    "saved": LEAVES | {"runtime", "model", "drafts", "decode", "plan", "generate"},  # a decoding in one file
    "notebook": CORE,  # bita.show: a decoding played back in a notebook
    "hf": CORE,  # BiTA inside transformers' generate: a front end like the CLI's
    "training": LEAVES | {"runtime", "model", "drafts", "decode"},
    "bench": CORE | {"training", "hf"},  # ShareGPT through training's reader; hfc times bita.hf
    "serve": CORE,
    "cli": CORE | {"bench", "training"},
    "viz": {"decode", "drafts", "plan", "saved"},  # plan: the measured pass costs and the expected speedup it draws;
    # saved: the saved decoding it plays back
}
MAY_DRAW = {"serve", "cli", "notebook"}  # the parts that may import viz


def part_of(path: Path) -> str:
    """'viz', or the first name below bita/ ('decode', 'cli', ...)."""
    parts = path.relative_to(REPO).with_suffix("").parts
    return parts[0] if parts[0] == "viz" else parts[1]


def imported_modules(path: Path) -> list[list[str]]:
    """Every module a module imports, absolute or relative, as dotted names split: [['bita', 'decode', 'step'], ...]."""
    package = list(path.relative_to(REPO).with_suffix("").parts[:-1])
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            names = base + (node.module.split(".") if node.module else [])
            targets = [names] if node.module or not node.level else [base + [a.name] for a in node.names]
        elif isinstance(node, ast.Import):
            targets = [a.name.split(".") for a in node.names]
        else:
            continue
        found += targets
    return found


def imported_parts(path: Path) -> set[str]:
    """The parts of bita a module imports, and 'viz' if it imports viz."""
    return {"viz" if target[0] == "viz" else target[1] for target in imported_modules(path)
            if target[:1] == ["viz"] or (target[:1] == ["bita"] and len(target) > 1)}


MODULES = sorted(p for p in [*REPO.glob("bita/**/*.py"), *REPO.glob("viz/**/*.py")]
                 if p.name not in ("__init__.py", "__main__.py") and "assets" not in p.relative_to(REPO).parts)


def test_every_module_is_checked_nested_folders_too():
    found = {str(p.relative_to(REPO)) for p in MODULES}
    assert {"bita/runtime/runtime.py", "bita/model/loading.py", "bita/generate.py", "viz/tokens.py"} <= found
    assert all(part_of(p) in ALLOWED for p in MODULES), "a part of bita the layering does not place"


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(REPO)))
def test_imports_run_one_way(path):
    part = part_of(path)
    imported = imported_parts(path) - {part}
    allowed = ALLOWED[part] | ({"viz"} if part in MAY_DRAW else set())
    assert imported <= allowed, f"{part} imports {sorted(imported - allowed)}"


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(REPO)))
def test_imports_of_the_project_name_existing_modules(path):
    """A lazy import inside a function that names a module that is not there fails only when it runs."""
    for target in imported_modules(path):
        if target[0] in ("bita", "viz"):
            where = REPO.joinpath(*target)
            assert where.with_suffix(".py").is_file() or (where / "__init__.py").is_file(), ".".join(target)


def test_no_gradio_below_serve():
    for path in MODULES:
        if part_of(path) != "serve":
            assert "gradio" not in path.read_text(), path


def test_the_public_api_is_exported():
    for name in ("load_model", "resolve_adapter", "encode_chat", "Request", "stream_bita", "stream_ar", "collect",
                 "Sampling", "plan_tree", "run_hf", "BitaAdapter", "BitaError", "StepRecord", "parse_tree_spec"):
        assert name in bita.__all__ and callable(getattr(bita, name)), name


def test_docs_method_names_every_module_and_no_module_that_is_gone():
    """docs/method.md's module table is the tree: every module named (``bita/serve/`` and ``bita/cli/`` as
    folders), and every ``bita/...py`` or ``viz/...py`` it names exists."""
    text = (REPO / "docs" / "method.md").read_text()
    names = [str(p.relative_to(REPO)) for p in MODULES]
    missing = [name for name in names if name not in text and not name.startswith(("bita/serve/", "bita/cli/"))]
    assert not missing, missing
    gone = [name for name in set(re.findall(r"(?:bita|viz)/[\w/]+\.py", text)) if not (REPO / name).is_file()]
    assert not gone, gone


def test_importing_bita_or_its_command_line_costs_no_app_or_figure_library():
    """``import bita`` imports no heavy library until a name is used; ``bita generate`` no Gradio nor Plotly."""
    import subprocess
    import sys

    heavy = ("gradio", "plotly", "torch", "transformers")
    script = ("import sys; import bita; print([m for m in {heavy} if m in sys.modules]); "
              "import bita.cli, bita.cli.generate, bita.cli.measure; "
              "print([m for m in ('gradio', 'plotly') if m in sys.modules])")
    found = subprocess.run([sys.executable, "-c", script.format(heavy=heavy)], capture_output=True, text=True,
                           check=True, cwd=REPO).stdout.splitlines()
    assert found == ["[]", "[]"]
