"""The one loaded model every browser session of the app shares, and where its work runs (model_work.py)."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import TypeVar

from ..decode.sampling import Sampling
from ..drafts.sources import DEFAULT_DRAFTS
from ..model.adapter import BitaAdapter
from ..model.loading import LoadedModel
from ..model.shipped import UNTRAINED, adapters_for, default_adapter_name, resolve_adapter
from ..plan.autotree import CostTable, cost_table
from ..plan.tree_plan import TreePlan, plan_tree
from ..runtime.device import describe_device
from ..saved import adapter_fingerprint
from .model_thread import ModelThread
from .model_work import ModelWork

T = TypeVar("T")
PLANS_KEPT = 64  # tree plans kept, the least recently used dropped first (one a setting: adapter, tree, sampling)


class Engine:
    """The one loaded model every session shares, with adapters and tree plans cached by name.
    Everything that runs the model goes through ``self.work``: ``call`` for the load and the setup, ``stream``
    (``Engine.stream``) for a request's decoding."""

    def __init__(self, load: Callable[[], LoadedModel], adapter: str | None = None, work: ModelWork | None = None):
        """``load``: makes the model; it runs through ``work`` (default: one model thread), like all later model
        work. ``adapter``: the one selected when a page opens (a shipped name or a directory; default: the
        shipped adapter made for this model, else ``untrained``). The page offers only adapters made
        for this model's weights, that one and ``untrained``."""
        self.work = work or ModelThread()
        self.loaded = self.work.call(load)
        self.device = f"{describe_device(self.loaded.device)}, {str(self.loaded.model.dtype).removeprefix('torch.')}"
        self._adapters: dict = {}  # only model work (``self.work.call``) reads and fills these
        self._plans: OrderedDict = OrderedDict()
        self.default_adapter = adapter or default_adapter_name(self.loaded)
        self.work.call(self._adapter, self.default_adapter)  # a wrong adapter fails here, not in a page
        self.adapter_names = list(dict.fromkeys([self.default_adapter, *adapters_for(self.loaded.model), UNTRAINED]))

    def setup(self, adapter_name: str, tree: str, drafts: str = DEFAULT_DRAFTS, drafting: bool = False,
              sampling: Sampling | None = None) -> tuple[BitaAdapter, TreePlan]:
        """(adapter, TreePlan) for a session's settings: loaded once per process, planned from the machine profile
        and stored forecasts (a sampling setting not stored takes the nearest stored one's: nothing is timed or
        forecast here), the last PLANS_KEPT kept. ``drafting``: ``auto`` takes the best drafting tree even where
        plain AR is faster."""
        return self.work.call(self._setup, adapter_name, tree, drafts, drafting, sampling)

    def _setup(self, adapter_name: str, tree: str, drafts: str, drafting: bool,
               sampling: Sampling | None) -> tuple[BitaAdapter, TreePlan]:
        adapter = self._adapter(adapter_name)
        greedy = sampling is None or sampling.greedy
        setting = None if greedy else (sampling.temperature, sampling.top_p, sampling.top_k)
        key = (adapter_name, tree, drafts, drafting, setting)
        if key not in self._plans:
            self._plans[key] = plan_tree(self.loaded, adapter, tree, drafts, drafting=drafting, sampling=sampling,
                                         forecast=False)
            while len(self._plans) > PLANS_KEPT:
                self._plans.popitem(last=False)
        self._plans.move_to_end(key)
        return adapter, self._plans[key]

    def pass_costs(self, adapter: BitaAdapter) -> CostTable:
        """The seconds a pass costs here by its rows, for ``adapter`` (the machine profile's, as ``auto`` reads
        them)."""
        return self.work.call(cost_table, self.loaded, adapter)

    def stream(self, function: Callable[..., Iterator[T]], *args, **kwargs) -> Iterator[T]:
        """The items of ``function(self.loaded, *args, **kwargs)``, made where model work runs: a request's
        decoding."""
        return self.work.stream(function, self.loaded, *args, **kwargs)

    def offered_fingerprints(self) -> dict[str, str]:
        """The adapters the page offers by their weights' fingerprint (``adapter_fingerprint``): {fingerprint: name}."""
        return self.work.call(lambda: {adapter_fingerprint(self._adapter(name)): name for name in self.adapter_names})

    def _adapter(self, name: str) -> BitaAdapter:
        if name not in self._adapters:
            self._adapters[name] = resolve_adapter(self.loaded, name)[0]
        return self._adapters[name]

    def decode(self, ids: list[int]) -> str:
        """Token text for figures and colours (special tokens shown)."""
        return self.loaded.tokenizer.decode(ids, skip_special_tokens=False)

    def text(self, ids: list[int]) -> str:
        """Answer text, as the CLI and HF generate give it."""
        return self.loaded.tokenizer.decode(ids, skip_special_tokens=True)
