"""Adapters shipped under ``bita/assets/adapters`` (package_data.py) and how a run picks one."""

from __future__ import annotations

from pathlib import Path

from torch import nn

from ..package_data import ADAPTERS
from .adapter import BitaAdapter, weights_fingerprint
from .adapter_files import adapter_folder, adapter_paths, read_config
from .loading import LoadedModel

UNTRAINED = "untrained"


def shipped_adapters() -> dict[str, Path]:
    """Name -> directory of each shipped adapter."""
    if not ADAPTERS.is_dir():
        return {}
    return {p.name: p for p in sorted(ADAPTERS.iterdir()) if adapter_paths(p) is not None}


def adapters_for(model: nn.Module) -> list[str]:
    """Names of the shipped adapters made for ``model``'s weights (their recorded fingerprint)."""
    fingerprint = weights_fingerprint(model)
    return [name for name, path in shipped_adapters().items()
            if read_config(adapter_paths(path)[0])["base"]["fingerprint"] == fingerprint]


def default_adapter_name(loaded: LoadedModel) -> str:
    """The shipped adapter made for this model (whatever the name or path it was loaded by), else ``untrained``."""
    return next(iter(adapters_for(loaded.model)), UNTRAINED)


def resolve_adapter(loaded: LoadedModel, choice: str | None, prompt_tokens: int = 16,
                    mask_tokens: int = 3) -> tuple[BitaAdapter, str]:
    """``choice``: None (the default for this model), ``untrained``, a shipped name, a folder, or a
    Hub repository ``USER/NAME`` (from the local Hugging Face cache where it is there). Returns the
    adapter and where it came from (its folder).

    An untrained adapter keeps output identical to AR but drafts poorly.
    """
    name = choice or default_adapter_name(loaded)
    if name == UNTRAINED:
        return BitaAdapter.create(loaded.model, prompt_tokens, mask_tokens, name=loaded.name), UNTRAINED
    folder = shipped_adapters().get(name) or adapter_folder(name)
    return BitaAdapter.load(folder, loaded.model), str(folder)
