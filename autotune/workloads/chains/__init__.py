"""The built-in chains; importing this package registers them."""

from __future__ import annotations

from . import mobile, simple

__all__ = ["mobile", "simple"]
