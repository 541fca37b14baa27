"""``pip install .`` as a user gets it: the wheel built from the checkout, installed into a fresh
virtual environment, and the ``bita`` command, the README's library example and the
``custom_generate/`` recipe (loaded as transformers loads a Hub repository's) run from a temporary
folder, far from the repository.

The fresh environment sees the project's own environment's packages through a ``.pth`` file (torch
and the rest are not downloaded again, and nothing is fetched: ``--no-index``), so pip still checks
the wheel's declared dependencies against them; the wheel itself and everything it ships come only
from the build.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import time
import zipfile
from pathlib import Path

import pytest

from bita.runtime import native

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ("pyproject.toml", "README.md", "LICENSE", "bita", "viz", "assets")  # what the build reads
FIXED = ["--kernels", "stock", "--tree", "efficient:2,1"]  # no timing run: the test checks the install, not speed
PROMPT = "Write a Python function that reverses a string."


RECIPE_RUN = """
import json, sys, torch, bita
from transformers import TextStreamer
loaded = bita.load_model(kernels="stock")
ids = torch.tensor([bita.encode_chat(loaded.tokenizer, [{"role": "user", "content": "Name three colours."}])])
plain = loaded.model.generate(ids, max_new_tokens=24, do_sample=False)
streamer = TextStreamer(loaded.tokenizer, skip_prompt=True, skip_special_tokens=True)
out = loaded.model.generate(ids, max_new_tokens=24, do_sample=False, custom_generate=sys.argv[1],
                            trust_remote_code=True, tree="efficient:2,1", streamer=streamer)
text = loaded.tokenizer.decode(out[0, ids.shape[1]:], skip_special_tokens=True)
print(json.dumps({"identical": torch.equal(out, plain), "text": text}))  # the last line; the streamed text above
"""


def run(command: list, cwd: Path, timeout: int = 600) -> subprocess.CompletedProcess:
    done = subprocess.run([str(part) for part in command], cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": "",
                               "HF_MODULES_CACHE": str(cwd / "hf-modules")})
    assert done.returncode == 0, done.stderr[-3000:]
    return done


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> tuple[Path, Path, dict]:
    """(the wheel, the fresh environment's bin folder, timings in seconds)."""
    scratch = tmp_path_factory.mktemp("install")
    source = scratch / "source"
    source.mkdir()
    for name in SOURCES:  # a copy: the build's own folders (build/, *.egg-info) stay out of the checkout
        origin = ROOT / name
        if origin.is_dir():
            shutil.copytree(origin, source / name, symlinks=True, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(origin, source / name)
    timings = {}
    started = time.perf_counter()
    run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", scratch / "dist",
         "."], cwd=source)
    timings["build_s"] = time.perf_counter() - started
    wheel = next((scratch / "dist").glob("bita_decoding-*.whl"))

    started = time.perf_counter()
    venv = scratch / "venv"
    run([sys.executable, "-m", "venv", "--without-pip", venv], cwd=scratch)
    site = Path(sysconfig.get_paths(vars={"base": str(venv), "platbase": str(venv)})["purelib"])
    (site / "project-packages.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    run([venv / "bin" / "python", "-m", "pip", "install", "--no-index", "-q", wheel], cwd=scratch)
    timings["install_s"] = time.perf_counter() - started
    return wheel, venv / "bin", timings


def test_the_wheel_holds_the_packages_and_their_assets_only(installed):
    wheel, _, timings = installed
    names = zipfile.ZipFile(wheel).namelist()
    assert {name.split("/")[0] for name in names} == {"bita", "viz", wheel.name.split("-py3")[0] + ".dist-info"}
    assert "bita/assets/adapters/SmolLM2-135M-Instruct-bita/bita_adapter.safetensors" in names
    assert "bita/assets/data/sharegpt-smollm2/samples.npz" in names  # the corpus chain's default texts
    native_files = {f"bita/runtime/{path.name}" for path in (*native.SOURCES, *native.HEADERS)}  # built where it runs
    assert {"bita/assets/app.js", "bita/assets/app.css", *native_files} <= set(names)
    assert not any(name.endswith(".png") or "__pycache__" in name for name in names)  # no screenshots
    metadata = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith("METADATA"))).decode()
    assert all(f"Provides-Extra: {extra}" in metadata for extra in ("app", "train", "kbit"))
    assert wheel.stat().st_size < 15e6, wheel.stat().st_size
    print(f"\nwheel {wheel.name}: {wheel.stat().st_size / 1e6:.1f} MB; build {timings['build_s']:.1f} s, "
          f"fresh environment + install {timings['install_s']:.1f} s")


def test_the_command_runs_from_elsewhere_and_is_identical_to_hf_generate(installed, tmp_path):
    _, bin_folder, _ = installed
    assert run([bin_folder / "bita", "--version"], cwd=tmp_path).stdout.strip() == f"bita {version()}"
    done = run([bin_folder / "bita", "generate", "--mode", "both", "--json", "--max-new-tokens", "32", *FIXED,
                "--prompt", PROMPT], cwd=tmp_path)
    report = json.loads(done.stdout)
    assert report["identical_to_ar"] is True and report["new_tokens"] > 0 and report["mean_accepted"] > 1
    assert "site-packages/bita/assets/adapters/SmolLM2-135M-Instruct-bita" in report["adapter"]


def test_the_readme_library_example_runs_from_elsewhere(installed, tmp_path):
    _, bin_folder, _ = installed
    readme = (ROOT / "README.md").read_text()
    example = re.search(r"```python\n(import bita\n.*?)```", readme, re.S).group(1)
    example = example.replace("bita.load_model()", 'bita.load_model(kernels="stock")').replace(
        '"auto")', '"efficient:2,1")')  # FIXED's kernels and tree, for the same reason
    done = run([bin_folder / "python", "-c", example], cwd=tmp_path)
    text, tau = done.stdout.rsplit(" ", 1)
    assert text.strip() and float(tau) > 1
    origin = run([bin_folder / "python", "-c", "import bita; print(bita.__file__)"], cwd=tmp_path).stdout
    assert "site-packages" in origin and str(ROOT) not in origin


def test_the_custom_generate_recipe_streams_and_is_identical(installed, tmp_path):
    _, bin_folder, _ = installed
    shutil.copytree(ROOT / "custom_generate", tmp_path / "recipe" / "custom_generate")  # a Hub repository's layout
    done = run([bin_folder / "python", "-c", RECIPE_RUN, tmp_path / "recipe"], cwd=tmp_path)
    streamed, last = done.stdout.rstrip("\n").rsplit("\n", 1)
    result = json.loads(last)
    assert result["identical"] and result["text"].strip() and streamed.strip() == result["text"].strip()


def version() -> str:
    return re.search(r'__version__ = "([^"]+)"', (ROOT / "bita" / "__init__.py").read_text()).group(1)
