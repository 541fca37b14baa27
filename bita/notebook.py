"""``bita.show``: a decoding (or two side by side) played back pass by pass in a notebook: ``generate --html``'s page.

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
        """The page in an iframe (``srcdoc``) sandboxed to run its scripts alone: no origin of its own, so nothing
        in a saved decoding someone else made can reach the notebook's page or its kernel."""
        return (f'<iframe sandbox="allow-scripts" srcdoc="{html.escape(self.html)}" '
                f'style="width:100%;height:{FRAME_HEIGHT}px;border:0" '
                'title="a decoding played back"></iframe>')

    def save(self, path: str | Path) -> Path:
        """Write the page to ``path`` (it opens from disk, fetches nothing); returns the path."""
        path = Path(path)
        path.write_text(self.html, encoding="utf-8")
        return path


def saved_decoding(decoding: RunResult | SavedDecoding | str | Path, loaded: LoadedModel | None,
                   request: Request | None, adapter: BitaAdapter | None, adapter_name: str | None) -> SavedDecoding:
    """``decoding`` as a SavedDecoding (``show`` says what it may be, and what the other arguments do)."""
    if isinstance(decoding, (str, Path)):
        return read_saved(decoding, loaded, adapter)
    if isinstance(decoding, RunResult):
        if loaded is None or request is None:
            raise BitaError("a run shows with the model that decoded it and its request: "
                            "bita.show(run, loaded=loaded, request=request, adapter=adapter)")
        return saved_run(decoding, loaded, request, adapter, adapter_name)
    if not isinstance(decoding, SavedDecoding):
        raise BitaError("bita.show plays back RunResults, SavedDecodings or saved files (the model, request and "
                        f"adapter by name: loaded=, request=, adapter=), not {type(decoding).__name__}")
    return decoding


def show(decoding: RunResult | SavedDecoding | str | Path, beside: RunResult | SavedDecoding | str | Path | None = None,
         *, loaded: LoadedModel | None = None, request: Request | None = None, adapter: BitaAdapter | None = None,
         adapter_name: str | None = None) -> Playback:
    """The playback of ``decoding``, and of ``beside`` it in step where given (our AR loop's run beside BiTA's, an
    answer beside its what-if branch): each a saved decoding, a file holding one (checked against ``loaded`` and
    ``adapter`` where given: ``read_saved``), or a RunResult of ``collect`` with the ``loaded`` model and the
    ``request`` that made it (BiTA's with ``adapter``, named ``adapter_name``). Its attention masks show where
    ``request`` recorded them (``record_attention=True``), the verifier's confidence where it recorded verdicts."""
    from viz.playback import playback_html

    found = [saved_decoding(one, loaded, request, adapter, adapter_name) for one in (decoding, beside)
             if one is not None]
    return Playback(playback_html(*found))
