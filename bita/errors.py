"""The one exception type users see: a clear message, no traceback needed."""


class BitaError(Exception):
    """Bad input or an unusable resource (model, adapter, data), explained in words."""
