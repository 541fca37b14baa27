"""The machine profile: everything measured about this machine (kernel plans, the dtype choice and its row-invariance
proof, pass costs), in one JSON file under the cache folder (``machine-profile.json``), measured once.

An entry's key holds only facts (the machine: CPU model, flags, threads, torch's version, the native kernels'
sources; the model's shapes; the dtype; never a timing, never prose). ``measured`` returns the stored value, or
measures it once, stores it with when it was measured and how long that took, and says so in one line (logging):
no entry yet, a file it cannot read (corrupt, or of another format), an entry it cannot parse, or an entry marked
stale. A read never times anything: nothing checks an entry by re-timing it. An entry goes stale only from the
work itself (passes a decoding really ran, kept as running medians beside the entry), where they fall outside the
stored spread on several runs and would change a choice (plan/observed_costs.py); the next process to load it
measures it again (one that has used it keeps it: a request is never held up by measuring), unless other processes
keep the machine busy then, and ``bita measure --refresh`` re-measures on purpose.

The file is written whole and renamed, under a lock file: two processes measuring at once measure once (the
second waits for the first's entry and reads it), and a reader never sees a half-written file.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from filelock import FileLock

from ..package_data import cache_root
from .threads import others_now

Value = TypeVar("Value")
ARITHMETIC_MARGIN = 0.15  # two arithmetics (dtypes; exact or 8-bit activations) within this: a fixed rule decides
MIN_GAIN = 0.05  # a measured alternative replaces the default (stock kernels, float32) only when this much faster
BUSY_CORES = 0.5  # other processes using this many cores' worth: a stale entry is kept rather than measured now
PROFILE_FILE = "machine-profile.json"
PROFILE_FORMAT = 1
logger = logging.getLogger(__name__)
_said: set[str] = set()  # problems with a profile file, said once a process
_used: set[tuple[str, str]] = set()  # (file, key) of the entries this process has used: a stale mark waits for the next
_locks: dict[str, FileLock] = {}  # one lock object a file: re-entrant, so a measurement may measure another inside


def profile_path() -> Path:
    """The machine profile's file: ``$BITA_CACHE/machine-profile.json`` (else under ``~/.cache/bita``)."""
    return cache_root() / PROFILE_FILE


def read_entries(path: Path | None) -> tuple[dict, str | None]:
    """The entries of the profile ``path`` ({} where there is none; an entry that is not a dict left out: measured
    again) and, where the file exists but cannot be used (not JSON, not a profile, another format), why."""
    if path is None or not path.is_file():
        return {}, None
    try:
        profile = json.loads(path.read_text())
    except (OSError, ValueError) as error:
        return {}, f"it is not readable JSON ({type(error).__name__})"
    if not isinstance(profile, dict) or not isinstance(profile.get("entries"), dict):
        return {}, "it is not a machine profile"
    if profile.get("format") != PROFILE_FORMAT:
        return {}, f"it is of format {profile.get('format')!r}, not {PROFILE_FORMAT}"
    return {key: entry for key, entry in profile["entries"].items() if isinstance(entry, dict)}, None


def write_json(path: Path, data: dict, indent: int | None = None) -> None:
    """Write ``data`` as JSON to ``path`` atomically (a new file of a name no one can guess, ``mkstemp``'s, then
    renamed): a reader never sees half a file, and no file planted beforehand is written through."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(handle, "w") as file:
            file.write(json.dumps(data, indent=indent))
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def write_entries(path: Path, entries: dict) -> None:
    """Write the profile ``path`` atomically (``write_json``)."""
    write_json(path, {"format": PROFILE_FORMAT, "entries": entries}, indent=1)


def locked(path: Path) -> FileLock:
    """The profile's lock (re-entrant in a thread): held while an entry is measured and while it is written."""
    path.parent.mkdir(parents=True, exist_ok=True)
    return _locks.setdefault(str(path), FileLock(str(path) + ".lock"))


def _usable(path: Path | None, key: str, what: str, parse: Callable[[dict], Value]) -> tuple[bool, Value | None]:
    """(True, the parsed value) of a stored entry that may be used; else (False, None), saying why in one line."""
    entries, problem = read_entries(path)
    if problem and str(path) not in _said:
        _said.add(str(path))
        logger.warning("the machine profile %s cannot be used (%s): measuring what this run needs again", path,
                       problem)
    entry = entries.get(key)
    if entry is None:
        if path is not None and not problem:
            logger.info("no %s for this machine in the profile %s: measuring it once", what, path)
        return False, None
    if entry.get("stale") and (str(path), key) not in _used:  # marked in this process: measured at the next load
        busy = others_now()
        if busy < BUSY_CORES:
            logger.warning("the profile's %s entry is stale (%s): measuring it again", what, entry["stale"])
            return False, None
        logger.warning("the profile's %s entry is stale (%s), but other processes keep %.1f cores busy: kept until "
                       "a quieter load", what, entry["stale"], busy)
    try:
        return True, parse(entry["value"])
    except (KeyError, TypeError, ValueError, AttributeError) as error:
        logger.warning("the %s in the profile %s is unreadable (%s: %s): measuring it again", what, path,
                       type(error).__name__, error)
        return False, None


def measured(path: Path | None, key: str, what: str, measure: Callable[[], dict],
             parse: Callable[[dict], Value] = lambda value: value) -> Value:
    """``parse`` of the entry ``key`` of the profile ``path``, or of ``measure()`` (a JSON-able dict) stored there
    (module docstring). ``what`` names the measurement in the line that says it is measured. ``path`` None:
    measured every time, kept nowhere."""
    found, value = _usable(path, key, what, parse)
    _used.add((str(path), key))
    if found:
        return value
    if path is None:
        return parse(measure())
    with locked(path):
        entries, _ = read_entries(path)
        entry = entries.get(key)
        if entry is not None and not entry.get("stale"):  # another process measured it while this one waited
            try:
                return parse(entry["value"])
            except (KeyError, TypeError, ValueError, AttributeError):
                pass
        started = time.perf_counter()
        value = measure()
        entries, _ = read_entries(path)
        entries[key] = {"what": what, "value": value, "measured_at": time.strftime("%Y-%m-%d %H:%M:%S"),
                        "took_s": round(time.perf_counter() - started, 2)}
        write_entries(path, entries)
    return parse(value)


def update_entry(path: Path, key: str, change: Callable[[dict], None]) -> bool:
    """Apply ``change`` to the stored entry ``key`` (its observations, its stale mark) under the lock; False where
    there is no such entry (nothing measured: nothing to change)."""
    with locked(path):
        entries, _ = read_entries(path)
        if key not in entries:
            return False
        change(entries[key])
        write_entries(path, entries)
    return True


def forget(path: Path, keep: Callable[[str, dict], bool]) -> list[str]:
    """Drop the entries ``keep(key, entry)`` refuses (``bita measure --refresh``); the dropped entries' names."""
    with locked(path):
        entries, _ = read_entries(path)
        dropped = [entry.get("what", key) for key, entry in entries.items() if not keep(key, entry)]
        write_entries(path, {key: entry for key, entry in entries.items() if keep(key, entry)})
    return dropped
