"""Adapters shipped under ``assets/adapters`` and how a run picks one."""

from __future__ import annotations

from pathlib import Path

from .adapter import CONFIG_NAME, BitaAdapter
from .loading import DEFAULT_NAME, LoadedModel

ASSETS = Path(__file__).resolve().parents[2] / "assets" / "adapters"
UNTRAINED = "untrained"


def shipped_adapters() -> dict[str, Path]:
    """Name -> directory of each shipped adapter."""
    if not ASSETS.is_dir():
        return {}
    return {p.name: p for p in sorted(ASSETS.iterdir()) if (p / CONFIG_NAME).is_file()}


def default_adapter_name(loaded: LoadedModel) -> str:
    """The shipped adapter made for this model, else ``untrained``."""
    if loaded.name == DEFAULT_NAME:
        for name in shipped_adapters():
            if name.lower().startswith(DEFAULT_NAME.lower()):
                return name
    return UNTRAINED


def resolve_adapter(loaded: LoadedModel, choice: str | None, prompt_tokens: int = 16,
                    mask_tokens: int = 3) -> tuple[BitaAdapter, str]:
    """``choice``: None (the default for this model), ``untrained``, a shipped name, or a path.

    An untrained adapter keeps output identical to AR but drafts poorly.
    """
    name = choice or default_adapter_name(loaded)
    if name == UNTRAINED:
        return BitaAdapter.create(loaded.model, prompt_tokens, mask_tokens, name=loaded.name), UNTRAINED
    path = shipped_adapters().get(name, Path(name))
    return BitaAdapter.load(path, loaded.model), str(path)
