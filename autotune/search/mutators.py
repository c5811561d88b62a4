"""Mutators: one per kind of decision, each changing one knob's value to another of its choices.

A mutation is MetaSchedule's move around a good schedule: change one decision, keep the others,
and rebuild the schedule from the space. The knobs that the change switches off go back to their
defaults, as a sampler leaves them; the knobs that it switches on are drawn from their choices, as
a sampler draws them (MetaSchedule's replay of a mutated trace samples the decisions that the
parent's trace did not have). So one change can move a stage from one form to another with its
new decisions drawn: ``regtile_<stage>`` 8 -> 0 switches ``unroll_<stage>`` on, drawn true or
false, and ``jam_<stage>`` and ``jamrows_<stage>`` with it when true; left at their defaults, the
stage would become a plain loop nest, and its unrolled-and-jammed form would be two or three
changes away, which a child of one or two changes rarely reaches.

A knob whose choices switch other knobs on or off has *forms*: its choices grouped by the knobs
active under each (:func:`forms`; ``regtile_<stage>``: 0, the stage without a register tile,
its window unrolled, and 1 to 16, a register tile of that many columns). Numeric order does not
cross forms: 0 is not an extent next to 1 but another loop nest. So a knob with two forms or more,
one of them of several choices, moves to another form with probability :data:`FORM_CHANGE`
(a choice of it drawn uniformly), and otherwise within its own form by its kind's mutator; from
a form of one choice it always moves to another. By numeric order alone a register tile of 8
would become no register tile with probability 0.04, and a stage whose fastest form is its
window unrolled and jammed would rarely be bred into it from a register-tiled parent; the runs
that measure this are ``experiments/sample_efficiency.py``'s, in
``results/sample_efficiency_rocketlake_form_mutator/`` and (uncontended)
``results/sample_efficiency_rocketlake_form_mutator_quiet/``.

The kind of a knob (``Knob.kind``, one of
:data:`~autotune.schedule.primitives.sample.KINDS`) says which mutator moves it::

    child = mutate(space, parent_knobs, rng, changes=1)     # a full assignment, one decision changed
    MUTATORS["tile"].choose(knob, 8, rng)                    # 4 or 16 mostly: a neighbouring factor

- ``tile`` (:class:`TileMutator`): an ordered extent; with probability :data:`NEIGHBOUR` it moves
  to an adjacent choice in numeric order (the next smaller or larger factor, as MetaSchedule's
  tile-size mutator moves a factor between two levels), else to any other choice;
- ``location``, ``window``, ``unroll``, ``parallel``, ``vectorize``, ``pool``, ``layout``: another
  of the knob's choices, uniformly (MetaSchedule's compute-location, unroll and parallel mutators
  do the same over their candidates).

Every draw takes the caller's generator, so a seed gives the same children.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import replace
from typing import Any, ClassVar

import numpy as np

from ..schedule.primitives.sample import KINDS
from .candidates import Assignment, complete
from .space import Knob, SearchSpace
from .space_family import same_value

__all__ = ["FORM_CHANGE", "MUTATORS", "NEIGHBOUR", "Mutator", "TileMutator", "forms", "mutate", "register_mutator"]

NEIGHBOUR = 0.8
"""The probability that the tile mutator moves to an adjacent choice rather than any other."""
FORM_CHANGE = 0.5
"""The probability that a knob with forms (:func:`forms`) moves to another form rather than
within its own (always, from a form of one choice)."""


class Mutator(ABC):
    """Chooses a new value for a knob of its ``kind``."""

    kind: ClassVar[str]

    @abstractmethod
    def choose(self, knob: Knob, current: Any, rng: np.random.Generator) -> Any:
        """A choice of ``knob`` other than ``current`` (the knob has two choices or more)."""


MUTATORS: dict[str, Mutator] = {}


def register_mutator(cls: type[Mutator]) -> type[Mutator]:
    """Class decorator: the mutator of the knobs of ``cls.kind``."""
    if cls.kind not in KINDS:
        raise ValueError(f"mutator {cls.__name__}: kind must be one of {KINDS}, got {cls.kind!r}")
    if cls.kind in MUTATORS:
        raise ValueError(f"a mutator of kind {cls.kind!r} is registered twice")
    MUTATORS[cls.kind] = cls()
    return cls


def _others(knob: Knob, current: Any) -> list[Any]:
    return [c for c in knob.choices if not same_value(c, current)]


def _order(value: Any) -> tuple[int, float, str]:
    """Numeric order for a tile's choices: numbers by value, a word (``"none"``) before them all."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return (1, float(value), "")
    return (0, 0.0, str(value))


@register_mutator
class TileMutator(Mutator):
    """An adjacent extent in numeric order with probability :data:`NEIGHBOUR`, else any other."""

    kind = "tile"

    def choose(self, knob: Knob, current: Any, rng: np.random.Generator) -> Any:
        ordered = sorted(knob.choices, key=_order)
        at = next((i for i, c in enumerate(ordered) if same_value(c, current)), None)
        if at is not None and rng.random() < NEIGHBOUR:
            near = [ordered[i] for i in (at - 1, at + 1) if 0 <= i < len(ordered)]
            return near[int(rng.integers(len(near)))]
        others = _others(knob, current)
        return others[int(rng.integers(len(others)))]


class _AnotherChoice(Mutator):
    """Another of the knob's choices, uniformly."""

    def choose(self, knob: Knob, current: Any, rng: np.random.Generator) -> Any:
        others = _others(knob, current)
        return others[int(rng.integers(len(others)))]


@register_mutator
class LocationMutator(_AnotherChoice):
    """Where a block is computed: at its consumer's tile loop or at root (or a copy's place)."""

    kind = "location"


@register_mutator
class WindowMutator(_AnotherChoice):
    """How overlapping tiles of an intermediate are kept: rolling buffer or recompute."""

    kind = "window"


@register_mutator
class UnrollMutator(_AnotherChoice):
    """Unrolling, fusing and jamming of short loops."""

    kind = "unroll"


@register_mutator
class ParallelMutator(_AnotherChoice):
    """Which loop runs on the cores, and how the parallel parts' copies are spaced."""

    kind = "parallel"


@register_mutator
class VectorizeMutator(_AnotherChoice):
    """The vector mark of the innermost loop."""

    kind = "vectorize"


@register_mutator
class PoolMutator(_AnotherChoice):
    """The memory pool of an allocation."""

    kind = "pool"


@register_mutator
class LayoutMutator(_AnotherChoice):
    """Operand staging and loop orders."""

    kind = "layout"


def mutate(
    space: SearchSpace, values: Mapping[str, Any], rng: np.random.Generator, changes: int = 1
) -> Assignment:
    """``values`` with ``changes`` distinct decisions changed, each an active knob with two choices
    or more drawn uniformly and moved by the mutator of its kind; the result is a full assignment
    (knobs a change switches off at their defaults, knobs it switches on drawn uniformly from their
    choices). Fewer changes when fewer knobs can move."""
    out = dict(complete(space, values))
    changed: set[str] = set()
    for _ in range(changes):  # distinct knobs: a second change must not undo the first
        active = space.active_values(out)
        movable = [
            k for k in space.knobs if len(k.choices) > 1 and k.name in active and k.name not in changed
        ]
        if not movable:
            break
        knob = movable[int(rng.integers(len(movable)))]
        changed.add(knob.name)
        out[knob.name] = _choose(space, knob, out, rng)
        out = _draw_switched_on(space, out, set(active), rng)
        changed |= set(space.active_values(out)) - set(active)  # drawn, not to be moved again
    return complete(space, out)


def forms(space: SearchSpace, knob: Knob, values: Mapping[str, Any]) -> list[tuple[Any, ...]]:
    """The choices of ``knob`` grouped by the knobs active with it at each (the other knobs at
    ``values``, a full assignment), each group and the groups in the knob's order of choices."""
    groups: dict[frozenset[str], list[Any]] = {}
    for choice in knob.choices:
        active = frozenset(space.active_values({**values, knob.name: choice}))
        groups.setdefault(active, []).append(choice)
    return [tuple(g) for g in groups.values()]


def _choose(space: SearchSpace, knob: Knob, values: Mapping[str, Any], rng: np.random.Generator) -> Any:
    """A new value of ``knob`` under ``values``: another form with probability :data:`FORM_CHANGE`
    (always from a form of one choice), else the kind's mutator within the knob's form. A knob of
    one form, or whose every form is one choice, is moved by its kind's mutator over all choices."""
    current = values[knob.name]
    groups = forms(space, knob, values)
    mutator = MUTATORS[knob.kind]
    if len(groups) == 1 or all(len(g) == 1 for g in groups):  # no forms to choose between
        return mutator.choose(knob, current, rng)
    own = next(g for g in groups if any(same_value(c, current) for c in g))
    if len(own) > 1 and rng.random() >= FORM_CHANGE:
        return mutator.choose(replace(knob, choices=own), current, rng)
    others = [g for g in groups if g is not own]
    form = others[int(rng.integers(len(others)))]
    return form[int(rng.integers(len(form)))]


def _draw_switched_on(
    space: SearchSpace, values: Mapping[str, Any], before: set[str], rng: np.random.Generator
) -> dict[str, Any]:
    """``values`` completed, with every knob that is active now and was not in ``before`` drawn
    uniformly from its choices (in the space's search order, so that a knob switched on by one
    drawn here is drawn too)."""
    out = dict(complete(space, values))
    given = {**dict(space.fixed), **out}
    for k in space.search_order():
        if k.name in before:
            continue
        if k.active(given):
            given[k.name] = out[k.name] = k.choices[int(rng.integers(len(k.choices)))]
        else:
            given[k.name] = out[k.name] = k.choices[0]
    return dict(complete(space, out))
