"""ZeroGPU's path, on this CPU with a stand-in ``spaces`` module (not a real ZeroGPU Space): a request's decoding
runs inside the ``spaces.GPU`` function, its arguments and items cross by pickle as they would to ZeroGPU's forked
worker, and the race and the chat give what the model thread gives."""

from __future__ import annotations

import importlib.util
import inspect
import os
import pickle
import subprocess
import sys
import types
from pathlib import Path

import pytest

from bita.errors import BitaError
from bita.serve.engine import Engine
from bita.serve.handlers import ModelHandlers
from bita.serve.inspector import Inspector
from bita.serve.model_thread import ModelThread
from bita.serve.model_work import model_work_for, on_zero_gpu
from bita.serve.reports import SAME_TEXT
from bita.serve.session import Conversation
from bita.serve.zero_gpu import ZERO_GPU_DURATION_S, ZeroGpuWork

ROOT = Path(__file__).resolve().parents[2]
ZERO_GPU = {"SPACES_ZERO_GPU": "true"}
# adapter, tree, max new tokens, drafts, temperature, top-p, top-k, seed: the page's settings, greedy
SETTINGS = ("SmolLM2-135M-Instruct-bita", "efficient:3/chain-groups", 16, None, 0, 1, 0, "")


def crossed(value):
    """``value`` as ZeroGPU's worker gets it, or sends it back: a copy, through pickle."""
    return pickle.loads(pickle.dumps(value))


def stand_in_spaces() -> types.ModuleType:
    """A stand-in ``spaces`` package: ``GPU(duration=...)`` records what it wraps and each run, and runs a
    generator function as ZeroGPU does, its arguments and every item it yields copied through pickle."""
    spaces = types.ModuleType("spaces")
    spaces.wrapped, spaces.runs = [], []

    def gpu(duration=60):
        def decorate(task):
            assert inspect.isgeneratorfunction(task)
            spaces.wrapped.append((task.__name__, duration))

            def run(*args, **kwargs):
                args, kwargs = crossed((args, kwargs))
                spaces.runs.append(task.__name__)
                for item in task(*args, **kwargs):
                    yield crossed(item)

            return run
        return decorate

    spaces.GPU = gpu
    return spaces


@pytest.mark.parametrize("value,zero", [("true", True), ("1", True), ("True", True), ("false", False), ("", False)])
def test_zero_gpu_is_told_by_spaces_zero_gpu(value, zero):
    assert on_zero_gpu({"SPACES_ZERO_GPU": value}) is zero
    assert isinstance(model_work_for({}), ModelThread)


def test_zero_gpu_without_the_spaces_package_is_a_clear_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "spaces", None)  # import spaces fails
    with pytest.raises(BitaError, match="needs the 'spaces' package"):
        model_work_for(ZERO_GPU)


@pytest.mark.skipif(importlib.util.find_spec("spaces") is not None, reason="the spaces package is installed here")
def test_the_app_on_zero_gpu_without_spaces_stops_with_one_clear_line():
    done = subprocess.run([sys.executable, "app.py"], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "SPACE_ID": "someone/bita", **ZERO_GPU})
    assert done.returncode == 1
    assert done.stderr.startswith("error: this is a ZeroGPU Space") and "Traceback" not in done.stderr


def test_race_and_chat_on_zero_gpu_run_in_the_gpu_function_and_equal_the_model_threads(default_model, monkeypatch):
    spaces = stand_in_spaces()
    monkeypatch.setitem(sys.modules, "spaces", spaces)
    engines = {"thread": Engine(lambda: default_model, SETTINGS[0]),
               "zero": Engine(lambda: default_model, SETTINGS[0], model_work_for(ZERO_GPU))}
    assert isinstance(engines["zero"].work, ZeroGpuWork) and isinstance(engines["thread"].work, ModelThread)
    assert spaces.wrapped == [("decode_on_gpu", ZERO_GPU_DURATION_S)]
    races, answers = {}, {}
    for name, engine in engines.items():
        handlers = ModelHandlers(engine, Inspector(engine))
        races[name] = list(handlers.side_by_side("Name three colours.", *SETTINGS))[-1][:3]  # texts and table
        answers[name] = list(handlers.chat("Name a fruit.", Conversation(), *SETTINGS))[-1][1]
    assert spaces.runs == ["decode_on_gpu", "decode_on_gpu"]  # the race, then the chat
    assert races["zero"][:2] == races["thread"][:2] and all(SAME_TEXT in race[2] for race in races.values())
    assert answers["zero"] == answers["thread"] and answers["zero"]
