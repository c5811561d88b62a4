"""Lowering: scheduled function -> plain loops over flat (or banked) buffers with a memory plan.

``PASSES`` in order:

- ``inject_rolling_buffer``: sliding window + storage folding of rolling buffers;
- ``compact_buffers``: each intermediate shrinks to the region one iteration of its
  allocation site touches (explicit regions respected) and moves to that site;
  buffers under a parallel loop get one copy per iteration of it;
- ``inject_double_buffer``: staged buffers get two slots and a prologue;
- ``lower_blocks``: blocks become loops, ifs, ``Allocate`` and ``DeclBuffer``;
- ``clamp_guarded_loads``: the loads of a select's values stay inside their buffers (indices
  clamped where they may leave them), so codegen computes both values without a branch;
- ``flatten_buffers``: every intermediate becomes 1-d, or N-d by its axis separators;
  parameters keep their logical shapes, flat aliases are declared inside;
- ``simplify``: arithmetic simplification of every expression;
- ``hoist_guards``: reduction inits and tile predicates leave the loops they do not depend on;
- ``promote_accumulators``: a reduction's output element, or a register tile of them (over
  unrolled loops below the reduction loops), lives in registers (a ``local`` allocation)
  across its reduction loops, stored once after them;
- ``clamp_at_producer``: a clamp (``min``/``max`` with constants, relu6) that every read of an
  intermediate applies is applied once by its stores instead;
- ``plan_memory``: a pool and an offset for every allocation (``autotune.memory``); the only
  pass that reads the pools, so :func:`plan_lowered` plans a function lowered up to it
  (``until=UNPLANNED``) in other pools without running the others again.
"""

from __future__ import annotations

from .. import ir
from ..memory import Pool
from ..memory.lowering import plan_memory_pass
from .accumulate import promote_accumulators
from .blocks import lower_blocks
from .clamps import clamp_at_producer
from .compact import compact_buffers
from .double_buffer import inject_double_buffer
from .flatten import flatten_buffers
from .guards import clamp_guarded_loads
from .hoist import hoist_guards
from .pipeline import DEFAULT_POOLS, Lowered, LowerOptions, Pass, run_passes
from .rolling import inject_rolling_buffer
from .simplify import simplify_func

PASSES: tuple[Pass, ...] = (
    Pass("inject_rolling_buffer", lambda f, o: inject_rolling_buffer(f)),
    Pass("compact_buffers", lambda f, o: compact_buffers(f)),
    Pass("inject_double_buffer", lambda f, o: inject_double_buffer(f)),
    Pass("lower_blocks", lambda f, o: lower_blocks(f)),
    Pass("clamp_guarded_loads", lambda f, o: clamp_guarded_loads(f)),
    Pass("flatten_buffers", lambda f, o: flatten_buffers(f)),
    Pass("simplify", lambda f, o: simplify_func(f)),
    Pass("hoist_guards", lambda f, o: hoist_guards(f)),
    Pass("promote_accumulators", lambda f, o: promote_accumulators(f)),
    Pass("clamp_at_producer", lambda f, o: clamp_at_producer(f)),
    Pass("plan_memory", plan_memory_pass),
)


UNPLANNED = PASSES[-2].name
"""The pass before ``plan_memory``, the last: ``lower(func, until=UNPLANNED)`` runs every pass that
does not read the pools, and :func:`plan_lowered` the one that does."""


def lower(
    func: ir.Func,
    *,
    pools: tuple[Pool, ...] = DEFAULT_POOLS,
    planner: str = "greedy_by_size",
    seed: int = 0,
    verify: bool = False,
    until: str | None = None,
) -> Lowered:
    """Run ``PASSES`` (up to and including ``until``) and return the function with its memory plan."""
    options = LowerOptions(pools=tuple(pools), planner=planner, seed=seed)
    passes = PASSES
    if until is not None:
        names = [p.name for p in PASSES]
        if until not in names:
            raise ValueError(f"unknown pass {until!r}; passes: {names}")
        passes = PASSES[: names.index(until) + 1]
    out = run_passes(func, passes, options, verify=verify)
    from ..memory.lowering import empty_plan

    return Lowered(out, options.plan if options.plan is not None else empty_plan(options.pools))


def plan_lowered(
    unplanned: ir.Func,
    *,
    pools: tuple[Pool, ...] = DEFAULT_POOLS,
    planner: str = "greedy_by_size",
    seed: int = 0,
) -> Lowered:
    """The last pass, ``plan_memory``, on ``lower(func, until=UNPLANNED).func``: the same
    :class:`Lowered` as ``lower(func, pools=pools, ...)``. Only this pass reads the pools, so one
    function lowered up to it can be planned in several sets of pools (the search plans an
    infeasible candidate again in unbounded pools for its peak) without lowering it again."""
    options = LowerOptions(pools=tuple(pools), planner=planner, seed=seed)
    out = PASSES[-1].run(unplanned, options)
    assert options.plan is not None, "the last pass plans memory"
    return Lowered(out, options.plan)


__all__ = [
    "DEFAULT_POOLS", "PASSES", "UNPLANNED", "Lowered", "LowerOptions", "Pass", "lower", "lower_blocks", "plan_lowered",
]  # fmt: skip
