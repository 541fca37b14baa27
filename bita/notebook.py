"""``bita.show``: a decoding played back pass by pass in a notebook, the page ``generate --html`` writes.

Jupyter shows the returned ``Playback`` inline (``_repr_html_``: the page in an iframe of its own, so several
players in one notebook keep apart); ``save`` writes the page to a file to hand out.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from pathlib import Path

from .errors import BitaError
from .generate import Request, RunResult
from .model.adapter import BitaAdapter
from .model.loading import LoadedModel
from .saved import SavedDecoding, read_saved, saved_run

FRAME_HEIGHT = 900  # pixels of the inline player's iframe


@dataclass(frozen=True)
class Playback:
    """A decoding's playback page (viz/playback.py) as one HTML text."""

    html: str

    def _repr_html_(self) -> str:
        """The page in an iframe (``srcdoc``): its scripts run apart from the notebook's."""
        return (f'<iframe srcdoc="{html.escape(self.html)}" style="width:100%;height:{FRAME_HEIGHT}px;border:0" '
                'title="a decoding played back"></iframe>')

    def save(self, path: str | Path) -> Path:
        """Write the page to ``path`` (it opens from disk, fetches nothing); returns the path."""
        path = Path(path)
        path.write_text(self.html, encoding="utf-8")
        return path


def show(decoding: RunResult | SavedDecoding | str | Path, loaded: LoadedModel | None = None,
         request: Request | None = None, adapter: BitaAdapter | None = None,
         adapter_name: str | None = None) -> Playback:
    """The playback of ``decoding``: a saved decoding, a file holding one (checked against ``loaded`` and ``adapter``
    where given: ``read_saved``), or a RunResult of ``collect`` with the ``loaded`` model and the ``request`` that
    made it (BiTA's with ``adapter``, named ``adapter_name``). Its attention masks show where ``request`` recorded
    them (``record_attention=True``), the verifier's confidence where it recorded verdicts."""
    from viz.playback import playback_html

    if isinstance(decoding, (str, Path)):
        decoding = read_saved(decoding, loaded, adapter)
    elif isinstance(decoding, RunResult):
        if loaded is None or request is None:
            raise BitaError("a run shows with the model that decoded it and its request: "
                            "bita.show(run, loaded, request, adapter)")
        decoding = saved_run(decoding, loaded, request, adapter, adapter_name)
    elif not isinstance(decoding, SavedDecoding):
        raise BitaError(f"bita.show plays back a RunResult, a SavedDecoding or a saved file, not {decoding!r}")
    return Playback(playback_html(decoding))
