"""Pieces of the search loop that need no executor: lowering a candidate, its task, eps-greedy choice.

- :func:`lower_candidate` lowers a schedule with the run's pools and says
  whether it is feasible; an infeasible one still has its exact peak (it is
  planned again in unbounded pools of the same names), so it is never compiled
  yet its figures are known.
- :func:`make_task` is the measurement of a trace as the config says.
- :func:`choose` is MetaSchedule's epsilon-greedy pick among ranked candidates, saying of each
  pick how it was made (by the model, at random, or no choice).

What proposes the candidates is a search strategy (:mod:`autotune.search.strategies`).
"""

from __future__ import annotations

from collections.abc import Collection, Hashable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from .. import ir
from ..config import RunConfig
from ..errors import PoolOverflowError
from ..lowering import UNPLANNED, Lowered, lower, plan_lowered
from ..measure.task import MeasureTask
from ..memory import MemoryPlan, Pool
from .space import SearchSpace

__all__ = [
    "Assignment", "Lowering", "choose", "complete", "knobs_text", "lower_candidate", "make_task", "random_assignment",
]  # fmt: skip

Assignment = tuple[tuple[str, Any], ...]
"""``((knob, value), ...)`` for every knob of a space, in the space's order (what a strategy proposes)."""

UNBOUNDED = 1 << 40


@dataclass(frozen=True)
class Lowering:
    """A schedule lowered in the run's pools: ``lowered`` if feasible, else None and the ``reason``."""

    lowered: Lowered | None
    peak: int
    pool_bytes: tuple[tuple[str, int], ...]
    excess: float  # relative excess over the limit or the fullest pool; <= 0 when feasible
    reason: str = ""


def _pool_bytes(plan: MemoryPlan) -> tuple[tuple[str, int], ...]:
    return tuple(plan.pool_peaks.items())


def lower_candidate(
    func: ir.Func, pools: Sequence[Pool], planner: str, seed: int, peak_limit: int | None
) -> Lowering:
    """Lower ``func`` and judge its plan: pools overflowing or ``peak > peak_limit`` is infeasible.

    The lowering passes run once; only the memory plan is made again, in unbounded pools, for
    the peak of a candidate that overflows the pools (:func:`~autotune.lowering.plan_lowered`)."""
    pools = tuple(pools)
    unplanned = lower(func, until=UNPLANNED).func  # the passes that do not read the pools, run once
    try:
        lowered = plan_lowered(unplanned, pools=pools, planner=planner, seed=seed)
    except PoolOverflowError as exc:
        big = tuple(replace(p, size=UNBOUNDED) for p in pools)
        plan = plan_lowered(unplanned, pools=big, planner=planner, seed=seed).plan
        sizes = {p.name: p.size for p in pools}
        over = max((used - sizes[name]) / sizes[name] for name, used in plan.pool_peaks.items())
        if peak_limit is not None:
            over = max(over, (plan.total_peak - peak_limit) / max(peak_limit, 1))
        return Lowering(None, plan.total_peak, _pool_bytes(plan), max(over, 1e-9), f"pools overflow: {exc}")
    peak = lowered.plan.total_peak
    excess = 0.0 if peak_limit is None else (peak - peak_limit) / max(peak_limit, 1)
    if peak_limit is not None and peak > peak_limit:
        reason = f"peak {peak:,} bytes is over peak_limit {peak_limit:,} bytes"
        return Lowering(None, peak, _pool_bytes(lowered.plan), excess, reason)
    return Lowering(lowered, peak, _pool_bytes(lowered.plan), excess)


def make_task(cfg: RunConfig, trace: str, pools: bool = True, cutoff_ms: float | None = None) -> MeasureTask:
    """The measurement of ``trace`` as the config says (``pools=False``: one unbounded pool); a
    candidate whose first timed runs are all over ``cutoff_ms`` stops there (status ``cutoff``)."""
    wl = cfg.workload
    label = wl.name or Path(str(wl.path).rpartition(":")[0]).stem
    m = cfg.measure
    return MeasureTask(
        workload=label,
        workload_args=tuple(wl.args),
        workload_path=wl.path if wl.name is None else None,
        trace=trace,
        pools=tuple((p.name, p.size) for p in cfg.memory.pools) if pools else (),
        planner=cfg.memory.planner,
        warmup=m.warmup,
        repeats=m.repeats,
        check=m.check,
        seed=cfg.search.seed,
        timeout=m.timeout,
        cutoff_ms=cutoff_ms,
    )


def knobs_text(knobs: Mapping[str, Any] | Sequence[tuple[str, Any]]) -> str:
    """``tile=4, rolling=True``."""
    pairs = knobs.items() if isinstance(knobs, Mapping) else knobs
    return ", ".join(f"{k}={v}" for k, v in pairs)


def complete(space: SearchSpace, values: Mapping[str, Any]) -> Assignment:
    """``values`` as a full assignment: missing knobs and inactive ones at their default."""
    out = {k.name: values.get(k.name, k.choices[0]) for k in space.knobs}
    given = {**dict(space.fixed), **out}
    for k in space.search_order():  # controls first: a control reset may switch off more knobs
        if not k.active(given):
            given[k.name] = out[k.name] = k.choices[0]
    return tuple((k.name, out[k.name]) for k in space.knobs)


def random_assignment(space: SearchSpace, rng: np.random.Generator) -> dict[str, Any]:
    """One knob value per knob, uniformly at random (an inactive knob: its default)."""
    values = dict(space.fixed)
    for k in space.search_order():
        values[k.name] = k.choices[int(rng.integers(len(k.choices)))] if k.active(values) else k.choices[0]
    return {k.name: values[k.name] for k in space.knobs}


def choose(
    predicted: np.ndarray,
    n: int,
    epsilon: float,
    rng: np.random.Generator,
    rows: Sequence[Hashable] | None = None,
    known: Collection[Hashable] = (),
    drawn: Sequence[bool] | None = None,
) -> list[tuple[int, str]]:
    """``(index, how)`` of ``n`` candidates to measure: the best ``n - round(epsilon * n)`` by
    prediction (``"model"``), the rest at random (``"random"``); all at random while any prediction
    is NaN (no model yet); every candidate (``"every"``: no choice) when there are at most ``n``.

    With ``rows`` (each candidate's feature row, hashable), the share chosen by prediction takes
    one candidate per row and none whose row is ``known`` (a timed trial's): the model sees such
    candidates as one program (schedules that differ only in which pool holds a buffer, say), so a
    second measurement tells it nothing new and costs a trial that a program it can tell apart
    could have; when fewer distinct rows are left, the best
    predicted of the others fill the share. The random share draws from every candidate left, or,
    with ``drawn`` (per candidate, whether the strategy drew it at random rather than bred or
    chose it on the model), from the drawn ones left first and from the others when too few are:
    MetaSchedule's epsilon-greedy pick, whose random share comes from its random population, so that
    exploration reaches beyond the region the model's own proposals come from."""
    count = len(predicted)
    if n >= count:
        return [(i, "every") for i in range(count)]
    if n <= 0:
        return []
    if np.isnan(predicted).any():
        return [(int(i), "random") for i in rng.choice(count, size=n, replace=False)]
    explore = round(epsilon * n)
    order = [int(i) for i in np.argsort(predicted, kind="stable")]
    top = order[: n - explore] if rows is None else _distinct(order, n - explore, rows, known)
    taken = set(top)
    rest = [i for i in order if i not in taken]
    first = rest if drawn is None else [i for i in rest if drawn[i]]
    if len(first) >= explore:
        shared = list(rng.choice(first, size=explore, replace=False))
    else:  # every drawn one, then others at random (there are enough: n < count)
        others = [i for i in rest if drawn is not None and not drawn[i]]  # drawn is set: first < rest
        shared = [*first, *rng.choice(others, size=explore - len(first), replace=False)]
    return [(i, "model") for i in top] + [(int(i), "random") for i in shared]


def _distinct(order: list[int], n: int, rows: Sequence[Hashable], known: Collection[Hashable]) -> list[int]:
    """The first ``n`` of ``order`` with a row neither ``known`` nor taken already, filled up in
    ``order`` when there are fewer."""
    seen = set(known)
    top: list[int] = []
    for i in order:
        if len(top) == n:
            return top
        if rows[i] not in seen:
            seen.add(rows[i])
            top.append(i)
    taken = set(top)
    return top + [i for i in order if i not in taken][: n - len(top)]
