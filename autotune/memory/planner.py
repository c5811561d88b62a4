"""Static memory planners: give every allocation a pool and an offset.

A planner is a small :class:`Planner` subclass registered by name, so a config
says ``planner: hill_climb``. All of them place allocations by first fit
(:mod:`autotune.memory.firstfit`) and differ in the order they use:

- ``greedy_by_size``: largest first (ties: longer lifetime, then name);
- ``greedy_by_conflicts``: most simultaneously live neighbours first (ties: size);
- ``hill_climb``: the better greedy order, then seeded random swaps and moves
  that are kept when the total peak does not grow.

>>> plan = plan_memory([Allocation("A", 1024, 0, 1), Allocation("B", 512, 1, 2)],
...                    [Pool("dtcm", 4096)])
>>> plan.placement("B").offset, plan.total_peak
(1024, 1536)
"""

from __future__ import annotations

import random
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import ClassVar, TypeVar

from autotune.errors import ConfigError
from autotune.memory.firstfit import (
    Failure,
    Problem,
    first_fit,
    live_bytes_lower_bound,
    overflow_error,
    total_peak,
)
from autotune.memory.plan import Allocation, MemoryPlan
from autotune.memory.pools import Pool

__all__ = [
    "PLANNERS",
    "GreedyByConflicts",
    "GreedyBySize",
    "HillClimb",
    "Planner",
    "get_planner",
    "live_bytes_lower_bound",
    "plan_memory",
    "register_planner",
]


class Planner(ABC):
    """Assigns each allocation a pool and an aligned offset.

    ``plan`` raises :class:`ConfigError` when a candidate names an unknown pool
    and :class:`PoolOverflowError` when the allocations do not fit.
    """

    name: ClassVar[str]

    @abstractmethod
    def plan(self, allocations: Iterable[Allocation], pools: Iterable[Pool], seed: int = 0) -> MemoryPlan:
        """Place ``allocations`` into ``pools``; ``seed`` drives any random choice."""


_P = TypeVar("_P", bound=type[Planner])
_REGISTRY: dict[str, type[Planner]] = {}

#: Every registered planner class by name (read-only).
PLANNERS: Mapping[str, type[Planner]] = MappingProxyType(_REGISTRY)


def register_planner(cls: _P) -> _P:
    """Class decorator: make ``cls`` available as ``get_planner(cls.name)``."""
    name = getattr(cls, "name", None)
    if not isinstance(name, str) or not name:
        raise ValueError(f"register_planner: {cls.__name__} needs a non-empty class attribute 'name'")
    if name in _REGISTRY and _REGISTRY[name] is not cls:
        raise ValueError(f"register_planner: a planner named {name!r} is already registered")
    _REGISTRY[name] = cls
    return cls


def get_planner(name: str) -> Planner:
    """A fresh planner registered as ``name``; :class:`ConfigError` lists the known ones."""
    if name not in _REGISTRY:
        known = ", ".join(repr(n) for n in sorted(_REGISTRY))
        raise ConfigError(f"planner: unknown algorithm {name!r}; expected one of {known}")
    return _REGISTRY[name]()


def _size_order(problem: Problem) -> list[int]:
    allocs = problem.allocations
    return sorted(
        range(len(allocs)),
        key=lambda i: (-allocs[i].size, allocs[i].start - allocs[i].end, allocs[i].name),
    )


def _conflict_order(problem: Problem) -> list[int]:
    allocs = problem.allocations
    return sorted(
        range(len(allocs)),
        key=lambda i: (
            -len(problem.conflicts[i]),
            -allocs[i].size,
            allocs[i].start - allocs[i].end,
            allocs[i].name,
        ),
    )


class _Greedy(Planner):
    """First fit in the order given by :meth:`order`."""

    @staticmethod
    @abstractmethod
    def order(problem: Problem) -> list[int]:
        """The allocation indices in placement order."""

    def plan(self, allocations: Iterable[Allocation], pools: Iterable[Pool], seed: int = 0) -> MemoryPlan:
        """Place by first fit in :meth:`order`; ``seed`` is unused."""
        problem = Problem.build(allocations, pools)
        order = self.order(problem)
        result = first_fit(problem, order, problem.sizes)
        if isinstance(result, Failure):
            raise overflow_error(problem, order, result)
        return problem.to_plan(result, self.name)


@register_planner
class GreedyBySize(_Greedy):
    """Largest allocation first (ties: longer lifetime first, then name)."""

    name = "greedy_by_size"
    order = staticmethod(_size_order)


@register_planner
class GreedyByConflicts(_Greedy):
    """Allocation live with the most others first (ties: larger, longer, then name)."""

    name = "greedy_by_conflicts"
    order = staticmethod(_conflict_order)


def _perturb(order: list[int], rng: random.Random) -> list[int]:
    """A copy of ``order`` with two entries swapped or one moved earlier."""
    new = list(order)
    if rng.random() < 0.5:
        i, j = rng.sample(range(len(new)), 2)
        new[i], new[j] = new[j], new[i]
    else:
        i = rng.randrange(1, len(new))
        new.insert(rng.randrange(0, i), new.pop(i))
    return new


@register_planner
class HillClimb(Planner):
    """Start from the better greedy order, then perturb it (seeded).

    Each of at most ``iterations`` steps swaps two allocations or moves one
    earlier in the order and keeps the new order when its total peak is not
    larger; it stops early when the peak reaches
    :func:`live_bytes_lower_bound`. The result is never worse than either
    greedy planner, and the same input and seed give the same plan. When
    neither start order fits, the overflow error is the one of the start
    order that needs the least (its suggested size makes this planner fit).
    """

    name = "hill_climb"

    def __init__(self, iterations: int = 200) -> None:
        if isinstance(iterations, bool) or not isinstance(iterations, int) or iterations < 0:
            raise ConfigError(f"hill_climb.iterations: expected an int >= 0, got {iterations!r}")
        self.iterations = iterations

    def plan(self, allocations: Iterable[Allocation], pools: Iterable[Pool], seed: int = 0) -> MemoryPlan:
        """Hill-climb over placement orders with ``random.Random(seed)``."""
        problem = Problem.build(allocations, pools)
        sizes = problem.sizes
        starts = [_size_order(problem), _conflict_order(problem)]
        results = [first_fit(problem, order, sizes) for order in starts]
        feasible = [
            (total_peak(problem, r), k, r) for k, r in enumerate(results) if not isinstance(r, Failure)
        ]
        if not feasible:
            # The error of the start order that needs the least: grown as it suggests, that order fits,
            # and this planner starts from it.
            errors = [overflow_error(problem, o, r) for o, r in zip(starts, results) if isinstance(r, Failure)]
            raise min(errors, key=lambda e: e.suggested - e.available)
        peak, k, best = min(feasible, key=lambda t: t[:2])
        order = starts[k]
        bound = live_bytes_lower_bound(problem.allocations)
        rng = random.Random(seed)
        steps = self.iterations if len(order) > 1 else 0
        for _ in range(steps):
            if peak <= bound:
                break
            candidate = _perturb(order, rng)
            result = first_fit(problem, candidate, sizes)
            if isinstance(result, Failure):
                continue
            new_peak = total_peak(problem, result)
            if new_peak <= peak:
                order, best, peak = candidate, result, new_peak
        return problem.to_plan(best, self.name)


def plan_memory(
    allocations: Iterable[Allocation],
    pools: Iterable[Pool],
    algorithm: str = "greedy_by_size",
    seed: int = 0,
) -> MemoryPlan:
    """Place ``allocations`` into ``pools`` with the planner named ``algorithm``."""
    return get_planner(algorithm).plan(allocations, pools, seed=seed)
