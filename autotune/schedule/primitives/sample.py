"""``sample``: a decision of the search, recorded in the trace.

A search space draws one value for every knob that matters to a schedule and
records each draw as a ``sample`` step before the primitives the value selects
(as MetaSchedule's ``sample_categorical`` / ``sample_perfect_tile`` /
``sample_compute_location`` instructions): the step names the decision, says
what kind of choice it is, lists the candidates the space offered and the value
drawn. It leaves the function unchanged. A trace thus carries its own decisions:
a replay checks each value against its candidates, and the search reads them
back (:meth:`autotune.schedule.Schedule.decisions`) to change one decision and
rebuild the rest (a mutation).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ... import ir
from ...errors import ScheduleError

__all__ = ["KINDS", "sample"]

KINDS = ("tile", "location", "window", "unroll", "parallel", "vectorize", "pool", "layout")
"""What a decision chooses, one mutator per kind (:mod:`autotune.search.mutators`):

- ``tile``: an integer extent, ordered (a tile size, a strip width, a register tile; 0 for none);
- ``location``: where a block is computed (at its consumer's tile loop or at root; a padded copy's
  or a packed operand's place);
- ``window``: how a tiled intermediate whose tiles overlap is kept (rolling buffer or recompute);
- ``unroll``: unrolling, fusing and jamming of short loops;
- ``parallel``: which loop runs on the cores, and how a parallel part's copies are spaced;
- ``vectorize``: the vector mark of the innermost loop;
- ``pool``: the memory pool of an allocation;
- ``layout``: how operands are staged and ordered (padded copies, cached tiles, double buffers,
  loop orders).
"""


def _scalar(value: Any) -> bool:
    return isinstance(value, (int, str, bool)) and not (isinstance(value, int) and abs(value) > 2**53)


def _same(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a == b


def sample(func: ir.Func, *, name: str, kind: str, candidates: Sequence[Any], decision: Any) -> tuple[ir.Func, tuple[str, ...]]:
    """Record that decision ``name`` (of ``kind``) took ``decision`` among ``candidates``; ``func`` is unchanged.

    Refused: an empty name, a kind not in :data:`KINDS`, fewer than two candidates or one that is
    not an int, str or bool, repeated candidates, a decision that is not one of them."""
    if not isinstance(name, str) or not name:
        raise ScheduleError("sample", f"the decision needs a name, got {name!r}")
    if kind not in KINDS:
        raise ScheduleError("sample", f"decision {name!r}: kind must be one of {', '.join(KINDS)}, got {kind!r}")
    options = tuple(candidates) if isinstance(candidates, (list, tuple)) else ()
    if len(options) < 2 or not all(_scalar(c) for c in options):
        raise ScheduleError(
            "sample", f"decision {name!r}: candidates must be two or more ints, strings or booleans, got {candidates!r}"
        )
    if any(_same(a, b) for i, a in enumerate(options) for b in options[i + 1 :]):
        raise ScheduleError("sample", f"decision {name!r}: candidates {list(options)} repeat a value")
    if not any(_same(decision, c) for c in options):
        raise ScheduleError("sample", f"decision {name!r}: {decision!r} is not one of its candidates {list(options)}")
    return func, ()
