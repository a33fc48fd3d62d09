"""The one exception type that user-facing layers (CLI, app) turn into a clear message."""

from __future__ import annotations


class SpecScopeError(ValueError):
    """Bad input or an unavailable resource, with a message meant for the user (no traceback needed)."""
