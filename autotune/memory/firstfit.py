"""The placement engine shared by every planner: first fit in a given order.

Planners differ only in the order in which they offer allocations to
:func:`first_fit`. For each allocation, in that order, it tries the candidate
pools in turn and takes the lowest aligned offset that overlaps no already
placed, simultaneously live allocation of the pool::

    order A, B, C   lifetimes A [0, 2], B [1, 3], C [3, 4]
    A -> 0, B -> A.top (live with A), C -> 0 (A is dead), if the pool is big enough

When an allocation fits none of its candidates, :func:`overflow_error` says
which pool is too small and how big it would have to be.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from autotune.errors import ConfigError, PoolOverflowError
from autotune.memory.plan import Allocation, MemoryPlan, Placement
from autotune.memory.pools import Pool

__all__ = [
    "Failure",
    "Problem",
    "first_fit",
    "live_bytes_lower_bound",
    "overflow_error",
    "pool_peaks",
    "total_peak",
]

#: Where each allocation went: ``(pool index, offset)``, indexed like the allocations.
Assignment = list[tuple[int, int]]


@dataclass(frozen=True, slots=True)
class Failure:
    """Allocation ``index`` fit no candidate; in its last one, ``pool``, it
    would have ended at byte ``needed``."""

    index: int
    pool: int
    needed: int


@dataclass(frozen=True, slots=True)
class Problem:
    """Validated allocations and pools, with candidates and lifetime conflicts as indices."""

    allocations: tuple[Allocation, ...]
    pools: tuple[Pool, ...]
    candidates: tuple[tuple[int, ...], ...]
    conflicts: tuple[tuple[int, ...], ...]

    @classmethod
    def build(cls, allocations: Iterable[Allocation], pools: Iterable[Pool]) -> Problem:
        """Check names and candidates (:class:`ConfigError` for pools, ``ValueError``
        for allocations) and precompute who is live with whom."""
        allocs, pool_tuple = tuple(allocations), tuple(pools)
        if not pool_tuple:
            raise ConfigError("memory pools: expected at least one pool, got none")
        index = {pool.name: k for k, pool in enumerate(pool_tuple)}
        if len(index) != len(pool_tuple):
            names = [pool.name for pool in pool_tuple]
            dup = next(n for n in names if names.count(n) > 1)
            raise ConfigError(f"memory pools: duplicate pool name {dup!r}")
        if len({a.name for a in allocs}) != len(allocs):
            raise ValueError("memory planner: allocation names must be unique")
        every = tuple(range(len(pool_tuple)))
        candidates = []
        for a in allocs:
            unknown = [c for c in a.candidates if c not in index]
            if unknown:
                known = ", ".join(repr(p.name) for p in pool_tuple)
                raise ConfigError(
                    f"allocation {a.name!r}: candidate pool {unknown[0]!r} is not one of the pools {known}"
                )
            candidates.append(tuple(index[c] for c in a.candidates) or every)
        conflicts = tuple(
            tuple(j for j, b in enumerate(allocs) if j != i and a.overlaps(b)) for i, a in enumerate(allocs)
        )
        return cls(allocs, pool_tuple, tuple(candidates), conflicts)

    @property
    def sizes(self) -> list[int | None]:
        """Pool sizes by index (``None`` means unbounded in :func:`first_fit`)."""
        return [pool.size for pool in self.pools]

    def to_plan(self, assignment: Assignment, algorithm: str) -> MemoryPlan:
        """The plan for ``assignment``, placements in the allocations' order."""
        placements = tuple(
            Placement(a.name, self.pools[p].name, off, a.size, a.start, a.end)
            for a, (p, off) in zip(self.allocations, assignment, strict=True)
        )
        return MemoryPlan(placements, self.pools, algorithm)


def _lowest_offset(spans: list[tuple[int, int]], size: int, alignment: int) -> int:
    """Lowest multiple of ``alignment`` where ``size`` bytes miss every ``[lo, hi)`` span."""
    offset = 0
    for lo, hi in sorted(spans):
        if offset + size <= lo:
            break
        if hi > offset:
            offset = -(-hi // alignment) * alignment
    return offset


def first_fit(problem: Problem, order: Sequence[int], sizes: Sequence[int | None]) -> Assignment | Failure:
    """Place the allocations in ``order`` into pools of ``sizes`` bytes (``None``:
    unbounded); return the assignment, or the :class:`Failure` of the first
    allocation that fits no candidate."""
    allocs = problem.allocations
    pool_of = [-1] * len(allocs)
    offset_of = [0] * len(allocs)
    for i in order:
        a = allocs[i]
        needed = 0
        for p in problem.candidates[i]:
            spans = [
                (offset_of[j], offset_of[j] + allocs[j].size) for j in problem.conflicts[i] if pool_of[j] == p
            ]
            offset = _lowest_offset(spans, a.size, a.alignment)
            needed = offset + a.size
            limit = sizes[p]
            if limit is None or needed <= limit:
                pool_of[i], offset_of[i] = p, offset
                break
        else:
            return Failure(i, problem.candidates[i][-1], needed)
    return list(zip(pool_of, offset_of, strict=True))


def pool_peaks(problem: Problem, assignment: Assignment) -> list[int]:
    """High-water mark of each pool, by pool index."""
    peaks = [0] * len(problem.pools)
    for a, (p, offset) in zip(problem.allocations, assignment, strict=True):
        peaks[p] = max(peaks[p], offset + a.size)
    return peaks


def total_peak(problem: Problem, assignment: Assignment) -> int:
    """Sum of the pools' high-water marks."""
    return sum(pool_peaks(problem, assignment))


def overflow_error(problem: Problem, order: Sequence[int], failure: Failure) -> PoolOverflowError:
    """Explain ``failure`` and suggest a pool size that fits.

    The suggestion re-runs :func:`first_fit` in the same order with the failing
    pool unbounded and reports its high-water mark (``needed`` and
    ``suggested``): with that size every decision is the same, so the
    allocations fit. If another pool then overflows it is unbounded too and
    named in the message. When the failing allocation's only candidate is the
    failing pool, one byte less does not fit this order.
    """
    enlarged = [failure.pool]
    while True:
        sizes = [None if k in enlarged else s for k, s in enumerate(problem.sizes)]
        result = first_fit(problem, order, sizes)
        if not isinstance(result, Failure):
            break
        enlarged.append(result.pool)  # never one already unbounded
    peaks = pool_peaks(problem, result)
    pool = problem.pools[failure.pool]
    needed = max(peaks[failure.pool], failure.needed)
    suggested = max(peaks[failure.pool], pool.size)
    others = [
        f"a {problem.pools[k].name!r} of at least {peaks[k]:,} bytes"
        for k in enlarged[1:]
        if peaks[k] > problem.pools[k].size
    ]
    wanted = " and ".join([f"a {pool.name!r} of at least {suggested:,} bytes", *others])
    a = problem.allocations[failure.index]
    message = (
        f"allocation {a.name!r} ({a.size:,} bytes) does not fit pool {pool.name!r}: "
        f"needs {needed:,} bytes at peak, pool has {pool.size:,}; "
        f"{wanted} would fit"
    )
    return PoolOverflowError(message, pool.name, needed, pool.size, suggested)


def live_bytes_lower_bound(allocations: Iterable[Allocation]) -> int:
    """Largest number of bytes live at one program point (alignment ignored).

    No placement in any number of pools reserves less: every live allocation
    lies below its pool's high-water mark.
    """
    events: list[tuple[int, int]] = []
    for a in allocations:
        events.append((a.start, a.size))
        events.append((a.end + 1, -a.size))
    live = best = 0
    for _, delta in sorted(events):
        live += delta
        best = max(best, live)
    return best
