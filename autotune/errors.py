"""The project's exception hierarchy.

Every error a user can cause is an :class:`AutotuneError`. Search code catches
:class:`ScheduleError` (a candidate that cannot exist) and nothing broader; any
other exception is a bug and must surface.
"""

from __future__ import annotations


class AutotuneError(Exception):
    """Base of every error raised on purpose by autotune."""


class IRError(AutotuneError):
    """Malformed IR: an undefined variable, a buffer used out of scope, bad regions."""


class ScheduleError(AutotuneError):
    """A schedule primitive cannot apply. The message names the primitive and the reason."""

    def __init__(self, primitive: str, reason: str) -> None:
        super().__init__(f"{primitive}: {reason}")
        self.primitive = primitive
        self.reason = reason


class LoweringError(AutotuneError):
    """A lowering pass cannot transform the function."""


class PoolOverflowError(LoweringError):
    """The memory planner cannot fit the allocations into the pools."""

    def __init__(self, message: str, pool: str, needed: int, available: int, suggested: int) -> None:
        super().__init__(message)
        self.pool = pool
        self.needed = needed
        self.available = available
        self.suggested = suggested


class CodegenError(AutotuneError):
    """Generating or compiling the kernel failed."""


class MeasureError(AutotuneError):
    """Running or timing a kernel failed."""


class ConfigError(AutotuneError):
    """A configuration file or flag is invalid; the message names file, field and expectation."""
