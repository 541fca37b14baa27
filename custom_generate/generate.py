"""BiTA (lossless speculative decoding by bi-directional tuning) as a transformers ``custom_generate``
recipe: push this folder as ``custom_generate/`` of a Hub repository, then

    model.generate(**inputs, custom_generate="USER/REPO", trust_remote_code=True, adapter=..., streamer=...)

transformers loads this file and calls ``generate(model=..., **every argument of the call)``; the
decoding is the ``bita-decoding`` package's (``bita.hf``), which requirements.txt names.
"""

from bita.hf import generate_from_hub


def generate(model, **kwargs):
    """Decode with BiTA: ``adapter`` (a BitaAdapter, a shipped name, a folder or a Hub repository; default:
    the shipped adapter for these weights), ``tree`` (default ``auto``), ``drafts``, ``ngram_tokens``;
    the rest as in ``model.generate``."""
    return generate_from_hub(model, **kwargs)
