"""Tree forecasts kept on disk: the shipped adapter's settings read without forecasting, a setting not stored taken
from the nearest stored one on a request's path or computed once and cached, and statistics that change never
reusing another's forecasts."""

import copy
from dataclasses import replace

import pytest

from bita.decode.sampling import Sampling
from bita.drafts.tree import parse_tree_spec
from bita.model.adapter import BitaAdapter
from bita.package_data import ADAPTERS
from bita.plan import autotree, forecast_store
from bita.plan.autotree import candidate_trees, shape_of, stored_forecasts
from bita.plan.dynamic_plan import DYNAMIC_ROWS
from bita.plan.forecast_store import GREEDY, SHIPPED_SETTINGS, nearest, setting_name


@pytest.fixture(scope="module")
def shipped():
    return BitaAdapter.load(ADAPTERS / "SmolLM2-135M-Instruct-bita")


def never_forecast(*args, **kwargs):
    raise AssertionError("forecast where stored forecasts were there")


def test_settings_are_named_by_what_a_forecast_depends_on_and_the_nearest_is_of_the_same_kind():
    assert setting_name(None) == setting_name(Sampling()) == GREEDY
    assert setting_name(Sampling(0.7, 0.95, seed=3)) == setting_name(Sampling(0.7, 0.95, seed=9)) == "T0.7/p0.95/k0"
    stored = [GREEDY, "T0.5/p0.95/k0", "T1/p1/k0"]
    assert nearest("T0.65/p0.9/k0", stored) == "T0.5/p0.95/k0" and nearest("T1.3/p1/k40", stored) == "T1/p1/k0"
    assert nearest(GREEDY, stored) == GREEDY and nearest("T0.7/p1/k0", [GREEDY]) is None


def test_the_shipped_adapter_carries_every_shipped_setting_and_reads_them_without_forecasting(shipped, monkeypatch):
    monkeypatch.setattr(autotree, "pass_sample_forecasts", never_forecast)
    digest = forecast_store.statistics_digest(shipped, candidate_trees(shipped.n_masks))
    assert shipped.config.forecasts["statistics"] == digest  # made from the statistics it ships with
    assert set(shipped.config.forecasts["settings"]) == {setting_name(s) for s in SHIPPED_SETTINGS}
    for sampling in SHIPPED_SETTINGS:
        forecasts, note = stored_forecasts(shipped, sampling, compute=False)
        static = [parse_tree_spec(spec).spec for spec in candidate_trees(shipped.n_masks)]
        assert note == "" and [shape.spec for shape, _ in forecasts[:len(static)]] == static
        assert [shape.spec.split("/")[0] for shape, _ in forecasts[len(static):]] == \
            [f"dynamic:{rows}" for rows in DYNAMIC_ROWS]


def test_a_setting_not_stored_takes_the_nearest_on_a_requests_path_or_is_computed_once(shipped, monkeypatch,
                                                                                     tmp_path):
    monkeypatch.setenv("BITA_CACHE", str(tmp_path))
    monkeypatch.setattr(autotree, "pass_sample_forecasts", never_forecast)
    odd = Sampling(0.83, 0.9, seed=0)
    forecasts, note = stored_forecasts(shipped, odd, compute=False)
    assert "forecasts of T0.7/p0.95/k0, the nearest stored setting" in note and forecasts
    computed = []

    def forecast_once(adapter, sampling):
        computed.append(setting_name(sampling))
        return forecasts[:3]

    monkeypatch.setattr(autotree, "pass_sample_forecasts", forecast_once)
    for _ in range(2):
        again, note = stored_forecasts(shipped, odd, compute=True)
        assert note == "" and [s.spec for s, _ in again] == [s.spec for s, _ in forecasts[:3]]
    assert computed == ["T0.83/p0.9/k0"]  # computed once, then read from the cache
    assert list(tmp_path.glob("forecasts/*.json"))


def test_changed_statistics_never_reuse_anothers_forecasts(shipped, monkeypatch, tmp_path):
    monkeypatch.setenv("BITA_CACHE", str(tmp_path))
    changed = copy.copy(shipped)
    changed.config = replace(shipped.config, acceptance={**shipped.config.acceptance, "samples": -1})
    computed = []
    monkeypatch.setattr(autotree, "pass_sample_forecasts", lambda adapter, sampling: computed.append(1) or [])
    stored_forecasts(changed, None, compute=False)  # nothing stored for these statistics: computed
    assert computed == [1]


def test_a_stored_forecast_of_a_shape_auto_never_forecasts_is_refused(shipped):
    """A forecasts file comes with someone's adapter: it may name only the shapes ``auto`` forecasts itself."""
    candidates = set(candidate_trees(shipped.n_masks))
    for spec in ("full:64,64,64", "efficient:9,9,9", "dynamic:500/2"):
        with pytest.raises(ValueError, match="not a shape auto forecasts"):
            shape_of(shipped, spec, candidates)
    assert shape_of(shipped, "chain:1", candidates).spec == "chain:1"
