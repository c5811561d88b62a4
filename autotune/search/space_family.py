"""A family of schedules: which knobs a workload has, and how an assignment of them becomes a schedule.

A :class:`Family` reads the structure of a function (its blocks in program
order, their loops and buffers) to derive a :class:`Domain` per knob, and turns
a full assignment into a :class:`~autotune.schedule.Schedule` through Schedule
methods only, so that the trace is the product. An impossible combination
raises :class:`~autotune.errors.ScheduleError` from the primitive that refuses it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from .. import ir
from ..schedule import Schedule
from ..schedule.primitives.sample import KINDS
from .target import Target

__all__ = [
    "KINDS",
    "Domain",
    "Family",
    "Requires",
    "choice_domain",
    "divisors",
    "int_domain",
    "same_value",
]


Requires = tuple[tuple[str, tuple[Any, ...]], ...]
"""``((knob, values), ...)``: a knob matters only while each named knob takes one of its values."""


@dataclass(frozen=True)
class Domain:
    """One knob of one workload: its derived choices, the test any other choice must pass, and
    the other knobs' values it matters under (``requires``; empty: always)."""

    name: str
    derived: tuple[Any, ...]
    expected: str
    accepts: Callable[[Any], bool]
    requires: Requires = ()
    kind: str = "layout"
    """One of :data:`KINDS`."""

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"knob {self.name!r}: kind must be one of {KINDS}, got {self.kind!r}")


class Family(ABC):
    """Derives the knobs of a workload and applies assignments of them."""

    name: ClassVar[str]
    patterns: ClassVar[tuple[str, ...]] = ()
    """Glob keys a space file may use for per-stage knobs (``at_*``), even when a workload has none."""
    max_tile: ClassVar[int] = 32
    """The largest tile a derived tile knob offers, unless the space file says ``max_tile``."""
    rules: ClassVar[tuple[tuple[str, tuple[tuple[str, Any], ...] | None], ...]] = ()
    """The family's schedule rules by name, each with the knob values (by name or glob) under which it
    does nothing (None: it cannot be turned off), for ``rules: {name: off}`` in a space file."""

    @abstractmethod
    def domains(
        self, func: ir.Func, pools: Sequence[str], max_tile: int, target: Target
    ) -> tuple[Domain, ...]:
        """The knobs of ``func`` on ``target``; ConfigError when the family does not fit the function."""

    @abstractmethod
    def apply(self, sch: Schedule, values: Mapping[str, Any], target: Target) -> Schedule:
        """``sch`` (the function, its decisions recorded) scheduled for a value of every knob;
        ScheduleError for an impossible combination.
        ``parallel: outer`` runs the outer tile loop as ``target.parallel_parts`` contiguous parts
        under prange (one per core), so a buffer computed under it has one private copy per part."""


def same_value(a: Any, b: Any) -> bool:
    """Equal and of the same type (``True`` is not ``1``)."""
    return type(a) is type(b) and a == b


def choice_domain(name: str, options: Sequence[Any], requires: Requires = (), *, kind: str) -> Domain:
    """A knob of ``kind`` that takes one of ``options`` (the first is the default)."""
    options = tuple(options)
    return Domain(
        name,
        options,
        "one of " + ", ".join(map(repr, options)),
        lambda v: any(same_value(v, o) for o in options),
        requires,
        kind,
    )


def int_domain(
    name: str, derived: Sequence[int], lo: int, hi: int, requires: Requires = (), *, kind: str = "tile"
) -> Domain:
    """An integer knob from ``lo`` to ``hi``, offering ``derived`` unless narrowed."""
    return Domain(
        name,
        tuple(derived),
        f"an integer from {lo} to {hi}",
        lambda v: isinstance(v, int) and not isinstance(v, bool) and lo <= v <= hi,
        requires,
        kind,
    )


def divisors(n: int) -> list[int]:
    """The divisors of ``n`` in increasing order."""
    small = [d for d in range(1, int(n**0.5) + 1) if n % d == 0]
    return sorted({*small, *(n // d for d in small)})
