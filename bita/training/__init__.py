"""Bi-directional tuning: self-generated data, the training objective, the resumable training loop, and
calibration of an adapter's draft-rank statistics. Depends on model and decode only."""
