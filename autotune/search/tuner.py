"""The tuner: Optuna proposes knobs, the cost model ranks them, the executor measures the chosen ones.

:func:`tune` runs a whole search for a :class:`~autotune.config.RunConfig`::

    result = tune(load_config("examples/small.yaml"), report=write_report)
    result.speedup, result.best.trace

One round:

1. ask Optuna for ``search.batch`` candidates (``search.measure_per_round``
   with ``cost_model: none``); apply the space to each (a ScheduleError is an
   ``invalid`` trial) and lower it with the config's pools (a pool overflow or
   ``peak > peak_limit`` is ``infeasible``, with its exact peak, never
   compiled). Both are logged at once: every infeasible one (they do not use
   the trial budget), at most ``measure_per_round`` invalid ones per round (they
   do) so that they cannot use up the budget before anything is measured; the
   other invalid ones are told to Optuna all the same and may be logged when
   proposed again. A candidate whose trace (or, if invalid, whose knobs) is
   already logged is not tried again: Optuna is told the logged result;
2. rank the feasible ones with the cost model, refitted every round on the
   features (:mod:`autotune.search.features`) of every ``ok`` trial so far;
3. measure ``measure_per_round`` of them: the best by prediction, plus an
   ``epsilon`` share at random (seeded per round); all at random while the
   model is not ready;
4. append each result to ``output/trials.jsonl`` as it arrives and tell Optuna
   (see :mod:`autotune.search.candidates` for what Optuna is told).

With ``search.mutation`` above 0, that share of step 1's candidates are not the
sampler's own draws but mutations of the best measured trials (one or two knobs
changed, :meth:`~autotune.search.space.SearchSpace.mutate`), enqueued into the
study so that Optuna learns from them like any other trial. TPE models each knob
on its own and, in a conditional space, rarely revisits a region it sampled
early and judged poor; local moves around the best trials find the neighbours
that it misses (a schedule one knob away from a 320-trial TPE best, 0.84x its
time, was never drawn in those 320 trials; ``results/knob_variants_*.md``).

Before the first round, :func:`~autotune.search.feasibility.check_fits` makes
sure that some schedule of the space fits the pools and ``peak_limit`` (else a
ConfigError with the smallest peak, and no output directory). The search stops
when ``search.trials`` trials that use the budget are logged (``ok``, ``wrong``,
``timeout``, ``crashed``, ``error`` and ``invalid``: every status but
``infeasible``), when :data:`STALE_ROUNDS` rounds in a row find nothing new (a
small space fully explored), or when :data:`IDLE_ROUNDS` rounds in a row measure
nothing. Then :mod:`autotune.search.best` re-measures the top
trials and the default schedule and writes ``best.json``, ``best_ir.txt`` and
``best_kernel.py``. The report layer sits below this one, so ``tune`` calls
the ``report`` it is given (the CLI passes ``autotune.report.write_report``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..config import RunConfig, load_workload
from ..errors import AutotuneError, ScheduleError
from ..schedule import Schedule
from ..workloads import Workload
from . import candidates as cand
from .best import TuneResult, finish, top_trials, warm_start
from .cost_model import CostModel, make_cost_model
from .executors import Executor, make_executor
from .feasibility import check_fits
from .features import FEATURE_NAMES, feature_vector, features
from .log import TrialLog, end_session, log_path_for, start_session, writing_results
from .records import TrialRecord, trace_key
from .space import SearchSpace, load_space
from .stopwatch import Stopwatch

MUTATION_PARENTS = 4
"""``search.mutation`` mutates the best this many ``ok`` trials (MetaSchedule keeps a population of
the best schedules it has measured and mutates them)."""

__all__ = ["LOG_NAME", "TuneResult", "tune"]

LOG_NAME = "trials.jsonl"
STALE_ROUNDS = 3
"""The search stops after this many rounds in a row that log nothing new (a small space fully explored)."""
IDLE_ROUNDS = 10
"""... or after this many rounds in a row that measure nothing (every new candidate infeasible:
infeasible trials do not use the budget, so without this a space whose feasible part the sampler
cannot find would run for ever; :func:`~autotune.search.feasibility.check_fits` has shown that
some schedule fits)."""


@dataclass(frozen=True)
class _Candidate:
    """A feasible, unmeasured candidate of this round."""

    trial: Any  # optuna.Trial
    knobs: tuple[tuple[str, Any], ...]
    trace: str
    key: str
    lowering: cand.Lowering
    row: list[float]


class _Search:
    """The state of one search: the log, the study, the model and the training rows."""

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
    ) -> None:
        """``warm``: knobs to propose first (``search.warm_start``, :func:`best.warm_start`)."""
        from tqdm import tqdm

        warm = warm or []

        self.cfg, self.wl, self.space, self.log, self.model = cfg, wl, space, log, model
        self.executor = executor
        self.study = cand.make_study(cfg.search.sampler, cfg.search.seed)
        self.logged: dict[str, TrialRecord] = {}  # by trace key
        self.invalid: dict[tuple[tuple[str, Any], ...], TrialRecord] = {}  # by knobs
        self.settled = 0  # invalid and infeasible trials logged this round
        self.rows: list[list[float]] = []
        self.times: list[float] = []
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
        cand.add_logged(self.study, space, log.records)
        for knobs in () if log.records else warm:  # a resumed run has proposed them already
            self.study.enqueue_trial(knobs, skip_if_exists=True)
        self.clock = Stopwatch()  # where the search loop's time goes (TuneResult.driver)

    # ---- bookkeeping -------------------------------------------------------
    @property
    def measured(self) -> int:
        """Trials that use the budget: every logged status but ``infeasible``."""
        return sum(n for status, n in self.counts.items() if status != "infeasible")

    @property
    def remaining(self) -> int:
        return self.cfg.search.trials - self.measured

    def _row(self, lowering: cand.Lowering) -> list[float]:
        assert lowering.lowered is not None
        values = features(lowering.lowered.func, lowering.lowered.plan, original=self.wl.func)
        return feature_vector(values)

    def _remember(self, record: TrialRecord, row: list[float] | None) -> None:
        """Count a logged record, and keep its features when it is ``ok`` (recomputed on resume)."""
        if record.status == "invalid":
            self.invalid.setdefault(record.knobs, record)
        else:
            self.logged.setdefault(record.key, record)
        self.counts[record.status] += 1
        if record.ok and record.median_ms is not None:
            if row is None:
                row = self._replay_row(record.trace)
            if row is not None:
                self.rows.append(row)
                self.times.append(record.median_ms)
        best = min(self.times, default=None)
        failed = sum(n for s, n in self.counts.items() if s not in ("ok", "infeasible", "invalid"))
        self.bar.set_postfix_str(
            f"best {'-' if best is None else f'{best:.4g} ms'}, ok {self.counts['ok']}, "
            f"infeasible {self.counts['infeasible']}, invalid {self.counts['invalid']}, failed {failed}",
            refresh=False,
        )
        if record.status != "infeasible":
            self.bar.update(1)

    def _replay_row(self, trace: str) -> list[float] | None:
        try:
            sch = Schedule.replay(self.wl.func, trace)
        except ScheduleError:
            return None  # the workload changed since the log was written
        mem = self.cfg.memory
        lowering = cand.lower_candidate(sch.func, mem.pools, mem.planner, self.cfg.search.seed, None)
        return self._row(lowering) if lowering.lowered is not None else None

    def _append(self, record: TrialRecord, row: list[float] | None = None) -> None:
        with self.clock("log"):
            self.log.append(record)
            self._remember(record, row)

    def _number(self) -> int:
        self.next_trial += 1
        return self.next_trial - 1

    # ---- one round ---------------------------------------------------------
    def run_round(self) -> tuple[int, int]:
        """Propose, filter, rank and measure one batch; return how many trials it logged, and how
        many of them use the budget."""
        before, measured = len(self.log.records), self.measured
        if self.model.ranks:
            with self.clock("model"):
                self.model.fit(_matrix(self.rows), np.asarray(self.times, dtype=float))
        batch = self.cfg.search.batch if self.model.ranks else self.cfg.search.measure_per_round
        feasible: list[_Candidate] = []
        self.settled = 0
        twins: dict[str, list[Any]] = {}  # trace key -> later trials of this round with that key
        for knobs in self._mutants(round(self.cfg.search.mutation * batch)):
            self.study.enqueue_trial(knobs, skip_if_exists=True)  # asked first, before the sampler's
        for _ in range(batch):
            if self.remaining <= 0 or (not self.model.ranks and len(feasible) >= self.remaining):
                break
            c = self._propose(twins)
            if c is not None:
                feasible.append(c)
        self._measure(feasible, twins)
        self.round += 1
        return len(self.log.records) - before, self.measured - measured

    def _mutants(self, n: int) -> list[dict[str, Any]]:
        """``n`` mutations (one or two knobs each, :meth:`SearchSpace.mutate`) of the best ``ok``
        trials so far, parents in turn from the fastest; only their active knobs (what a sampler
        would be asked). None before the first ``ok`` trial."""
        parents = [dict(r.knobs) for r in top_trials(self.log.records, MUTATION_PARENTS)] if n > 0 else []
        rng = np.random.default_rng([self.cfg.search.seed, self.round, 1])
        return [
            self.space.active_values(
                self.space.mutate(parents[i % len(parents)], rng, changes=1 + int(rng.integers(2)))
            )
            for i in range(n if parents else 0)
        ]

    def _propose(self, twins: dict[str, list[Any]]) -> _Candidate | None:
        """Ask one candidate; settle it at once if invalid or infeasible; None unless it is to be ranked."""
        trial = self.study.ask()
        chosen = dict(self.space.fixed)
        for k in self.space.search_order():  # an inactive knob is not sampled: it keeps its default
            chosen[k.name] = (
                trial.suggest_categorical(k.name, k.choices) if k.active(chosen) else k.choices[0]
            )
        knobs = tuple((k.name, chosen[k.name]) for k in self.space.knobs)
        if knobs in self.invalid:  # these knobs gave no schedule before
            cand.tell(self.study, trial, self.invalid[knobs])
            return None
        try:
            with self.clock("lowering"):
                sch = self.space.apply(self.wl.func, dict(knobs))
        except ScheduleError as exc:
            reason = str(exc)
            self._settle([trial], 1.0, lambda n: TrialRecord(n, self.round, knobs, "invalid", reason=reason))
            return None
        trace = sch.trace_json()
        key = trace_key(trace)
        if key in self.logged:  # measured before (this run or the resumed one): nothing to measure
            cand.tell(self.study, trial, self.logged[key])
            return None
        if key in twins:
            twins[key].append(trial)
            return None
        twins[key] = []
        mem = self.cfg.memory
        with self.clock("lowering"):
            low = cand.lower_candidate(sch.func, mem.pools, mem.planner, self.cfg.search.seed, mem.peak_limit)
        if low.lowered is None:
            self._settle(
                [trial, *twins.pop(key)], low.excess,
                lambda n: TrialRecord(
                    n, self.round, knobs, "infeasible", reason=low.reason, peak_bytes=low.peak,
                    pool_bytes=low.pool_bytes, trace=trace,
                ),
            )  # fmt: skip
            return None
        with self.clock("features"):
            row = self._row(low)
        return _Candidate(trial, knobs, trace, key, low, row)

    def _settle(self, trials: list[Any], excess: float, make: Callable[[int], TrialRecord]) -> None:
        """Log an invalid or infeasible candidate and tell Optuna. Infeasible ones do not use the
        budget and are all logged; past the round's share of ``measure_per_round`` invalid ones,
        tell Optuna only (it may be logged in a later round)."""
        record = make(self.next_trial)
        if record.status == "infeasible" or (
            self.settled < self.cfg.search.measure_per_round and self.remaining > 0
        ):
            self.settled += record.status != "infeasible"
            self._number()  # the number the record took
            self._append(record)
            for t in trials:
                cand.tell(self.study, t, record, excess)
        else:
            for t in trials:
                cand.tell_failure(self.study, t, excess)

    def _tell_all(self, trial: Any, twins: list[Any], record: TrialRecord, excess: float | None) -> None:
        for t in (trial, *twins):
            cand.tell(self.study, t, record, excess)

    def _measure(self, feasible: list[_Candidate], twins: dict[str, list[Any]]) -> None:
        """Choose, measure, log and tell; the candidates not chosen are told FAIL."""
        s = self.cfg.search
        n = min(s.measure_per_round, self.remaining, len(feasible))
        with self.clock("model"):
            predicted = self.model.predict(_matrix([c.row for c in feasible]))
        rng = np.random.default_rng([s.seed, self.round])
        chosen = [feasible[i] for i in cand.choose(predicted, n, s.epsilon, rng)]
        guess = {c.key: float(p) for c, p in zip(feasible, predicted) if np.isfinite(p)}
        numbers = [self._number() for _ in chosen]
        tasks = [cand.make_task(self.cfg, c.trace) for c in chosen]
        for index, result, node in self.clock.iterate(self.executor.run(tasks)):
            c = chosen[index]
            record = TrialRecord.from_measure(
                numbers[index], self.round, c.knobs, result, peak_bytes=c.lowering.peak,
                pool_bytes=c.lowering.pool_bytes, predicted_ms=guess.get(c.key), node=node, trace=c.trace,
            )  # fmt: skip
            self._append(record, c.row)
            self._tell_all(c.trial, twins.pop(c.key, []), record, c.lowering.excess)
        measured = {c.key for c in chosen}
        for c in feasible:
            if c.key not in measured:
                for t in (c.trial, *twins.pop(c.key, [])):
                    cand.tell_unmeasured(self.study, t)

    def close(self) -> None:
        self.bar.close()


def _matrix(rows: list[list[float]]) -> np.ndarray:
    return np.asarray(rows, dtype=float).reshape(len(rows), len(FEATURE_NAMES))


def tune(
    cfg: RunConfig,
    resume: bool = False,
    progress: bool = True,
    *,
    executor: str | Executor = "ray",
    report: Callable[[Path], object] | None = None,
    stop: Callable[[], bool] | None = None,
    verbose: bool = False,
) -> TuneResult:
    """Search ``cfg``'s space, re-measure the best trials against the default schedule, write the outputs.

    ``executor`` is a registered name (``"ray"`` uses ``cfg.ray``; ``"local"``
    runs ``cfg.ray.workers`` processes) or an executor the caller owns.
    ``report(output)`` runs last. When ``stop()`` turns true the search raises KeyboardInterrupt
    before its next round (the CLI's first Ctrl-C). ``verbose`` shows Ray's own messages.
    ``result.driver`` says where the search
    loop's wall time went: waiting on the executor, or the driver's own parts
    (:class:`~autotune.search.stopwatch.DriverTime`). Raises AutotuneError if
    ``output`` already holds a log and ``resume`` is False, or if no trial is
    ``ok``; ConfigError if ``peak_limit`` is below every schedule of the space.
    """
    output = Path(cfg.output)
    wl = load_workload(cfg.workload)
    space = load_space(cfg.search.space, wl, cfg.memory.pools)
    mem = cfg.memory
    # some schedule must fit: infeasible trials do not use the budget, so none fitting would never end
    check_fits(space, wl, mem.pools, mem.planner, cfg.search.seed, mem.peak_limit)
    warm = [] if cfg.search.warm_start is None else warm_start(cfg.search.warm_start, space)
    model = make_cost_model(cfg.search.cost_model, cfg.search.seed)
    # the output directory is made once the checks pass, and before a cluster is started: an unusable
    # one is refused at once (a run that fails before its first trial removes what it made)
    log_path = log_path_for(output, resume)
    owned = isinstance(executor, str)
    if isinstance(executor, str):
        kwargs: dict[str, Any] = {"workers": cfg.ray.workers}
        if executor == "ray":
            kwargs.update(address=cfg.ray.address, verbose=verbose)
        executor = make_executor(executor, **kwargs)  # an unreachable cluster: refused here
    try:
        with TrialLog(log_path) as log:
            start_session(log, cfg)  # machine, versions, config fingerprint; refuses a changed config
            search = _Search(cfg, wl, space, log, model, executor, progress, warm)
            try:
                stale = idle = 0
                while search.remaining > 0 and stale < STALE_ROUNDS and idle < IDLE_ROUNDS:
                    if stop is not None and stop():  # every trial of the rounds so far is logged
                        raise KeyboardInterrupt
                    with search.clock("optuna"):  # the parts inside are charged to themselves
                        logged, measured = search.run_round()
                    stale = 0 if logged else stale + 1
                    idle = 0 if measured else idle + 1
            finally:
                search.close()
            driver = search.clock.snapshot()
            with writing_results(output):  # best.json, best_ir.txt, best_kernel.py
                result = dataclasses.replace(finish(cfg, wl, list(log.records), executor), driver=driver)
                end_session(log)
    except AutotuneError:
        if report is not None and (output / LOG_NAME).exists():
            # the table of what failed is still worth having, but not in place of the reason
            with contextlib.suppress(OSError, AutotuneError):
                report(output)
        raise
    finally:
        if owned:
            executor.close()
    if report is not None:
        with writing_results(output):
            report(output)
    return result
