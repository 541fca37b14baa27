"""Draft candidates as plain data, no model: tree shapes, the context n-gram index, the per-pass trie
that merges both, and the draft-source names."""
