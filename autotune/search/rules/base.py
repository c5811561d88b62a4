"""What every schedule rule of a chain tiled over its rows shares: the :class:`Rule` contract, the
:class:`Chain` it derives knobs from and the :class:`Nest` it schedules.

A rule has one job (where intermediates are computed, how a window is kept, a register tile, ...).
It derives the knobs of that job from the chain's analysis (:mod:`autotune.analysis.chain`) and
the target, each a :class:`~autotune.search.space_family.Domain` whose ``requires`` resolve the
constraints between decisions when they are sampled (a knob that only matters under another's
value is sampled only then), and turns the values of its knobs into schedule primitives. The
family (:class:`~autotune.search.space_cascade.CascadeFamily`) runs the rules in a fixed order on
one schedule; the search records every value as a ``sample`` step before them.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, ClassVar

from ... import ir
from ...analysis.chain import Cascade
from ...errors import ScheduleError
from ...schedule import Schedule
from ..space_family import Domain, divisors
from ..target import Target

__all__ = ["Chain", "Nest", "Rule", "register_tiled", "tile_choices"]


def tile_choices(rows: int, cap: int) -> list[int]:
    """Divisors of ``rows`` and powers of two, both up to ``min(rows, cap)``."""
    top = min(rows, cap)
    powers = [1 << k for k in range(top.bit_length()) if 1 << k <= top]
    return sorted({*(d for d in divisors(rows) if d <= top), *powers})


@dataclass(frozen=True)
class Chain:
    """What the rules derive knobs from: the chain's analysis, the target, the pool names and the
    largest row tile the space file allows."""

    cascade: Cascade
    target: Target
    pools: tuple[str, ...]
    max_tile: int
    func: ir.Func | None = None
    """The function itself, for rules that ask a primitive whether it applies (None: they offer nothing)."""

    @cached_property
    def inlinable(self) -> tuple[str, ...]:
        """Movable stages that ``compute_inline`` accepts (elementwise: no reduction, one buffer
        written at the index it is read), whose buffer no stage reads through a padded window (a
        padded copy needs a buffer to copy) and that pad nothing themselves."""
        c = self.cascade
        if self.func is None:
            return ()
        padded = {name for stage, buffers, _ in c.padded for name in (stage, *buffers)}
        buffers = dict(c.buffers)
        out = []
        for stage in c.movable:
            if stage in padded or buffers.get(stage) in padded:
                continue
            try:
                Schedule(self.func).compute_inline(stage)
            except ScheduleError:
                continue
            out.append(stage)
        return tuple(out)

    @property
    def row_tiles(self) -> list[int]:
        """The tile_rows choices: divisors of the rows and powers of two up to ``max_tile``."""
        return tile_choices(self.cascade.rows, self.max_tile)


@dataclass
class Nest:
    """The loops earlier rules made, that later rules act on."""

    outer: tuple[str, ...] = ()
    """The parallel parts' loop (with ``parallel: outer``) and the tile loop."""
    inner: str = ""
    """The rows of a tile."""
    vector_loop: str = ""
    """The last stage's innermost spatial loop (the one a vector mark goes on)."""
    at: dict[str, str] = field(default_factory=dict)
    """Where each movable stage is computed: ``tile`` or ``root``."""
    copies: dict[str, list[str]] = field(default_factory=dict)
    """Per stage, the padded copies that go to the tile loop with it."""
    staged: dict[tuple[str, str], str] = field(default_factory=dict)
    """Per (stage, input), the block (and buffer) of the staged copy (:class:`~autotune.search.rules.staging.Staging`)."""


class Rule(ABC):
    """One job: the knobs it derives and the primitives their values become."""

    name: ClassVar[str]
    """How a space file names the rule (``rules: {register_tile: off}``)."""
    patterns: ClassVar[tuple[str, ...]] = ()
    """Glob keys a space file may use for this rule's per-stage knobs (``at_*``)."""
    off: ClassVar[tuple[tuple[str, Any], ...] | None] = None
    """The values (by knob name or glob) under which the rule does nothing, that ``rules: {name: off}``
    fixes; None for a rule every schedule needs."""

    @abstractmethod
    def domains(self, chain: Chain) -> list[Domain]:
        """The rule's knobs for ``chain`` (none where it has nothing to decide)."""

    @abstractmethod
    def apply(
        self, sch: Schedule, c: Cascade, values: Mapping[str, Any], nest: Nest, target: Target
    ) -> Schedule:
        """``sch`` with the rule's primitives for ``values`` (every knob's value); updates ``nest``
        where it makes loops that later rules act on. ScheduleError where a primitive refuses."""


def register_tiled(c: Cascade, values: Mapping[str, Any]) -> set[str]:
    """The stages with a register tile under ``values`` (a tile over the rows needs at least two rows
    in a tile: with one, ``regtile_<stage>`` is inactive)."""
    return {
        stage
        for stage, _ in c.tileable
        if values.get(f"regtile_{stage}", 0) and (stage not in c.row_tiled or values["tile_rows"] > 1)
    }
