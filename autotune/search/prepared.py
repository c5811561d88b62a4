"""What a search knows of the candidates it has applied and lowered, each once per schedule.

A proposal's knobs are applied to the workload (its schedule and trace, keyed by the trace:
:func:`~autotune.search.records.trace_key`), and the schedule is lowered against the run's pools
(:func:`~autotune.search.candidates.lower_candidate`). :class:`Prepared` keeps, until the search
logs the schedule (:meth:`Prepared.forget`):

- the trace key of every knobs it applied: knobs proposed again are not applied again to be keyed;
- a :class:`Fit` for a schedule that fits the memory: its trace, peaks, relative excess and
  feature row, so that a candidate scored by the cost model (the strategy's scorer) and then
  proposed, or ranked out and proposed in a later round, is neither lowered nor featurised again;
- an :class:`Over` for one over the memory: its trace and lowering (exact peaks, the reason), which
  the search logs as ``infeasible`` without lowering it again.

The lowered function itself is not kept: the worker that measures a candidate lowers its trace.
Time is charged to the search's stopwatch parts ``apply``, ``lowering`` (a schedule that fits),
``infeasible`` (one over the memory) and ``features``.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..config import RunConfig
from ..lowering import Lowered
from ..schedule import Schedule
from ..workloads import Workload
from . import candidates as cand
from .candidates import Assignment
from .cost_model_train import RunSetup, lower_trial, trial_features
from .features import feature_vector
from .records import trace_key
from .space import SearchSpace
from .stopwatch import Stopwatch

__all__ = ["Fit", "Over", "Prepared"]


@dataclass(frozen=True)
class Fit:
    """A schedule that fits the memory: its trace, its peaks, its relative excess (<= 0) and its
    feature row."""

    trace: str
    peak: int
    pool_bytes: tuple[tuple[str, int], ...]
    excess: float
    row: list[float]


@dataclass(frozen=True)
class Over:
    """A schedule over the memory: its trace and its lowering (exact peaks, excess and reason)."""

    trace: str
    lowering: cand.Lowering


class Prepared:
    """Knobs to trace keys, and trace keys to :class:`Fit` or :class:`Over`, for one search."""

    def __init__(self, cfg: RunConfig, wl: Workload, space: SearchSpace, clock: Stopwatch) -> None:
        self.cfg, self.wl, self.space, self.clock = cfg, wl, space, clock
        mem = cfg.memory
        # as the cost model's offline training lowers and featurises a log's trials
        self.setup = RunSetup(wl, wl.name, tuple(mem.pools), mem.planner, cfg.search.seed, space.target)
        self.keys: dict[Assignment, str] = {}  # knobs applied -> their trace key
        self.fits: dict[str, Fit] = {}  # by trace key: lowered within the memory, not logged yet
        self.unfit: dict[str, Over] = {}  # by trace key: lowered over the memory, not logged yet

    def key(self, knobs: Assignment) -> tuple[str, Schedule | None, str | None]:
        """``knobs``' trace key, with their schedule and its trace when applied now (None for both
        when an earlier call keyed them). Raises ScheduleError for knobs that give no schedule."""
        key = self.keys.get(knobs)
        if key is not None:
            return key, None, None
        sch, trace = self._apply(knobs)
        self.keys[knobs] = key = trace_key(trace)
        return key, sch, trace

    def prepare(self, knobs: Assignment, key: str, sch: Schedule | None, trace: str | None) -> Fit | Over:
        """The figures of ``knobs``' schedule (``key``, ``sch`` and ``trace`` from :meth:`key`):
        kept ones, or those of lowering it now (applied again when :meth:`key` had keyed it before)."""
        kept = self.fits.get(key) or self.unfit.get(key)
        if kept is not None:
            return kept
        if sch is None or trace is None:
            sch, trace = self._apply(knobs)
        mem = self.cfg.memory
        with self.clock("lowering") as span:
            low = cand.lower_candidate(sch.func, mem.pools, mem.planner, self.cfg.search.seed, mem.peak_limit)
            if low.lowered is None:
                span.part = "infeasible"
        if low.lowered is None:
            over = self.unfit[key] = Over(trace, low)
            return over
        with self.clock("features"):
            fit = self.fits[key] = Fit(trace, low.peak, low.pool_bytes, low.excess, self._row(low.lowered))
        return fit

    def forget(self, key: str) -> None:
        """Drop the figures of a schedule the search has logged."""
        self.fits.pop(key, None)
        self.unfit.pop(key, None)

    def replay_row(self, trace: str) -> list[float] | None:
        """The feature row of a logged trace (a resumed run's timed trials), lowered in the run's pools
        without its peak limit; None when the trace no longer applies to the workload or overflows
        the pools (:func:`~autotune.search.cost_model_train.lower_trial`)."""
        lowered = lower_trial(self.setup, trace)
        return None if lowered is None else self._row(lowered)

    def _row(self, lowered: Lowered) -> list[float]:
        return feature_vector(trial_features(self.setup, lowered))

    def _apply(self, knobs: Assignment) -> tuple[Schedule, str]:
        with self.clock("apply"):
            sch = self.space.apply(self.wl.func, dict(knobs))
            return sch, sch.trace_json()
