"""The machine profile: measured once then read (never re-timed), a corrupt or foreign profile measured again with
one line saying why, an unreadable or stale entry measured again, and two processes measuring at once leaving one
valid profile."""

import json
import multiprocessing
import time

from bita.runtime import measured
from bita.runtime.measured import PROFILE_FORMAT, forget, read_entries, update_entry
from bita.runtime.measured import measured as cached


class Measure:
    """Counts its calls; gives {"value": n} the n-th time."""

    def __init__(self):
        self.calls = 0

    def __call__(self) -> dict:
        self.calls += 1
        return {"value": self.calls}


def profile(entries: dict) -> str:
    return json.dumps({"format": PROFILE_FORMAT, "entries": entries})


def test_measured_once_then_read_with_when_and_how_long_and_other_keys_kept(tmp_path, caplog):
    path, measure = tmp_path / "profile.json", Measure()
    path.write_text(profile({"other": {"what": "thing", "value": {"value": 9}}}))
    with caplog.at_level("INFO"):
        assert cached(path, "key", "thing", measure) == {"value": 1}
    assert "no thing for this machine in the profile" in caplog.text and "measuring it once" in caplog.text
    for _ in range(3):  # every later read: the stored value, nothing timed or probed
        assert cached(path, "key", "thing", measure) == {"value": 1}
    assert measure.calls == 1
    entries, problem = read_entries(path)
    assert problem is None and entries["other"]["value"] == {"value": 9}
    assert entries["key"]["value"] == {"value": 1} and entries["key"]["what"] == "thing"
    assert entries["key"]["took_s"] >= 0 and entries["key"]["measured_at"].startswith("20")
    assert cached(None, "key", "thing", measure) == {"value": 2}  # no file: measured every time, kept nowhere


def test_a_corrupt_or_foreign_profile_is_measured_again_with_one_line_and_rewritten(tmp_path, caplog):
    measure = Measure()
    for index, corrupt in enumerate(("{not json", "[1, 2]", "", json.dumps({"format": 99, "entries": {}}),
                                     json.dumps({"key": {"value": 1}}))):  # the last: a table of the old format
        path = tmp_path / f"profile{index}.json"
        path.write_text(corrupt)
        caplog.clear()
        assert cached(path, "key", "thing", measure)["value"] == measure.calls
        assert "cannot be used" in caplog.text and caplog.text.count("cannot be used") == 1
        assert read_entries(path) == ({"key": read_entries(path)[0]["key"]}, None)
    assert measure.calls == 5


def test_an_unreadable_entry_is_measured_again_with_one_line(tmp_path, caplog):
    """An entry of another version or shape: ``parse`` fails, the entry is measured again, never misread."""
    path, measure = tmp_path / "profile.json", Measure()
    path.write_text(profile({"key": {"value": {"old": "format"}}}))
    found = cached(path, "key", "thing", measure, parse=lambda value: value["value"] * 10)
    assert found == 10 and measure.calls == 1
    assert "is unreadable (KeyError" in caplog.text
    assert cached(path, "key", "thing", measure, parse=lambda value: value["value"] * 10) == 10


def test_an_entry_that_is_not_a_dict_is_measured_again_and_no_temporary_file_is_left(tmp_path):
    path, measure = tmp_path / "profile.json", Measure()
    path.write_text(profile({"key": ["crafted"], "other": 7}))
    assert cached(path, "key", "thing", measure, parse=lambda value: value["value"]) == 1 and measure.calls == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["profile.json", "profile.json.lock"]


def test_a_stale_entry_is_measured_again_once_saying_why_and_observations_change_nothing_else(tmp_path, caplog,
                                                                                            monkeypatch):
    path, measure = tmp_path / "profile.json", Measure()
    monkeypatch.setattr(measured, "others_now", lambda: 1.0)  # another process keeps a core busy
    cached(path, "key", "thing", measure)
    assert update_entry(path, "key", lambda entry: entry.setdefault("observed", {}).update({"1": [0.5]}))
    assert cached(path, "key", "thing", measure) == {"value": 1}  # observations alone: still read
    assert not update_entry(path, "absent", lambda entry: None)  # nothing measured: nothing to observe
    update_entry(path, "key", lambda entry: entry.update(stale="slower passes would choose another tree"))
    assert cached(path, "key", "thing", measure) == {"value": 1}  # used by this process: kept until the next load
    monkeypatch.setattr(measured, "_used", set())  # the next process
    assert cached(path, "key", "thing", measure) == {"value": 1}  # kept while the machine is busy: not measured now
    assert "but other processes keep 1.0 cores busy: kept" in caplog.text
    monkeypatch.setattr(measured, "others_now", lambda: 0.0)  # quiet again
    monkeypatch.setattr(measured, "_used", set())
    assert cached(path, "key", "thing", measure) == {"value": 2}
    assert "entry is stale (slower passes would choose another tree): measuring it again" in caplog.text
    assert cached(path, "key", "thing", measure) == {"value": 2} and measure.calls == 2
    assert "stale" not in read_entries(path)[0]["key"]


def test_refresh_drops_only_the_entries_it_is_asked_to(tmp_path):
    path = tmp_path / "profile.json"
    path.write_text(profile({"mine|a": {"what": "kernel plan", "value": {}},
                             "theirs|b": {"what": "pass costs", "value": {}}}))
    assert forget(path, lambda key, entry: "mine" not in key) == ["kernel plan"]
    assert list(read_entries(path)[0]) == ["theirs|b"]


def slow_measure(path: str, key: str, queue) -> None:
    """In another process: measure ``key`` slowly (0.5 s), say what it got."""
    from pathlib import Path

    def measure() -> dict:
        time.sleep(0.5)
        return {"by": multiprocessing.current_process().name}

    queue.put(cached(Path(path), key, "thing", measure))


def test_two_processes_measuring_at_once_measure_once_and_leave_one_valid_profile(tmp_path):
    path = tmp_path / "profile.json"
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    workers = [context.Process(target=slow_measure, args=(str(path), "key", queue), name=f"p{i}") for i in range(2)]
    for worker in workers:
        worker.start()
    found = [queue.get(timeout=60) for _ in workers]
    for worker in workers:
        worker.join(timeout=60)
    assert found[0] == found[1]  # the second waited for the first's entry and read it
    entries, problem = read_entries(path)
    assert problem is None and entries["key"]["value"] == found[0]
