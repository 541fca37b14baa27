"""BiTA: bi-directional tuning for lossless acceleration of a frozen causal LM."""

from .adapter import BitaAdapter
from .errors import BitaError
from .loading import load_model
from .tree import parse_tree_spec

__all__ = ["BitaAdapter", "BitaError", "load_model", "parse_tree_spec"]
