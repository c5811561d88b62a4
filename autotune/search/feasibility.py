"""Before a run: does any schedule of the space fit the memory (the pools and ``peak_limit``)?

A schedule's peak depends only on its *memory knobs* (:func:`memory_knobs`): every knob of the
space but the loop-only ones (:data:`LOOP_KNOBS`: fusing, unrolling, jamming, the vector mark),
which reshape loops and leave the allocations as they are. The memory knobs size, place or
multiply buffers: tiles, compute locations, inlined stages, rolling or recompute, strips, padded
copies, register tiles and their channel blocks and dot products, staging and packing, parallel
copies and their padding, pools. (On a chain of two dense layers, ``inline_*``, ``regtile_*``,
``dot_*``, ``chblock_*`` and ``pack_*`` each changed the peak; ``tests/search/test_search_feasibility.py``
and ``test_search_strategies_memory.py`` check on random schedules of every family that the
loop-only knobs never do.) Lowering and planning a
schedule without compiling it takes from 5 ms for a two-stage chain to 150 ms for
a seven-stage one at full size (``tests/search/test_search_feasibility.py`` runs it on
small chains), so :func:`check_fits` lowers every combination of the memory knobs
(the other knobs at their defaults) when there are at most :data:`EXACT_LIMIT`
of them, and a seeded sample of that many otherwise. It returns at the first
schedule that fits; when none does it raises ConfigError with the smallest
total peak among them, its placement per pool, and the least any of them puts
in each pool, saying whether that minimum is exact (every combination) or the
smallest of a sample.
"""

from __future__ import annotations

import fnmatch
import itertools
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from math import prod
from typing import Any

import numpy as np

from ..errors import ConfigError, ScheduleError
from ..memory import Pool
from ..workloads import Workload
from . import candidates as cand
from .space import Knob, SearchSpace
from .space_family import same_value

__all__ = ["EXACT_LIMIT", "LOOP_KNOBS", "MemoryVerdicts", "check_fits", "memory_knobs"]

LOOP_KNOBS = ("fuse_*", "unroll_*", "jam_*", "jamrows_*", "vectorize")
"""Glob patterns of the knobs that only reshape loops (fusing, unrolling, jamming, the vector mark)
and never change an allocation (cascade and gemm spaces); a knob of any other name may."""
EXACT_LIMIT = 512
"""At most this many combinations of the memory knobs are lowered: all of them when there are no more."""
_ENUMERATE_LIMIT = 20_000
"""Above this many raw combinations (before dropping inactive duplicates) the list is not built."""


@dataclass(frozen=True)
class _Probe:
    knobs: dict[str, Any]
    peak: int
    pool_bytes: tuple[tuple[str, int], ...]


def memory_knobs(space: SearchSpace) -> tuple[Knob, ...]:
    """The knobs of ``space`` that may change an allocation (all but :data:`LOOP_KNOBS`), in the
    space's search order."""
    return tuple(
        k for k in space.search_order() if not any(fnmatch.fnmatchcase(k.name, p) for p in LOOP_KNOBS)
    )


class MemoryVerdicts:
    """Which settings of a space's memory knobs the trials so far found over the memory.

    A schedule's peaks depend only on its memory knobs (:func:`memory_knobs`), so an assignment
    whose memory knobs equal those of an ``infeasible`` trial is infeasible too, without a
    lowering: :meth:`over` says so. A trial of any other status but ``invalid`` was lowered within
    the memory, and its setting :meth:`fits`. Beyond these exact verdicts, :meth:`never_fits`
    names the values of single memory knobs that only infeasible trials have had (a guess: such a
    value may fit beside values not tried yet). Assignments are full (:class:`~.candidates.Assignment`).
    """

    def __init__(self, space: SearchSpace) -> None:
        self.names = tuple(k.name for k in memory_knobs(space))
        self._over: set[tuple[Any, ...]] = set()
        self._fit: set[tuple[Any, ...]] = set()
        self._values_over: Counter[tuple[str, Any]] = Counter()  # (knob, typed value) -> infeasible trials
        self._values_fit: set[tuple[str, Any]] = set()

    def key(self, knobs: cand.Assignment) -> tuple[tuple[str, Any], ...]:
        """The memory knobs' values of ``knobs``."""
        values = dict(knobs)
        return tuple((name, values[name]) for name in self.names)

    def _typed(self, knobs: cand.Assignment) -> tuple[tuple[str, tuple[str, Any]], ...]:
        """:meth:`key` with each value's type, so that ``True`` and ``1`` count apart."""
        return tuple((name, (type(value).__name__, value)) for name, value in self.key(knobs))

    def learn(self, knobs: cand.Assignment, status: str) -> None:
        """Take the status of the trial of ``knobs``."""
        key = self._typed(knobs)
        if status == "infeasible":
            self._over.add(key)
            self._values_over.update(key)
        elif status != "invalid":  # ScheduleError: never lowered, its memory unknown
            self._fit.add(key)
            self._values_fit.update(key)

    def over(self, knobs: cand.Assignment) -> bool:
        """Whether a trial with the same memory knobs was infeasible."""
        return self._typed(knobs) in self._over

    def fits(self, knobs: cand.Assignment) -> bool:
        """Whether a trial with the same memory knobs was lowered within the memory."""
        return self._typed(knobs) in self._fit

    def never_fits(self, knobs: cand.Assignment, after: int = 2) -> list[tuple[str, Any]]:
        """The memory knobs' values of ``knobs`` that ``after`` infeasible trials or more have had
        and no trial within the memory."""
        return [
            (name, typed[1])
            for name, typed in self._typed(knobs)
            if (name, typed) not in self._values_fit and self._values_over[(name, typed)] >= after
        ]


def _settle(space: SearchSpace, values: dict[str, Any]) -> dict[str, Any] | None:
    """``values`` with every inactive knob at its default; None if that changes a memory knob
    (the same schedule is produced by the assignment with the default)."""
    full = {**dict(space.fixed), **space.default(), **values}
    for k in space.search_order():
        if not k.active(full) and not same_value(full[k.name], k.choices[0]):
            return None
    return {k.name: full[k.name] for k in space.knobs}


def _all(space: SearchSpace, knobs: Sequence[Knob]) -> list[dict[str, Any]]:
    out = []
    for combo in itertools.product(*(k.choices for k in knobs)):
        settled = _settle(space, {k.name: v for k, v in zip(knobs, combo)})
        if settled is not None:
            out.append(settled)
    return out


def _sample(
    space: SearchSpace, knobs: Sequence[Knob], n: int, rng: np.random.Generator
) -> list[dict[str, Any]]:
    out = []
    values = {**dict(space.fixed), **space.default()}
    for _ in range(n):
        drawn = dict(values)
        for k in knobs:  # search order: a knob's requirements are drawn before it
            drawn[k.name] = k.choices[int(rng.integers(len(k.choices)))] if k.active(drawn) else k.choices[0]
        out.append({k.name: drawn[k.name] for k in space.knobs})
    return out


def _assignments(space: SearchSpace, seed: int) -> tuple[list[dict[str, Any]], bool, int]:
    """The assignments to lower (the default first), whether they are every combination, and how
    many combinations there are (raw product when not enumerated)."""
    knobs = memory_knobs(space)
    raw = prod(len(k.choices) for k in knobs)
    rng = np.random.default_rng([seed, 0x6D656D])
    if raw <= _ENUMERATE_LIMIT:
        every = _all(space, knobs)
        if len(every) <= EXACT_LIMIT:
            order = rng.permutation(len(every))
            return [space.default(), *(every[i] for i in order)], True, len(every)
        return [space.default(), *_sample(space, knobs, EXACT_LIMIT, rng)], False, len(every)
    return [space.default(), *_sample(space, knobs, EXACT_LIMIT, rng)], False, raw


def _probes(
    space: SearchSpace, workload: Workload, assignments: Sequence[dict[str, Any]],
    pools: Sequence[Pool], planner: str, seed: int, limit: int | None,
) -> Iterator[_Probe | None]:  # fmt: skip
    """Lower each distinct schedule; None for one that fits, else its peaks."""
    seen: set[str] = set()
    for values in assignments:
        try:
            sch = space.apply(workload.func, values)
        except ScheduleError:
            continue
        trace = sch.trace_json()
        if trace in seen:
            continue
        seen.add(trace)
        low = cand.lower_candidate(sch.func, pools, planner, seed, limit)
        yield (
            None if low.lowered is not None else _Probe(space.active_values(values), low.peak, low.pool_bytes)
        )


def check_fits(
    space: SearchSpace, workload: Workload, pools: Sequence[Pool], planner: str, seed: int, limit: int | None
) -> None:
    """Return once a schedule of ``space`` fits ``pools`` and ``limit``; ConfigError if none does
    (see the module docstring for which schedules are tried)."""
    assignments, exact, combos = _assignments(space, seed)
    tried: list[_Probe] = []
    for probe in _probes(space, workload, assignments, pools, planner, seed, limit):
        if probe is None:
            return
        tried.append(probe)
    if not tried:
        return  # nothing applies: every trial will be invalid, and the log will say why
    raise ConfigError(_message(space, tried, exact, combos, pools, limit))


def _needs(tried: list[_Probe], pools: Sequence[Pool], limit: int | None) -> str:
    """For each pool, the least size with which a tried schedule fits, the other pools and the
    limit as they are (the schedules' bytes per pool as planned in unbounded pools)."""
    sizes = {p.name: p.size for p in pools}
    parts = []
    for pool in pools:
        fits = [
            dict(t.pool_bytes).get(pool.name, 0)
            for t in tried
            if (limit is None or t.peak <= limit)
            and all(used <= sizes[name] for name, used in t.pool_bytes if name != pool.name)
        ]
        parts.append(
            f"{pool.name} of at least {min(fits):,} bytes" if fits else f"no size of {pool.name} alone"
        )
    if limit is not None:
        peaks = [t.peak for t in tried if all(used <= sizes[name] for name, used in t.pool_bytes)]
        parts.append(f"peak_limit of at least {min(peaks):,} bytes" if peaks else "no peak_limit alone")
    return "; ".join(parts)


def _message(
    space: SearchSpace,
    tried: list[_Probe],
    exact: bool,
    combos: int,
    pools: Sequence[Pool],
    limit: int | None,
) -> str:
    best = min(tried, key=lambda p: (p.peak, sorted(p.knobs.items(), key=str)))
    names = [k.name for k in memory_knobs(space)]
    shown = {k: v for k, v in best.knobs.items() if k in names}
    which = (
        f"every one of the {len(tried)} distinct schedules of the {combos} combinations of the knobs that size "
        f"buffers ({', '.join(names) or 'none'}; the others at their defaults)"
        if exact
        else f"the {len(tried)} distinct schedules of a seeded sample of {EXACT_LIMIT} of the {combos} "
        f"combinations of the knobs that size buffers ({', '.join(names)}; the others at their defaults); "
        "a schedule outside the sample may need less"
    )
    budget = ", ".join(f"{p.name} {p.size:,}" for p in pools)
    budget += f" bytes; peak_limit {limit:,} bytes" if limit is not None else " bytes; no peak_limit"
    per_pool = ", ".join(f"{name} {used:,}" for name, used in best.pool_bytes)
    return (
        f"no schedule of the space fits the memory (pools {budget}): the smallest total peak is "
        f"{best.peak:,} bytes ({per_pool}; schedule: {cand.knobs_text(shown) or 'the default'}). "
        f"With the other limits as they are, a schedule fits with: {_needs(tried, pools, limit)}. "
        f"Tried: {which}"
    )
