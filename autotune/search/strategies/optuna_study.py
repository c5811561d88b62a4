"""Optuna as a search strategy: TPE, NSGA-II (latency and peak memory) or Optuna's random sampler.

``search.strategy: optuna`` (the default) with ``search.sampler: tpe | nsga2 | random``.
:meth:`OptunaSearch.propose` asks the study for trials and samples every active knob
(an inactive one is not asked and keeps its default); :meth:`OptunaSearch.learn` tells each
asked trial its outcome, and adds the trials of a resumed log to the study as finished trials.

What Optuna is told
-------------------

Every trial of the log is a ``COMPLETE`` Optuna trial with a value and one constraint
(``trial.user_attrs["constraint"]``, read by the sampler's ``constraints_func``; <= 0 is feasible):

- ``ok``: value = median ms, constraint = ``(peak - peak_limit) / peak_limit`` (0 without a limit);
- ``cutoff`` (a slow candidate timed only its first runs): value = their median ms, constraint as ``ok``;
- ``infeasible``: value = :data:`PENALTY_MS`, constraint = the relative excess over
  ``peak_limit`` or over the fullest pool (> 0);
- ``invalid``, ``wrong``, ``crashed``, ``timeout``, ``error``: value = :data:`PENALTY_MS`,
  constraint = 1.

So TPE and NSGA-II rank every failure below every feasible trial and learn to avoid its region
(a ``FAIL`` state would be ignored by TPE, which would then propose the same failing knobs
again). With ``nsga2`` the study has two objectives, the median latency and the peak workspace
(:data:`PENALTY_BYTES` for a trial without a peak), so the sampler keeps a Pareto front of
latency against memory. A proposal that is not measured (ranked out by the cost model, or past
the trial budget) is not a trial of the log; it is told ``FAIL``, which the samplers ignore.

With ``search.mutation`` above 0, that share of each call's trials are not the sampler's own
draws but one- or two-decision mutations of the best measured trials
(:func:`autotune.search.mutators.mutate`),
enqueued into the study so that Optuna learns from them like any other trial. TPE models each
knob on its own and, in a conditional space, rarely revisits a region it sampled early and
judged poor; local moves around the best trials find the neighbours that it misses (a schedule
one knob away from a 320-trial TPE best, 0.84x its time, was never drawn in those 320 trials;
``results/knob_variants_*.md``).

What ``search.storage`` is told
-------------------------------

With ``search.storage`` (:mod:`.optuna_storage`) the strategy also keeps a copy of the log, one
Optuna trial per logged trial (:func:`stored_trial`), in a study that optuna-dashboard opens:

- ``ok``: ``COMPLETE`` with its median ms as the value (``nsga2``: and its peak bytes);
- ``cutoff``: ``PRUNED`` (stopped after its first slow timed runs, whose median ms is its intermediate value at step 0);
- ``infeasible``: ``PRUNED`` (over ``peak_limit`` or a pool: never compiled);
- ``invalid``, ``wrong``, ``timeout``, ``crashed``, ``error``: ``FAIL``.

Its parameters are the knobs the trial sampled (the active ones) and its user attrs the
record's figures (:data:`STORED_ATTRS`: status, peak bytes, min and IQR, re-timed, reason...).
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ...config import SearchConfig
from ...errors import ConfigError
from ..best import top_trials
from ..mutators import mutate
from ..records import TrialRecord
from ..space import SearchSpace
from .base import Assignment, Outcome, Proposal, SearchStrategy, complete, register_strategy
from .optuna_storage import StoredStudy, StudyStorage

if TYPE_CHECKING:
    import optuna

__all__ = [
    "MUTATION_PARENTS", "PENALTY_BYTES", "PENALTY_MS", "STORED_ATTRS", "OptunaSearch", "make_study", "stored_trial",
]  # fmt: skip

PENALTY_MS = 1e6
"""The latency told to Optuna for a trial without one (it is also infeasible)."""
PENALTY_BYTES = float(1 << 40)
"""The peak told to NSGA-II for a trial without one (an invalid one)."""
MUTATION_PARENTS = 4
"""``search.mutation`` mutates the best this many ``ok`` trials (MetaSchedule keeps a population of
the best schedules it has measured and mutates them)."""
STORED_ATTRS = (
    "trial", "round", "status", "reason", "median_ms", "min_ms", "iqr_ms", "retimed", "peak_bytes", "pool_bytes",
    "predicted_ms", "compile_s", "node",
)  # fmt: skip
"""The record's fields a stored trial carries as user attrs, those that are set (not None, empty or False)."""


def constraint_of(record: TrialRecord, excess: float | None = None) -> float:
    """The constraint told to Optuna for ``record`` (see the module docstring)."""
    if record.status == "infeasible":
        return max(excess if excess is not None else 1.0, 1e-9)
    if _timed(record):
        return min(excess if excess is not None else 0.0, 0.0)
    return 1.0


def _timed(record: TrialRecord) -> bool:
    """``ok``, or ``cutoff`` (a feasible candidate stopped after its first slow runs): it has a latency."""
    return record.status in ("ok", "cutoff") and record.median_ms is not None


def values_of(record: TrialRecord, objectives: int) -> list[float]:
    """The objective values told for ``record``: latency, and peak bytes for a two-objective study."""
    ms = float(record.median_ms) if _timed(record) and record.median_ms is not None else PENALTY_MS
    if objectives == 1:
        return [ms]
    return [ms, float(record.peak_bytes) if record.peak_bytes is not None else PENALTY_BYTES]


def _constraints(trial: optuna.trial.FrozenTrial) -> tuple[float]:
    return (float(trial.user_attrs.get("constraint", 1.0)),)


def make_study(sampler: str, seed: int) -> optuna.Study:
    """A minimising study with the sampler named in the config ("tpe", "nsga2", "random"), seeded;
    ``nsga2`` minimises latency and peak workspace together."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    with warnings.catch_warnings():
        # Optuna 5 deprecates constraints_func for Trial.set_constraint; this code also runs on Optuna 4
        warnings.simplefilter("ignore", FutureWarning)
        if sampler == "tpe":
            chosen: optuna.samplers.BaseSampler = optuna.samplers.TPESampler(
                seed=seed, constraints_func=_constraints
            )
        elif sampler == "nsga2":
            chosen = optuna.samplers.NSGAIISampler(seed=seed, constraints_func=_constraints)
            return optuna.create_study(directions=["minimize", "minimize"], sampler=chosen)
        elif sampler == "random":
            chosen = optuna.samplers.RandomSampler(seed=seed)
        else:
            raise ConfigError(
                f"search.sampler: unknown sampler {sampler!r}; expected one of tpe, nsga2, random"
            )
    return optuna.create_study(direction="minimize", sampler=chosen)


def stored_trial(
    record: TrialRecord, objectives: int, params: dict[str, Any], dists: dict[str, Any]
) -> optuna.trial.FrozenTrial:
    """The trial that ``search.storage``'s study holds for a logged ``record`` (see the module
    docstring), with the knobs it sampled as ``params`` over their distributions ``dists``."""
    import optuna

    state = optuna.trial.TrialState
    attrs = {
        name: dict(value) if name == "pool_bytes" else value
        for name in STORED_ATTRS
        if (value := getattr(record, name)) is not None and value is not False and value not in ("", ())
    }
    common: dict[str, Any] = {"params": params, "distributions": dists, "user_attrs": attrs}
    if record.status == "ok":
        return optuna.trial.create_trial(state=state.COMPLETE, values=values_of(record, objectives), **common)
    steps = {0: record.median_ms} if record.status == "cutoff" and record.median_ms is not None else None
    pruned = record.status in ("cutoff", "infeasible")
    return optuna.trial.create_trial(
        state=state.PRUNED if pruned else state.FAIL, intermediate_values=steps, **common
    )


def distributions(space: SearchSpace) -> dict[str, Any]:
    """One categorical distribution per knob."""
    from optuna.distributions import CategoricalDistribution

    return {k.name: CategoricalDistribution(tuple(k.choices)) for k in space.knobs}


@register_strategy
class OptunaSearch(SearchStrategy):
    """An Optuna study asked and told through the strategy interface (see the module docstring)."""

    name = "optuna"

    def __init__(self, space: SearchSpace, settings: SearchConfig) -> None:
        super().__init__(space, settings)
        self.study = make_study(settings.sampler, settings.seed)
        self.objectives = len(self.study.directions)
        self.pending: dict[int, Any] = {}  # ticket -> asked optuna.Trial
        self.records: list[TrialRecord] = []  # every trial learned, for the mutation parents
        self._dists = distributions(space)
        self.stored: StoredStudy | None = None  # search.storage's copy of the log

    def store_in(self, storage: StudyStorage) -> None:
        """Make the study of ``storage`` anew, with the sampler study's directions; :meth:`logged`
        fills it."""
        names = ["median_ms", "peak_bytes"][: self.objectives]
        self.stored = StoredStudy(storage, self.study.directions, names)

    def logged(self, records: Sequence[TrialRecord]) -> None:
        if self.stored is not None:
            trials = [stored_trial(r, self.objectives, *(self._sampled(r) or ({}, {}))) for r in records]
            self.stored.add(trials)

    def enqueue(self, assignments: Iterable[Mapping[str, Any]]) -> None:
        for values in assignments:  # only the active knobs: what the sampler would be asked
            self.study.enqueue_trial(self.space.active_values(dict(complete(self.space, values))),
                                     skip_if_exists=True)  # fmt: skip

    def propose(self, n: int) -> list[Proposal]:
        rng = np.random.default_rng([self.seed, self.calls, 1])
        self.calls += 1
        self.enqueue(self._mutants(round(self.settings.mutation * n), rng))  # asked first
        out = []
        for _ in range(n):
            trial = self.study.ask()
            chosen = dict(self.space.fixed)
            for k in self.space.search_order():  # an inactive knob is not sampled: it keeps its default
                chosen[k.name] = (
                    trial.suggest_categorical(k.name, k.choices) if k.active(chosen) else k.choices[0]
                )
            proposal = self._ticket(tuple((k.name, chosen[k.name]) for k in self.space.knobs), "sampler")
            self.pending[proposal.ticket] = trial
            out.append(proposal)
        return out

    def _draw(self, n: int, rng: np.random.Generator) -> list[tuple[Assignment, str]]:
        raise NotImplementedError  # propose asks the study directly

    def _mutants(self, n: int, rng: np.random.Generator) -> list[dict[str, Any]]:
        """``n`` mutations (one or two decisions each, :func:`autotune.search.mutators.mutate`)
        of the best ``ok`` trials so far, parents in turn from the fastest; none before the first
        ``ok`` trial."""
        parents = [dict(r.knobs) for r in top_trials(self.records, MUTATION_PARENTS)] if n > 0 else []
        return [
            dict(mutate(self.space, parents[i % len(parents)], rng, changes=1 + int(rng.integers(2))))
            for i in range(n if parents else 0)
        ]

    def _learn(self, outcomes: Sequence[Outcome]) -> None:
        import optuna

        for o in outcomes:
            if o.record is not None:
                self.records.append(o.record)
            if o.proposal is None:
                if o.record is not None:
                    self._add_logged(o.record)
                continue
            trial = self.pending.pop(o.proposal.ticket)
            if o.record is None:
                self.study.tell(trial, state=optuna.trial.TrialState.FAIL)
                continue
            trial.set_user_attr("constraint", constraint_of(o.record, o.excess))
            told = values_of(o.record, self.objectives)
            self.study.tell(trial, told[0] if self.objectives == 1 else told)

    def _sampled(self, record: TrialRecord) -> tuple[dict[str, Any], dict[str, Any]] | None:
        """The knobs ``record``'s trial sampled (the active ones) and their distributions; None if
        its knobs are not an assignment of the space."""
        knobs = self._knobs_of(Outcome(record))
        if knobs is None:
            return None
        values = {**dict(self.space.fixed), **dict(knobs)}
        active = [k.name for k in self.space.knobs if k.active(values)]
        return {name: values[name] for name in active}, {name: self._dists[name] for name in active}

    def _add_logged(self, record: TrialRecord) -> None:
        """A trial of a resumed log, as a finished trial of the study (none if the space changed)."""
        import optuna

        sampled = self._sampled(record)
        if sampled is None:
            return
        params, dists = sampled
        c = constraint_of(record, None if record.status != "infeasible" else 1.0)
        told = values_of(record, self.objectives)
        self.study.add_trial(
            optuna.trial.create_trial(
                params=params,
                distributions=dists,
                value=told[0] if self.objectives == 1 else None,
                values=None if self.objectives == 1 else told,
                user_attrs={"constraint": c},
                system_attrs={"constraints": (c,)},
            )
        )
