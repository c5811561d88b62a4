"""The record of one measurement: a frozen, validated :class:`MeasureResult`."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from ..errors import MeasureError

__all__ = ["STATUSES", "TIMED_STATUSES", "MeasureResult"]

STATUSES = ("ok", "cutoff", "wrong", "crashed", "timeout", "error")
"""``ok``: correct and timed; ``cutoff``: correct, and the fastest of its first few timed runs (or its
checking run alone, long and well over) was slower than the task's ``cutoff_ms``, so it was timed no
further (its figures are those runs;
the reason in ``error``;
never ``ok``, so never a best); ``wrong``: differs from the reference (not timed);
``crashed``: the worker process died (exit code in ``error``); ``timeout``: it
did not finish in time; ``error``: the kernel could not be built (reason in ``error``)."""

TIMED_STATUSES = ("ok", "cutoff")
"""The statuses whose results carry times."""

_TIMES = ("median_ms", "min_ms", "iqr_ms")


def _check_number(name: str, value: Any, allow_none: bool = True, allow_nan: bool = False) -> None:
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise MeasureError(f"MeasureResult: {name} must be a number, got {value!r}")
    if math.isnan(value) and not allow_nan:
        raise MeasureError(f"MeasureResult: {name} must not be NaN")
    if value < 0:
        raise MeasureError(f"MeasureResult: {name} must be >= 0, got {value!r}")


@dataclass(frozen=True, slots=True)
class MeasureResult:
    """What measuring one kernel gave.

    Times are milliseconds over ``repeats`` timed runs (None unless ``ok`` or ``cutoff``; a
    ``cutoff`` result has its first few runs only); ``max_abs_err`` is the largest ``|output - reference|`` (None
    if not checked, NaN if an output held NaN); ``compile_s`` is the build's compile time;
    ``workspace_bytes`` the bytes reserved for allocations; ``error`` the reason
    and traceback text of a failure, or why a ``cutoff`` result stopped ("" when ``ok``);
    ``retimed`` is True for an ``ok`` result whose first timing was noisy or contended and that was
    timed a second time (its figures are those of the better timing); ``contended`` is the share of
    the timing's wall time its threads spent waiting for a CPU that another process had
    (:func:`~autotune.measure.timing.contention`; None when not known or not timed).
    """

    status: str
    max_abs_err: float | None = None
    median_ms: float | None = None
    min_ms: float | None = None
    iqr_ms: float | None = None
    repeats: int = 0
    compile_s: float | None = None
    workspace_bytes: int | None = None
    error: str = ""
    retimed: bool = False
    contended: float | None = None

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise MeasureError(f"MeasureResult: status must be one of {STATUSES}, got {self.status!r}")
        if isinstance(self.repeats, bool) or not isinstance(self.repeats, int) or self.repeats < 0:
            raise MeasureError(f"MeasureResult: repeats must be an int >= 0, got {self.repeats!r}")
        if not isinstance(self.error, str):
            raise MeasureError(f"MeasureResult: error must be a str, got {type(self.error).__name__}")
        _check_number("max_abs_err", self.max_abs_err, allow_nan=True)
        _check_number("compile_s", self.compile_s)
        for name in _TIMES:
            _check_number(name, getattr(self, name))
        if self.workspace_bytes is not None and (
            isinstance(self.workspace_bytes, bool)
            or not isinstance(self.workspace_bytes, int)
            or self.workspace_bytes < 0
        ):
            raise MeasureError(
                f"MeasureResult: workspace_bytes must be an int >= 0, got {self.workspace_bytes!r}"
            )
        self._check_status()

    def _check_status(self) -> None:
        timed = [getattr(self, name) is not None for name in _TIMES]
        if not isinstance(self.retimed, bool):
            raise MeasureError(f"MeasureResult: retimed must be a bool, got {self.retimed!r}")
        if self.retimed and self.status != "ok":
            raise MeasureError(f"MeasureResult: a {self.status!r} result is not retimed")
        if self.contended is not None:
            _check_number("contended", self.contended)
            if self.contended > 1 or self.status not in TIMED_STATUSES:
                raise MeasureError(
                    f"MeasureResult: contended must be a share from 0 to 1 of a timed result, got "
                    f"{self.contended!r} for {self.status!r}"
                )
        if self.status in TIMED_STATUSES:
            if not all(timed) or self.repeats < 1:
                article = "an" if self.status == "ok" else "a"
                raise MeasureError(
                    f"MeasureResult: {article} {self.status!r} result needs median_ms, min_ms, iqr_ms and repeats >= 1"
                )
            if self.min_ms > self.median_ms:  # type: ignore[operator]
                raise MeasureError(f"MeasureResult: min_ms {self.min_ms} exceeds median_ms {self.median_ms}")
            if self.status == "ok" and self.error:
                raise MeasureError("MeasureResult: an 'ok' result carries no error text")
            if self.status == "cutoff" and not self.error:
                raise MeasureError("MeasureResult: a 'cutoff' result needs the reason in error")
            return
        if any(timed) or self.repeats:
            raise MeasureError(f"MeasureResult: a {self.status!r} result is not timed")
        if self.status == "wrong":
            if self.max_abs_err is None:
                raise MeasureError("MeasureResult: a 'wrong' result needs max_abs_err")
        elif not self.error:
            raise MeasureError(f"MeasureResult: a {self.status!r} result needs the error text")

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @classmethod
    def failure(cls, status: str, error: str, **fields: Any) -> MeasureResult:
        """A result for a kernel that could not be measured (``error``/``crashed``/``timeout``)."""
        return cls(status=status, error=error, **fields)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-friendly dict; :meth:`from_dict` reads it back."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> MeasureResult:
        return cls(**data)
