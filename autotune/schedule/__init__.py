"""Schedules: an immutable function plus a replayable trace of primitives."""

from __future__ import annotations

from .exprjson import AXIS_SEPARATOR
from .primitives import PRIMITIVES
from .schedule import Schedule, load_trace
from .trace import TRACE_VERSION, Step

__all__ = ["AXIS_SEPARATOR", "PRIMITIVES", "TRACE_VERSION", "Schedule", "Step", "load_trace"]
