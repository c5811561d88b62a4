"""Evolutionary search: children of the best measured assignments, ranked by the cost model.

``search.strategy: evolutionary``, after MetaSchedule's evolutionary search:

- the *population* is the :data:`POPULATION` fastest assignments measured so far (``ok`` trials,
  by median latency; a resumed run starts from its log's);
- each call to :meth:`~EvolutionarySearch.propose` makes children: a parent is the faster of two
  members drawn at random (a tournament), and a child is the parent with one decision changed
  (two with probability :data:`TWO_CHANGES`) by the mutator of that knob's kind
  (:func:`autotune.search.mutators.mutate`: a tile moves mostly to a neighbouring factor, other
  kinds to another choice); an assignment that already has a trial is not proposed again;
- :data:`RANDOM_SHARE` of each call's proposals are uniform random assignments (MetaSchedule's
  epsilon share from its random initial population), and all are until :data:`MIN_PARENTS`
  trials are ``ok``;
- a draw taken to be over the memory is drawn again, up to :data:`~.base.FRESH_TRIES` times: one
  whose memory knobs (every knob but the loop-only ones) equal those of an ``infeasible`` trial
  (:class:`~autotune.search.feasibility.MemoryVerdicts`), and, in a search without the tuner's
  scorer, one that has a memory knob's value that :data:`NEVER_FITS_AFTER` infeasible trials and
  no feasible one have had. A mutant still taken to be over is left out; a random draw only when
  it is exactly the setting of an infeasible trial, so that the random share may still try a
  value that has not fitted yet. The value-by-value guess stands in for a lowering, so a search
  whose scorer lowers every child (below) does without it: the guess blames every value of an
  infeasible setting, and when most random draws are over the memory (as in round 0 of a space
  with tight pools), a value that fits beside the population's other values, and is the fastest
  one, can be blamed before any feasible draw has it, and no child with it is ever bred. The runs
  that measured this, with and without the guess, are in ``results/sample_efficiency_rocketlake_exact/``.

- with the tuner's scorer (:meth:`~.base.SearchStrategy.score_with`: the cost model's prediction
  for an assignment, which the tuner applies and lowers to get it; a search with a model that
  ranks has one), the children are bred for :data:`GENERATIONS` generations before any is
  proposed, as MetaSchedule's genetic algorithm evolves on the model: the first generation
  (children of the measured population) is scored beside :data:`SCORED_RANDOM` times as many
  random assignments, then half of each generation's children are mutants of the
  :data:`POPULATION` best predicted so far (random ones among them) and half of the measured
  population again, and the proposals are the best predicted of all (a random assignment kept
  as drawn is proposed as ``random``). A candidate two or three decisions from
  every measured one (a stage moved from its register tile to an unrolled and jammed window, then
  its tile sizes) is proposed when the model expects it to be fast, where one or two random
  changes of a measured parent would rarely reach it. Invalid ones and those over the memory
  (infinite predictions) are not proposed; while the model has no order (NaN), or none of the
  first generation can be measured, the first generation is proposed as it is.

The tuner lowers the proposals, ranks the feasible ones with the cost model and measures the best
(plus its own ``search.epsilon`` share at random), so the model decides which children are worth a
measurement; each measured child that is fast enough joins the population.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from ...config import SearchConfig
from ..feasibility import MemoryVerdicts
from ..mutators import mutate
from ..space import SearchSpace
from .base import FRESH_TRIES, Assignment, Outcome, SearchStrategy, random_assignment, register_strategy

__all__ = [
    "GENERATIONS", "MIN_PARENTS", "NEVER_FITS_AFTER", "POPULATION", "RANDOM_SHARE", "SCORED_RANDOM",
    "TWO_CHANGES", "EvolutionarySearch",
]  # fmt: skip

POPULATION = 16
"""The number of fastest measured assignments kept as parents."""
MIN_PARENTS = 2
"""Until this many trials are ``ok``, every proposal is random (there is nothing to breed from)."""
RANDOM_SHARE = 0.2
"""The share of each call's proposals drawn at random instead of bred."""
TWO_CHANGES = 0.25
"""The probability that a child differs from its parent in two decisions rather than one."""
GENERATIONS = 4
"""Generations of children bred on the cost model's predictions before the best are proposed (the
first bred from the measured population); 1: the first generation is proposed as it is."""
SCORED_RANDOM = 2.0
"""Random assignments scored beside the first generation, per child bred in a generation: those
the model ranks among the :data:`POPULATION` best predicted are bred from like the best children,
so that a region no measured assignment is near can be reached when the model expects it to be
fast (MetaSchedule's initial population is mostly random draws, the rest measured schedules).
This and :data:`GENERATIONS` against 1.0 and 3, seeds within 5% of the best and search wall:
``experiments/sample_efficiency.py``, ``results/sample_efficiency_rocketlake_sr2_g4_*``."""
NEVER_FITS_AFTER = 2
"""A draw is taken to be over the memory with a memory knob's value that this many infeasible
trials have had and no feasible one (on ``examples/small.yaml`` every trial with pool1 whole at root was over
``peak_limit``: 33 of the 45 infeasible trials of a 16-trial run)."""


@register_strategy
class EvolutionarySearch(SearchStrategy):
    """A population of the fastest measured assignments, mutated (see the module docstring)."""

    name = "evolutionary"

    def __init__(self, space: SearchSpace, settings: SearchConfig) -> None:
        super().__init__(space, settings)
        self.fastest: dict[Assignment, float] = {}  # every ok assignment: its best median (ms)
        self.memory = MemoryVerdicts(space)
        self.refused = 0
        """Draws left out as over the memory."""

    @property
    def population(self) -> list[Assignment]:
        """The :data:`POPULATION` fastest measured assignments, fastest first (ties in knob order)."""
        ranked = sorted(self.fastest.items(), key=lambda item: (item[1], repr(item[0])))
        return [knobs for knobs, _ in ranked[:POPULATION]]

    def _learn(self, outcomes: Sequence[Outcome]) -> None:
        for o in outcomes:
            record = o.record
            knobs = self._knobs_of(o)
            if record is not None and knobs is not None:
                self.memory.learn(knobs, record.status)
            if record is None or knobs is None or not record.ok or record.median_ms is None:
                continue
            self.fastest[knobs] = min(self.fastest.get(knobs, float("inf")), record.median_ms)

    def _draw(self, n: int, rng: np.random.Generator) -> list[tuple[Assignment, str]]:
        population = self.population
        taken: set[Assignment] = set()
        exact = self.memory.over
        randomly = self._random(rng)
        if len(population) < MIN_PARENTS:
            return self._kept(self._fresh(n, lambda: (randomly(), "random"), taken), exact)
        n_bred = n - round(RANDOM_SHARE * n)
        children = [(k, "mutant") for k in self._bred(population, n_bred, taken, rng)]
        if self.scorer is not None and children and GENERATIONS > 1:
            children = self._evolve(population, children, n_bred, taken, rng)
        randoms = self._kept(self._fresh(n - len(children), lambda: (randomly(), "random"), taken), exact)
        return children + randoms

    def _evolve(
        self,
        population: list[Assignment],
        first: list[tuple[Assignment, str]],
        n: int,
        taken: set[Assignment],
        rng: np.random.Generator,
    ) -> list[tuple[Assignment, str]]:
        """The ``n`` best predicted of :data:`GENERATIONS` generations, ``first`` the children of
        the first, scored beside :data:`SCORED_RANDOM` times as many random assignments (see the
        module docstring); ``first`` as it is while the model has no order."""
        assert self.scorer is not None
        origin = dict(first)
        predicted = dict(zip(origin, self.scorer(list(origin))))
        if any(math.isnan(v) for v in predicted.values()) or not _best(predicted, 1):
            return first  # no order to breed on
        randomly = self._random(rng)
        fresh = self._fresh(round(SCORED_RANDOM * n), lambda: (randomly(), "random"), taken)
        drawn = dict(self._kept(fresh, self._taken_over))
        if drawn:
            origin.update(drawn)
            predicted.update(zip(drawn, self.scorer(list(drawn))))
        for _ in range(GENERATIONS - 1):
            leaders = _best(predicted, POPULATION)
            new = self._bred(leaders, n - n // 2, taken, rng) + self._bred(population, n // 2, taken, rng)
            if not leaders or not new:
                break
            origin.update((k, "mutant") for k in new)
            predicted.update(zip(new, self.scorer(new)))
        return [(k, origin[k]) for k in _best(predicted, n)]

    def _bred(
        self, parents: list[Assignment], n: int, taken: set[Assignment], rng: np.random.Generator
    ) -> list[Assignment]:
        """Up to ``n`` fresh children of ``parents`` (best first) not taken to be over the memory."""
        if not parents:
            return []
        child = self._within(lambda: self._child(parents, rng), self._taken_over)
        return [
            k for k, _ in self._kept(self._fresh(n, lambda: (child(), "mutant"), taken), self._taken_over)
        ]

    def _random(self, rng: np.random.Generator) -> Callable[[], Assignment]:
        """Uniform random assignments, drawn again while taken to be over the memory."""
        return self._within(lambda: random_assignment(self.space, rng), self._taken_over)

    def _taken_over(self, knobs: Assignment) -> bool:
        """Whether a draw is taken to be over the memory: the setting of an infeasible trial, or,
        without a scorer to lower it, a value only infeasible trials have had (module docstring)."""
        if self.memory.over(knobs):
            return True
        return self.scorer is None and bool(self.memory.never_fits(knobs, NEVER_FITS_AFTER))

    def _within(
        self, make: Callable[[], Assignment], over: Callable[[Assignment], bool]
    ) -> Callable[[], Assignment]:
        """``make`` drawn again while ``over`` its draw (at most :data:`FRESH_TRIES` draws; the last
        is returned all the same)."""

        def draw() -> Assignment:
            for _ in range(FRESH_TRIES - 1):
                knobs = make()
                if not over(knobs):
                    return knobs
                self.refused += 1
            return make()

        return draw

    def _kept(
        self, drawn: list[tuple[Assignment, str]], over: Callable[[Assignment], bool]
    ) -> list[tuple[Assignment, str]]:
        """``drawn`` without the assignments ``over`` the memory."""
        kept = [(knobs, origin) for knobs, origin in drawn if not over(knobs)]
        self.refused += len(drawn) - len(kept)
        return kept

    def _child(self, population: list[Assignment], rng: np.random.Generator) -> Assignment:
        """A mutation of the tournament winner of two members (the population is fastest first)."""
        a, b = (int(i) for i in rng.integers(len(population), size=2))
        parent = population[min(a, b)]
        changes = 2 if rng.random() < TWO_CHANGES else 1
        return self._mutate(parent, rng, changes)

    def _mutate(self, parent: Assignment, rng: np.random.Generator, changes: int) -> Assignment:
        return mutate(self.space, dict(parent), rng, changes=changes)


def _best(predicted: dict[Assignment, float], n: int) -> list[Assignment]:
    """The ``n`` assignments of finite prediction, lowest first (ties in knob order)."""
    finite = [(v, repr(k), k) for k, v in predicted.items() if math.isfinite(v)]
    return [k for _, _, k in sorted(finite, key=lambda t: (t[0], t[1]))[:n]]
