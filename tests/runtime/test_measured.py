"""Measurements cached in JSON tables: measured once and read after, a corrupt file or an unreadable entry
measured again with one line saying so, a probe's disagreement re-measured, a probe once a process."""

import json

import pytest

from bita.runtime import measured
from bita.runtime.measured import measured as cached


@pytest.fixture(autouse=True)
def new_process(monkeypatch):
    monkeypatch.setattr(measured, "_checked", set())


class Measure:
    """Counts its calls; gives {"value": n} the n-th time."""

    def __init__(self):
        self.calls = 0

    def __call__(self) -> dict:
        self.calls += 1
        return {"value": self.calls}


def test_measured_once_then_read_and_other_keys_kept(tmp_path, caplog):
    path, measure = tmp_path / "table.json", Measure()
    path.write_text(json.dumps({"other": {"value": 9}}))
    with caplog.at_level("INFO"):
        assert cached(path, "key", "thing", measure) == {"value": 1}
    assert "no cached thing for this machine in" in caplog.text and "measuring it once" in caplog.text
    assert cached(path, "key", "thing", measure) == {"value": 1} and measure.calls == 1
    assert json.loads(path.read_text()) == {"other": {"value": 9}, "key": {"value": 1}}
    assert cached(None, "key", "thing", measure) == {"value": 2}  # no file: measured every time, kept nowhere


def test_a_corrupt_file_is_measured_again_and_rewritten(tmp_path):
    path, measure = tmp_path / "table.json", Measure()
    for corrupt in ("{not json", "[1, 2]", ""):
        path.write_text(corrupt)
        assert cached(path, "key", "thing", measure)["value"] == measure.calls
        assert json.loads(path.read_text()) == {"key": {"value": measure.calls}}
    assert measure.calls == 3


def test_an_unreadable_entry_is_measured_again_with_one_line(tmp_path, caplog):
    """An entry of another version or shape: ``parse`` fails, the entry is measured again, never misread."""
    path, measure = tmp_path / "table.json", Measure()
    path.write_text(json.dumps({"key": {"old": "format"}}))
    found = cached(path, "key", "thing", measure, parse=lambda entry: entry["value"] * 10)
    assert found == 10 and measure.calls == 1
    assert "the cached thing in" in caplog.text and "is unreadable (KeyError" in caplog.text
    assert cached(path, "key", "thing", measure, parse=lambda entry: entry["value"] * 10) == 10


def test_a_probe_runs_once_a_process_and_its_disagreement_measures_again(tmp_path, caplog, monkeypatch):
    path, measure, probes = tmp_path / "table.json", Measure(), []
    path.write_text(json.dumps({"key": {"value": 0}}))

    def check(value):
        probes.append(value)
        return "slower now" if value["value"] == 0 else None

    assert cached(path, "key", "thing", measure, check=check) == {"value": 1}
    assert "a probe disagrees with the cached thing now (slower now): measuring it again" in caplog.text
    assert cached(path, "key", "thing", measure, check=check) == {"value": 1} and probes == [{"value": 0}]
    monkeypatch.setattr(measured, "_checked", set())  # a new process probes the entry once
    assert cached(path, "key", "thing", measure, check=check) == {"value": 1}
    assert probes == [{"value": 0}, {"value": 1}] and measure.calls == 1
