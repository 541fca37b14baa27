"""Tree forecasts kept on disk: computed once per (adapter statistics, sampling setting), never on a request's path.

A forecast (acceptance.Forecast) of every candidate shape is a pure function of the adapter's statistics and the
sampling setting, and forecasting all of them takes seconds (about 30,000 dynamic trees). So they are stored, by a
digest of their inputs (``statistics_digest``: the statistics, the candidate shapes, ``FORECAST_VERSION``):

- shipped with an adapter, in its folder (``bita_forecasts.json``: adapter_files.py), for the greedy setting and
  the common sampled ones (``SHIPPED_SETTINGS``), written by ``bita calibrate``;
- and under the cache folder (``forecasts/DIGEST.json``) for any other setting, once computed.

Entries are ``{"version", "statistics": digest, "settings": {setting name: [[shape spec, Forecast fields], ...]}}``.
"""

from __future__ import annotations

import hashlib
import json
import weakref
from dataclasses import asdict
from pathlib import Path

from ..decode.sampling import Sampling
from ..model.adapter import BitaAdapter
from ..package_data import cache_root
from ..runtime.measured import locked, write_json
from .acceptance import Forecast

FORECAST_VERSION = "v1"
FOLDER = "forecasts"
GREEDY = "greedy"
SHIPPED_SETTINGS = (None, Sampling(0.5, 0.95, seed=0), Sampling(0.7, 0.95, seed=0), Sampling(1.0, 0.95, seed=0),
                    Sampling(0.7, 1.0, seed=0), Sampling(1.0, 1.0, seed=0))  # None: greedy
_digests: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # adapter -> {candidates: digest}


def setting_name(sampling: Sampling | None) -> str:
    """'greedy', or e.g. 'T0.7/p0.95/k0': what a forecast depends on of a request's sampling (never its seed)."""
    if sampling is None or sampling.greedy:
        return GREEDY
    return f"T{sampling.temperature:g}/p{sampling.top_p:g}/k{sampling.top_k}"


def _point(name: str) -> tuple[float, float, int]:
    """(temperature, top-p, top-k) of a setting name (greedy: temperature 0)."""
    if name == GREEDY:
        return 0.0, 1.0, 0
    temperature, top_p, top_k = name.split("/")
    return float(temperature[1:]), float(top_p[1:]), int(top_k[1:])


def nearest(name: str, available: list[str]) -> str | None:
    """Of ``available`` setting names, the nearest to ``name`` (greedy only for greedy, sampled for sampled, then by
    temperature, top-p and top-k); None where there is none."""
    temperature, top_p, top_k = _point(name)
    same_kind = [other for other in available if (other == GREEDY) == (name == GREEDY)]
    if not same_kind:
        return None

    def distance(other: str) -> float:
        t, p, k = _point(other)
        return abs(t - temperature) + abs(p - top_p) + (0.1 if k != top_k else 0.0)

    return min(same_kind, key=distance)


def statistics_digest(adapter: BitaAdapter, candidates: list[str]) -> str:
    """A hash of what an adapter's forecasts depend on: its statistics, the candidate shapes, FORECAST_VERSION
    (computed once an adapter and candidate list)."""
    digests = _digests.setdefault(adapter, {})
    key = "\n".join(candidates)
    if key not in digests:
        hasher = hashlib.sha1(json.dumps(adapter.config.acceptance or {}, sort_keys=True).encode())
        hasher.update(f"{key}|{FORECAST_VERSION}".encode())
        digests[key] = hasher.hexdigest()[:16]
    return digests[key]


def cache_file(digest: str) -> Path:
    return cache_root() / FOLDER / f"{digest}.json"


def _settings_of(record: dict | None, digest: str) -> dict:
    """The settings of a stored record, where it is of ``digest`` and this version ({} otherwise)."""
    if not isinstance(record, dict) or record.get("statistics") != digest or record.get("version") != FORECAST_VERSION:
        return {}
    settings = record.get("settings")
    return settings if isinstance(settings, dict) else {}


def _read(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text()) if path.is_file() else None
    except (OSError, ValueError):
        return None  # a corrupt cache file: its settings are computed again and the file rewritten


def stored_settings(adapter: BitaAdapter, digest: str) -> dict[str, list]:
    """Setting name -> stored forecasts ([[spec, Forecast fields], ...]): the adapter's shipped ones, then the
    cache's."""
    return {**_settings_of(adapter.config.forecasts, digest), **_settings_of(_read(cache_file(digest)), digest)}


def record(digest: str, settings: dict[str, list]) -> dict:
    """A forecasts record (the module docstring) of ``settings``."""
    return {"version": FORECAST_VERSION, "statistics": digest, "settings": settings}


def store(digest: str, name: str, forecasts: list) -> None:
    """Add setting ``name``'s forecasts to the cache's file for ``digest`` (written whole, under a lock)."""
    path = cache_file(digest)
    with locked(path):
        settings = _settings_of(_read(path), digest)
        settings[name] = forecasts
        write_json(path, record(digest, settings))


def to_entries(forecasts: list[tuple[object, Forecast]]) -> list:
    """[(shape, Forecast)] -> [[spec, Forecast fields]] (JSON)."""
    return [[shape.spec, asdict(guess)] for shape, guess in forecasts]


def from_entries(entries: list) -> list[tuple[str, Forecast]]:
    """[[spec, Forecast fields]] -> [(spec, Forecast)] (ValueError where one is not a forecast)."""
    try:
        return [(spec, Forecast(**fields)) for spec, fields in entries]
    except TypeError as error:
        raise ValueError(f"not a stored forecast: {error}") from None
