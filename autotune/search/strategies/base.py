"""The search strategy interface: what proposes knob assignments and learns what became of them.

A strategy is asked for candidates and told their trials; the tuner does everything between
(applying the knobs, lowering, ranking with the cost model, measuring, logging)::

    strategy = make_strategy(cfg.search, space)
    strategy.learn([Outcome(r) for r in log.records])   # a resumed run: the logged trials first
    proposals = strategy.propose(64)                     # Proposals: full knob assignments
    ...
    strategy.learn([Outcome(record, proposal, excess), Outcome(None, ranked_out)])

The contract every registered strategy keeps (``tests/search/test_strategy_contract.py``):

- :meth:`~SearchStrategy.propose` returns at most ``n`` proposals; each names every knob of the
  space, in the space's order, with one of the knob's choices, and an inactive knob (one whose
  ``requires`` are not met) at its default, so that two assignments of one schedule are equal;
- given the same seed, space and learned outcomes, it proposes the same assignments;
- :meth:`~SearchStrategy.learn` takes, for every proposal of the last call, an :class:`Outcome`:
  its trial record (the one logged, or logged earlier for the same schedule), or None when it was
  not measured (ranked out by the cost model, or past the trial budget); and outcomes without a
  proposal, the trials of a resumed log;
- :meth:`~SearchStrategy.enqueue` puts assignments first in line (a warm start);
- :meth:`~SearchStrategy.logged` is given every trial as it is written to the log (at the start
  of a session, every trial of the log); only a strategy that stores them does anything with it;
- :meth:`~SearchStrategy.score_with` hands it the tuner's :data:`Scorer`: the cost model's
  prediction for assignments it has not proposed yet (the candidates applied and lowered as the
  round would, infinite for one that is invalid, over the memory or measured already). A strategy
  may use it to choose what to propose (the evolutionary strategy breeds on predictions for a few
  generations before it proposes); the others ignore it.

``make_strategy(settings, space, storage)`` with a ``search.storage``
(:class:`~.optuna_storage.StudyStorage`) has the strategy keep a copy of the log there
(:meth:`~SearchStrategy.store_in`); only the Optuna strategy can, the others refuse.

Strategies are registered by name (:func:`register_strategy`), so the config says
``search.strategy: evolutionary``; :func:`make_strategy` builds the one a config names.
"""

from __future__ import annotations

import itertools
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from ...config import SearchConfig
from ...errors import ConfigError
from .. import candidates
from ..candidates import Assignment, complete
from ..records import TrialRecord
from ..space import SearchSpace
from .optuna_storage import StudyStorage

__all__ = [
    "STRATEGIES",
    "Assignment",
    "Outcome",
    "Proposal",
    "Scorer",
    "SearchStrategy",
    "complete",
    "make_strategy",
    "random_assignment",
    "register_strategy",
]


Scorer = Callable[[Sequence[Assignment]], np.ndarray]
"""Predicted cost per assignment, lower for a faster candidate; ``inf`` for one that cannot be
measured (invalid, over the memory, measured already); NaN for all while the model has no order."""

FRESH_TRIES = 8
"""A strategy that avoids proposing what it has seen draws at most this many times per proposal."""


@dataclass(frozen=True)
class Proposal:
    """One candidate: a full assignment, the strategy's ``ticket`` for it (given back in
    :class:`Outcome`) and where it came from (``sampler``, ``mutant``, ``random``, ``queued``)."""

    knobs: Assignment
    ticket: int
    origin: str = "sampler"

    def values(self) -> dict[str, Any]:
        return dict(self.knobs)


@dataclass(frozen=True)
class Outcome:
    """What became of a proposal: its trial ``record`` (None: not measured) and, for an
    infeasible one, its relative ``excess`` over ``peak_limit`` or the fullest pool (> 0).
    ``proposal`` is None for a trial of a resumed log."""

    record: TrialRecord | None
    proposal: Proposal | None = None
    excess: float | None = None


def random_assignment(space: SearchSpace, rng: np.random.Generator) -> Assignment:
    """Every active knob drawn uniformly from its choices, the inactive ones at their default."""
    return tuple(candidates.random_assignment(space, rng).items())


class SearchStrategy(ABC):
    """Proposes assignments of a space's knobs and learns from their trials (seeded by ``settings.seed``).

    Subclasses implement :meth:`_draw` (and may override :meth:`_learn`); :meth:`propose` hands
    out the queued assignments first, then ``_draw``'s, each call with its own seeded generator.
    ``calls`` counts the calls to :meth:`propose`, continuing from the last round of a resumed log.
    """

    name: ClassVar[str]

    def __init__(self, space: SearchSpace, settings: SearchConfig) -> None:
        self.space = space
        self.settings = settings
        self.seed = settings.seed
        self.calls = 0
        self.seen: set[Assignment] = set()  # assignments with a trial (logged now or before)
        self.scorer: Scorer | None = None
        self._queue: list[Assignment] = []
        self._tickets = itertools.count()

    # ---- the interface -----------------------------------------------------
    def propose(self, n: int) -> list[Proposal]:
        """Up to ``n`` proposals: the queued ones first, then the strategy's own."""
        rng = np.random.default_rng([self.seed, self.calls])
        self.calls += 1
        queued, self._queue = self._queue[:n], self._queue[n:]
        drawn = self._draw(n - len(queued), rng) if n > len(queued) else []
        return [self._ticket(a, "queued") for a in queued] + [self._ticket(a, o) for a, o in drawn]

    def learn(self, outcomes: Sequence[Outcome]) -> None:
        """Take the outcomes of the last proposals, or the trials of a resumed log (no proposal)."""
        for o in outcomes:
            if o.proposal is None and o.record is not None:
                self.calls = max(self.calls, o.record.round + 1)
            knobs = self._knobs_of(o)
            if o.record is not None and knobs is not None:
                self.seen.add(knobs)
        self._learn(outcomes)

    def enqueue(self, assignments: Iterable[Mapping[str, Any]]) -> None:
        """Propose these first (their missing and inactive knobs at their defaults)."""
        self._queue.extend(complete(self.space, a) for a in assignments)

    def store_in(self, storage: StudyStorage) -> None:
        """Keep a copy of the logged trials in ``storage`` (``search.storage``): ConfigError here,
        as a strategy without an Optuna study has nothing to store."""
        raise ConfigError(
            f"search.storage: search.strategy {self.name!r} keeps no Optuna study; a storage needs 'optuna'"
        )

    def score_with(self, scorer: Scorer | None) -> None:
        """Use ``scorer`` (the tuner's cost-model predictions, see :data:`Scorer`) when proposing."""
        self.scorer = scorer

    def logged(self, records: Sequence[TrialRecord]) -> None:  # noqa: B027 (optional hook)
        """Trials as they are written to the log; at the start of a session, every trial of the
        log. Nothing by default (a strategy given a storage copies them there)."""

    # ---- for subclasses ----------------------------------------------------
    @abstractmethod
    def _draw(self, n: int, rng: np.random.Generator) -> list[tuple[Assignment, str]]:
        """``n`` (or fewer) assignments with their origin."""

    def _learn(self, outcomes: Sequence[Outcome]) -> None:  # noqa: B027 (optional hook)
        """What the strategy keeps of ``outcomes`` beyond :attr:`seen` (nothing by default)."""

    def _ticket(self, knobs: Assignment, origin: str) -> Proposal:
        return Proposal(knobs, next(self._tickets), origin)

    def _knobs_of(self, outcome: Outcome) -> Assignment | None:
        """The outcome's assignment: its proposal's, or a logged record's when it fits the space."""
        if outcome.proposal is not None:
            return outcome.proposal.knobs
        record = outcome.record
        if record is None:
            return None
        values = dict(record.knobs)
        if set(values) != {k.name for k in self.space.knobs} or any(
            values[k.name] not in k for k in self.space.knobs
        ):
            return None  # the space changed since the log was written
        return complete(self.space, values)

    def _fresh(
        self, n: int, make: Callable[[], tuple[Assignment, str]], taken: set[Assignment] | None = None
    ) -> list[tuple[Assignment, str]]:
        """Up to ``n`` results of ``make()`` not in :attr:`seen` nor drawn already in this call
        (``taken``), making at most :data:`FRESH_TRIES` per result (a small space runs out)."""
        taken = set() if taken is None else taken
        out: list[tuple[Assignment, str]] = []
        for _ in range(n * FRESH_TRIES):
            if len(out) >= n:
                break
            knobs, origin = make()
            if knobs in self.seen or knobs in taken:
                continue
            taken.add(knobs)
            out.append((knobs, origin))
        return out


STRATEGIES: dict[str, type[SearchStrategy]] = {}


def register_strategy(cls: type[SearchStrategy]) -> type[SearchStrategy]:
    """Class decorator: make ``cls`` available to :func:`make_strategy` (and configs) as ``cls.name``."""
    if cls.name in STRATEGIES:
        raise ValueError(f"search strategy {cls.name!r} is registered twice")
    STRATEGIES[cls.name] = cls
    return cls


def make_strategy(
    settings: SearchConfig, space: SearchSpace, storage: StudyStorage | None = None
) -> SearchStrategy:
    """The strategy that ``settings.strategy`` names, for ``space``, keeping a copy of the log in
    ``storage`` if given; ConfigError naming the known strategies, or refusing the storage."""
    cls = STRATEGIES.get(settings.strategy)
    if cls is None:
        raise ConfigError(
            f"search.strategy: unknown strategy {settings.strategy!r}; expected one of "
            + ", ".join(repr(n) for n in sorted(STRATEGIES))
        )
    strategy = cls(space, settings)
    if storage is not None:
        strategy.store_in(storage)
    return strategy
