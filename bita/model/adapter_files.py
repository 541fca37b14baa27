"""An adapter on disk and on the Hub: its files, their two formats, and the folder a name points to.

Format 2 (``bita-adapter/2``, written since 0.1.0) uses names no other tool claims (PEFT reads
``adapter_config.json``, transformers ``config.json``)::

    bita_adapter.safetensors  the parameters (BitaAdapter's, float32)
    bita_config.json          {"format", "base_model_name_or_path", "base_model_revision", "base": the
                              base model's identity (shapes, weights fingerprint), the prompt and mask
                              settings, "training": how it was made}
    bita_acceptance.json      the draft-rank statistics (training/calibration.py), where calibrated
    bita_forecasts.json       every candidate tree's forecast from those statistics at common sampling
                              settings (plan/forecast_store.py), where calibrated
    README.md                 the model card (adapter_card.py)

Format 1 (``bita-adapter/1``, read only): ``adapter.safetensors`` and ``adapter_config.json``, the
statistics inside the config and the base model's name inside ``base``.

A name is a folder holding either format, or a Hub repository ``USER/NAME`` whose snapshot is taken
from the local Hugging Face cache (``HF_HUB_CACHE``) where it is there, else downloaded (not with
``HF_HUB_OFFLINE`` set).
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from ..errors import BitaError

WEIGHTS_NAME = "bita_adapter.safetensors"
CONFIG_NAME = "bita_config.json"
ACCEPTANCE_NAME = "bita_acceptance.json"
FORECASTS_NAME = "bita_forecasts.json"
CARD_NAME = "README.md"
FORMAT = "bita-adapter/2"
LEGACY_WEIGHTS_NAME = "adapter.safetensors"
LEGACY_CONFIG_NAME = "adapter_config.json"
LEGACY_FORMAT = "bita-adapter/1"
HUB_FILES = [WEIGHTS_NAME, CONFIG_NAME, ACCEPTANCE_NAME, FORECASTS_NAME, CARD_NAME, LEGACY_WEIGHTS_NAME,
             LEGACY_CONFIG_NAME]


def adapter_paths(folder: Path) -> tuple[Path, Path] | None:
    """(config, weights) of the adapter in ``folder``, format 2 before format 1; None where neither is whole."""
    for config, weights in ((CONFIG_NAME, WEIGHTS_NAME), (LEGACY_CONFIG_NAME, LEGACY_WEIGHTS_NAME)):
        if (folder / config).is_file() and (folder / weights).is_file():
            return folder / config, folder / weights
    return None


def read_config(config_path: Path) -> dict:
    """The adapter config at ``config_path`` in either format as one dict: ``base`` with its ``name``
    and ``revision``, ``acceptance`` read from its own file (format 2); ValueError when it is none."""
    data = json.loads(config_path.read_text())
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    found = data.pop("format", None)
    if found == LEGACY_FORMAT:
        return data
    if found != FORMAT:
        raise ValueError(f"not a {FORMAT} config (format {found!r})")
    data["base"] = {"name": data.pop("base_model_name_or_path"), "revision": data.pop("base_model_revision"),
                    **data["base"]}
    for field, name in (("acceptance", ACCEPTANCE_NAME), ("forecasts", FORECASTS_NAME)):
        stored = config_path.parent / name
        data[field] = json.loads(stored.read_text()) if stored.is_file() else {}
    return data


def config_texts(config: dict) -> dict[str, str]:
    """File name -> text of a format-2 config (``config`` as ``read_config`` returns it); the
    statistics and forecasts files only where there are some."""
    config = dict(config)
    base = dict(config.pop("base"))
    acceptance, forecasts = config.pop("acceptance"), config.pop("forecasts", {})
    texts = {CONFIG_NAME: json.dumps({"format": FORMAT, "base_model_name_or_path": base.pop("name"),
                                      "base_model_revision": base.pop("revision"), "base": base, **config},
                                     indent=2)}
    if acceptance:
        texts[ACCEPTANCE_NAME] = json.dumps(acceptance)
    if forecasts:
        texts[FORECASTS_NAME] = json.dumps(forecasts)
    return texts


def atomic_write(path: Path, write) -> None:
    """``write(temporary path)``, then rename it to ``path``: an interruption leaves no half file."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    os.close(fd)
    try:
        write(tmp)
        os.chmod(tmp, 0o644)  # mkstemp makes files private; adapters are shipped and shared
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def looks_like_repo_id(name: str) -> bool:
    """``USER/NAME`` with nothing of a local path about it."""
    parts = name.split("/")
    return len(parts) == 2 and all(parts) and not name.startswith((".", "~")) and not Path(name).exists()


def adapter_folder(name: str | os.PathLike, revision: str | None = None, cache_dir: str | Path | None = None,
                   local_files_only: bool | None = None, token: str | bool | None = None,
                   force_download: bool = False) -> Path:
    """The folder holding the adapter ``name`` stands for: ``name`` itself where it is a folder, else
    the snapshot of the Hub repository ``name`` (see the module docstring); BitaError in one line
    where there is none."""
    path = Path(name).expanduser()
    if path.is_dir() or not looks_like_repo_id(str(name)):
        if adapter_paths(path) is None:
            raise BitaError(f"no BiTA adapter at {str(name)!r}: expected {CONFIG_NAME} and {WEIGHTS_NAME} "
                            f"(or {LEGACY_CONFIG_NAME} and {LEGACY_WEIGHTS_NAME})")
        return path
    from huggingface_hub import constants, snapshot_download
    from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError

    options = dict(repo_id=str(name), revision=revision, cache_dir=cache_dir, token=token,
                   allow_patterns=HUB_FILES)
    try:
        try:
            if force_download:
                raise LocalEntryNotFoundError("a fresh download was asked for")
            folder = Path(snapshot_download(**options, local_files_only=True))
        except LocalEntryNotFoundError:
            if local_files_only or constants.HF_HUB_OFFLINE:
                raise
            folder = Path(snapshot_download(**options, force_download=force_download))
    except (LocalEntryNotFoundError, HfHubHTTPError, OSError, ValueError) as error:
        cache = cache_dir or constants.HF_HUB_CACHE
        raise BitaError(f"the adapter {name!r} is not in the local Hugging Face cache ({cache}) and could not be "
                        f"downloaded ({type(error).__name__}): fetch it with `hf download {name}` where there is "
                        "a network, or give a folder") from None
    if adapter_paths(folder) is None:
        raise BitaError(f"the Hub repository {name!r} holds no BiTA adapter ({CONFIG_NAME} and {WEIGHTS_NAME})")
    return folder
