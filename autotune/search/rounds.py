"""One search, round by round: what :func:`~autotune.search.tuner.tune` runs between setting a run
up and finishing it.

:class:`Search` holds the state of a search (the log, the strategy, the cost model and its
training rows) and :meth:`Search.run_round` runs one round:

1. ask the strategy (``search.strategy``, :mod:`autotune.search.strategies`: Optuna's TPE or
   NSGA-II, evolutionary, random) for ``search.batch`` proposals; apply the space to each (a
   ScheduleError is an ``invalid`` trial) and lower it with the config's pools (a pool overflow or
   ``peak > peak_limit`` is ``infeasible``, with its exact peak, never compiled), with a cost model
   or without (``cost_model: none``: in a space where most draws are over the memory, a round of
   only ``measure_per_round`` proposals would often measure nothing, and
   :data:`~autotune.search.tuner.IDLE_ROUNDS` such rounds end the search). Both are logged at
   once: every infeasible one (they do not use the trial budget), at most ``measure_per_round``
   invalid ones per round (they do) so that they cannot use up the budget before anything is measured; the
   other invalid ones are told to the strategy all the same and may be logged when proposed
   again. A proposal whose trace (or, if invalid, whose knobs) is already logged is not tried
   again: the strategy is told the logged result;
2. rank the feasible ones with the cost model, refitted every round on the
   features (:mod:`autotune.search.features`) of every timed (``ok`` or ``cutoff``) trial so far;
3. measure ``measure_per_round`` of them: the best by prediction, one per feature row and none
   with the row of a timed trial (:func:`~autotune.search.candidates.choose`: the model cannot
   tell those apart), plus an ``epsilon`` share at random (seeded per round) among the proposals
   the strategy drew at random (origin ``random``; the others when too few are left): the
   strategy's other proposals are what the model ranks best, and a random share drawn from them
   would explore only where the model already looks (:data:`EPSILON_FROM_DRAWS`); all at random
   while the model is not ready. Each measured trial's record says which (``picked``:
   :func:`~autotune.search.candidates.choose`);
4. append each result to ``output/trials.jsonl`` as it arrives (and hand it to the strategy's
   :meth:`~autotune.search.strategies.SearchStrategy.logged`); at the end of the round the
   strategy learns the outcome of every proposal (:class:`~autotune.search.strategies.Outcome`:
   its trial, or none when it was ranked out or past the budget).

A resumed run's strategy first learns every trial of the log, so each strategy continues where
the killed run stopped.

Early stop: once a trial is ``ok``, each measurement gets ``cutoff_ms`` = :data:`CUTOFF_FACTOR`
times the best median so far, but at least :data:`CUTOFF_FLOOR_MS`
(:class:`~autotune.measure.task.MeasureTask`): a candidate whose first
:data:`~autotune.measure.timing.CUTOFF_RUNS` timed runs are all slower (or whose checking run
alone is seconds long and at least twice it) stops there and is logged ``cutoff`` with those runs'
times (it uses the budget, is never the best, and its time still trains the cost model and the
strategy).

Knobs applied once keep their trace key, and a candidate lowered (by the strategy's scorer or by a
round) keeps its figures by that key until it is logged (:class:`~autotune.search.prepared.Prepared`):
the same knobs proposed again are neither applied nor lowered again.

The round's time is charged to the stopwatch's parts (:data:`~autotune.search.stopwatch.PARTS`):
``propose`` and ``learn`` (the strategy), ``apply`` (the knobs to a schedule and its trace),
``lowering`` (candidates that fit) and ``infeasible`` (those over the memory), ``features``,
``model``, ``log`` and ``wait`` (the executor).
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..config import RunConfig
from ..errors import ScheduleError
from ..workloads import Workload
from . import candidates as cand
from .cost_model import CostModel, make_cost_model
from .cost_model_train import cross_validated
from .executors import Executor
from .features import FEATURE_NAMES
from .log import TrialLog
from .prepared import Fit, Over, Prepared
from .records import TrialRecord
from .space import SearchSpace
from .stopwatch import Stopwatch
from .strategies import Assignment, Outcome, Proposal, make_strategy
from .strategies.optuna_storage import StudyStorage

__all__ = ["CUTOFF_FACTOR", "CUTOFF_FLOOR_MS", "EPSILON_FROM_DRAWS", "Search"]

EPSILON_FROM_DRAWS = True
"""The ``epsilon`` share of a round's measurements is drawn from the proposals the strategy drew
at random (:func:`~autotune.search.candidates.choose`'s ``drawn``), as MetaSchedule's epsilon-greedy
pick draws from its random population; False: from every feasible proposal the model did not
pick. Measured against False on a surrogate of the host's timings (the evolutionary strategy's
batch is mostly the model's best bred children, so a random share among them measured the same
region as the model's share): ``experiments/surrogate_search.py``,
``results/surrogate_search_*_draws/``; on the host, five chains: ``experiments/sample_efficiency.py``,
``results/sample_efficiency_rocketlake_draws_*/``."""
CUTOFF_FACTOR = 4.0
"""A candidate whose first timed runs are all over this many times the best median so far is not timed
further (the same kernel timed 0.4 ms and 4-11 ms minutes apart on the shared 2-core host, so a
smaller factor would stop good candidates measured at a busy moment)."""
CUTOFF_FLOOR_MS = 25.0
"""The cutoff is never below this. One timed run is at the mercy of the scheduler: on the shared
2-core host a process descheduled for a time slice made first runs of 12-16 ms out of kernels whose
median is 5 µs, and a cutoff of 4x a microsecond best stopped most candidates (44 of 48 random
trials; ``results/sample_efficiency.md``). Below the floor, timing a candidate in full costs little."""


@dataclass(frozen=True)
class _Candidate:
    """A feasible, unmeasured candidate of this round."""

    proposal: Proposal
    trace: str
    key: str
    fit: Fit

    @property
    def row(self) -> list[float]:
        return self.fit.row

    @property
    def knobs(self) -> tuple[tuple[str, Any], ...]:
        return self.proposal.knobs


class Search:
    """The state of one search: the log, the strategy, the model and the training rows."""

    def __init__(
        self,
        cfg: RunConfig,
        wl: Workload,
        space: SearchSpace,
        log: TrialLog,
        model: CostModel,
        executor: Executor,
        progress: bool,
        warm: list[dict[str, Any]] | None = None,
        storage: StudyStorage | None = None,
        clock: Stopwatch | None = None,
    ) -> None:
        """``warm``: knobs to propose first (``search.warm_start``, :func:`best.warm_start`);
        ``storage``: where the strategy keeps a copy of the log (``search.storage``), made anew
        from the log's trials here; ``clock``: the stopwatch the rounds charge (a new one if None)."""
        from tqdm import tqdm

        self.clock = clock if clock is not None else Stopwatch()  # where the loop's time goes

        self.cfg, self.wl, self.space, self.log, self.model = cfg, wl, space, log, model
        self.executor = executor
        self.strategy = make_strategy(cfg.search, space, storage)
        self.logged: dict[str, TrialRecord] = {}  # by trace key
        self.invalid: dict[tuple[tuple[str, Any], ...], TrialRecord] = {}  # by knobs
        self.settled = 0  # invalid and infeasible trials logged this round
        self.rows: list[list[float]] = []
        # the rows of ``rows`` as a set: the model's picks skip programs it has timed
        self.timed_rows: set[tuple[float, ...]] = set()
        self.times: list[float] = []
        self.row_ok: list[bool] = []  # per row of ``rows``: an ok trial (else a cutoff one)
        self.best_ms: float | None = None  # the best ok median so far (sets the cutoff)
        self.prepared = Prepared(cfg, wl, space, self.clock)  # candidates applied and lowered, by trace key
        self.counts: Counter[str] = Counter()
        self.round = max((r.round for r in log.records), default=-1) + 1
        self.next_trial = max((r.trial for r in log.records), default=-1) + 1
        self.bar = tqdm(
            total=cfg.search.trials,
            disable=not progress,
            desc=cfg.name,
            unit="trial",
            file=sys.stderr,
            leave=True,
        )
        for record in log.records:
            self._remember(record, None)
        self.strategy.learn([Outcome(record) for record in log.records])  # a resumed strategy learns them
        self.strategy.logged(log.records)
        if not log.records:  # a resumed run has proposed them already
            self.strategy.enqueue(warm or [])
        if model.ranks:
            self.strategy.score_with(self.score)

    # ---- bookkeeping -------------------------------------------------------
    @property
    def measured(self) -> int:
        """Trials that use the budget: every logged status but ``infeasible``."""
        return sum(n for status, n in self.counts.items() if status != "infeasible")

    @property
    def remaining(self) -> int:
        return self.cfg.search.trials - self.measured

    def _remember(self, record: TrialRecord, row: list[float] | None) -> None:
        """Count a logged record, and keep its features when it is ``ok`` (recomputed on resume)."""
        if record.status == "invalid":
            self.invalid.setdefault(record.knobs, record)
        else:
            self.logged.setdefault(record.key, record)
            self.prepared.forget(record.key)
        self.counts[record.status] += 1
        if record.status in ("ok", "cutoff") and record.median_ms is not None:  # a cutoff: slow, once
            if record.ok:
                self.best_ms = min(self.best_ms or record.median_ms, record.median_ms)
            if row is None:
                row = self.prepared.replay_row(record.trace)
            if row is not None:
                self.rows.append(row)
                self.timed_rows.add(tuple(row))
                self.times.append(record.median_ms)
                self.row_ok.append(record.ok)
        best = self.best_ms
        failed = sum(n for s, n in self.counts.items() if s not in ("ok", "cutoff", "infeasible", "invalid"))
        self.bar.set_postfix_str(
            f"best {'-' if best is None else f'{best:.4g} ms'}, ok {self.counts['ok']}, "
            f"infeasible {self.counts['infeasible']}, invalid {self.counts['invalid']}, failed {failed}",
            refresh=False,
        )
        if record.status != "infeasible":
            self.bar.update(1)

    def _append(self, record: TrialRecord, row: list[float] | None = None) -> None:
        with self.clock("log"):
            self.log.append(record)
            self.strategy.logged([record])
            self._remember(record, row)

    def _number(self) -> int:
        self.next_trial += 1
        return self.next_trial - 1

    # ---- one round ---------------------------------------------------------
    def run_round(self) -> tuple[int, int]:
        """Propose, filter, rank and measure one batch, and tell the strategy what became of each
        proposal; return how many trials it logged, and how many of them use the budget."""
        before, measured = len(self.log.records), self.measured
        if self.model.ranks:
            with self.clock("model"):
                self.model.fit(_matrix(self.rows), np.asarray(self.times, dtype=float))
        feasible: list[_Candidate] = []
        outcomes: list[Outcome] = []
        self.settled = 0
        twins: dict[str, list[Proposal]] = {}  # trace key -> later proposals of this round with that key
        with self.clock("propose"):
            proposals = self.strategy.propose(self.cfg.search.batch)
        for proposal in proposals:
            if self.remaining <= 0:
                outcomes.append(Outcome(None, proposal))  # past the budget: not a trial
                continue
            c = self._try(proposal, twins, outcomes)
            if c is not None:
                feasible.append(c)
        self._measure(feasible, twins, outcomes)
        with self.clock("learn"):
            self.strategy.learn(outcomes)
        self.round += 1
        return len(self.log.records) - before, self.measured - measured

    def _try(
        self, proposal: Proposal, twins: dict[str, list[Proposal]], outcomes: list[Outcome]
    ) -> _Candidate | None:
        """Apply and lower one proposal; settle it at once if invalid, infeasible or measured
        before (its outcome goes to ``outcomes``); None unless it is to be ranked."""
        knobs = proposal.knobs
        if knobs in self.invalid:  # these knobs gave no schedule before
            outcomes.append(Outcome(self.invalid[knobs], proposal))
            return None
        try:
            key, sch, trace = self.prepared.key(knobs)
        except ScheduleError as exc:
            reason = str(exc)
            make = lambda n: TrialRecord(n, self.round, knobs, "invalid", reason=reason)  # noqa: E731
            self._settle([proposal], 1.0, make, outcomes)
            return None
        if key in self.logged:  # measured before (this run or the resumed one): nothing to measure
            outcomes.append(Outcome(self.logged[key], proposal))
            return None
        if key in twins:
            twins[key].append(proposal)
            return None
        twins[key] = []
        prep = self.prepared.prepare(knobs, key, sch, trace)  # kept figures when scored or ranked out before
        if isinstance(prep, Over):
            low = prep.lowering
            self._settle(
                [proposal, *twins.pop(key)], low.excess,
                lambda n: TrialRecord(
                    n, self.round, knobs, "infeasible", reason=low.reason, peak_bytes=low.peak,
                    pool_bytes=low.pool_bytes, trace=prep.trace,
                ),
                outcomes,
            )  # fmt: skip
            return None
        return _Candidate(proposal, prep.trace, key, prep)

    def score(self, assignments: Sequence[Assignment]) -> np.ndarray:
        """The cost model's prediction for each assignment (the strategy's
        :data:`~autotune.search.strategies.Scorer`): applied and lowered as :meth:`_try` would, and
        kept by trace key, so that a proposal scored here is not lowered again; ``inf`` for one that
        gives no schedule, is over the memory, or has the schedule of a logged trial."""
        out = np.full(len(assignments), np.inf)
        rows: list[list[float]] = []
        at: list[int] = []
        for i, knobs in enumerate(assignments):
            row = self._scored_row(knobs)
            if row is not None:
                rows.append(row)
                at.append(i)
        if rows:
            with self.clock("model"):
                out[at] = self.model.predict(_matrix(rows))
        return out

    def _scored_row(self, knobs: Assignment) -> list[float] | None:
        """The feature row of ``knobs``' schedule when it fits the memory and has no trial yet."""
        if knobs in self.invalid:
            return None
        try:
            key, sch, trace = self.prepared.key(knobs)
        except ScheduleError:
            return None
        if key in self.logged:
            return None
        prep = self.prepared.prepare(knobs, key, sch, trace)
        return prep.row if isinstance(prep, Fit) else None

    def _settle(
        self,
        proposals: list[Proposal],
        excess: float,
        make: Callable[[int], TrialRecord],
        outcomes: list[Outcome],
    ) -> None:
        """Log an invalid or infeasible candidate. Infeasible ones do not use the budget and are
        all logged; past the round's share of ``measure_per_round`` invalid ones, the strategy is
        told the record all the same but it is not logged (it may be in a later round)."""
        record = make(self.next_trial)
        if record.status == "infeasible" or (
            self.settled < self.cfg.search.measure_per_round and self.remaining > 0
        ):
            self.settled += record.status != "infeasible"
            self._number()  # the number the record took
            self._append(record)
        outcomes.extend(Outcome(record, p, excess) for p in proposals)

    def _measure(
        self, feasible: list[_Candidate], twins: dict[str, list[Proposal]], outcomes: list[Outcome]
    ) -> None:
        """Choose, measure and log; every feasible proposal's outcome goes to ``outcomes`` (None
        for those not chosen)."""
        s = self.cfg.search
        n = min(s.measure_per_round, self.remaining, len(feasible))
        with self.clock("model"):
            predicted = self.model.predict(_matrix([c.row for c in feasible]))
        rng = np.random.default_rng([s.seed, self.round])
        rows = [tuple(c.row) for c in feasible]
        drawn = [c.proposal.origin == "random" for c in feasible] if EPSILON_FROM_DRAWS else None
        picks = cand.choose(predicted, n, s.epsilon, rng, rows, self.timed_rows, drawn)
        chosen = [feasible[i] for i, _ in picks]
        ms = self.model.predicts_ms  # else the predictions are an order only: not recorded
        guess = {c.key: float(p) for c, p in zip(feasible, predicted) if ms and np.isfinite(p)}
        numbers = [self._number() for _ in chosen]
        cutoff = None if self.best_ms is None else max(CUTOFF_FACTOR * self.best_ms, CUTOFF_FLOOR_MS)
        tasks = [cand.make_task(self.cfg, c.trace, cutoff_ms=cutoff) for c in chosen]
        for index, result, node in self.clock.iterate(self.executor.run(tasks)):
            c = chosen[index]
            record = TrialRecord.from_measure(
                numbers[index], self.round, c.knobs, result, peak_bytes=c.fit.peak,
                pool_bytes=c.fit.pool_bytes, predicted_ms=guess.get(c.key), node=node, trace=c.trace,
                picked=picks[index][1],
            )  # fmt: skip
            self._append(record, c.row)
            outcomes.extend(Outcome(record, p, c.fit.excess) for p in (c.proposal, *twins.pop(c.key, [])))
        measured = {c.key for c in chosen}
        for c in feasible:
            if c.key not in measured:
                outcomes.extend(Outcome(None, p) for p in (c.proposal, *twins.pop(c.key, [])))

    def cross_validated(self) -> dict[str, float] | None:
        """The run's kind of model (``search.cost_model``, from its ``pretrained`` file if any),
        scored out of fold on this search's timed trials
        (:func:`~autotune.search.cost_model_train.cross_validated`, seeded with ``search.seed``);
        None for a model that does not rank."""
        if not self.model.ranks:
            return None
        s = self.cfg.search
        y = np.asarray(self.times, dtype=float)
        return cross_validated(
            lambda: make_cost_model(s.cost_model, s.seed, s.pretrained), _matrix(self.rows), y,
            np.asarray(self.row_ok), seed=s.seed,
        )  # fmt: skip

    def close(self) -> None:
        self.bar.close()


def _matrix(rows: list[list[float]]) -> np.ndarray:
    return np.asarray(rows, dtype=float).reshape(len(rows), len(FEATURE_NAMES))
