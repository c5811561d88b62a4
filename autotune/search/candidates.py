"""Pieces of the search loop that need no executor: lowering a candidate, Optuna, eps-greedy choice.

- :func:`lower_candidate` lowers a schedule with the run's pools and says
  whether it is feasible; an infeasible one still has its exact peak (it is
  planned again in unbounded pools of the same names), so it is never compiled
  yet its figures are known.
- :func:`make_study` builds the Optuna study; :func:`tell` reports a trial
  record to it (see *What Optuna is told* below); :func:`add_logged` gives it
  the trials of a resumed log.
- :func:`choose` is MetaSchedule's epsilon-greedy pick among ranked candidates.

What Optuna is told
-------------------

Every trial of the log is a ``COMPLETE`` Optuna trial with a value and one
constraint (``trial.user_attrs["constraint"]``, read by the sampler's
``constraints_func``; <= 0 is feasible):

- ``ok``: value = median ms, constraint = ``(peak - peak_limit) / peak_limit`` (0 without a limit);
- ``infeasible``: value = :data:`PENALTY_MS`, constraint = the relative excess
  over ``peak_limit`` or over the fullest pool (> 0);
- ``invalid``, ``wrong``, ``crashed``, ``timeout``, ``error``: value =
  :data:`PENALTY_MS`, constraint = 1.

So TPE and NSGA-II rank every failure below every feasible trial and learn to
avoid its region (a ``FAIL`` state would be ignored by TPE, which would then
propose the same failing knobs again). Candidates that were sampled but not
measured (ranked out by the cost model, or past the trial budget) are not
trials of the log; they are told ``FAIL``, which the samplers ignore.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from .. import ir
from ..config import RunConfig
from ..errors import ConfigError, PoolOverflowError
from ..lowering import Lowered, lower
from ..measure.task import MeasureTask
from ..memory import MemoryPlan, Pool
from .records import TrialRecord
from .space import SearchSpace

if TYPE_CHECKING:
    import optuna

__all__ = [
    "PENALTY_MS",
    "Lowering",
    "add_logged",
    "choose",
    "constraint_of",
    "knobs_text",
    "lower_candidate",
    "make_task",
    "make_study",
    "tell",
]

PENALTY_MS = 1e6
"""The objective value told to Optuna for a trial without a latency (it is also infeasible)."""
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
    """Lower ``func`` and judge its plan: pools overflowing or ``peak > peak_limit`` is infeasible."""
    pools = tuple(pools)
    try:
        lowered = lower(func, pools=pools, planner=planner, seed=seed)
    except PoolOverflowError as exc:
        big = tuple(replace(p, size=UNBOUNDED) for p in pools)
        plan = lower(func, pools=big, planner=planner, seed=seed).plan
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


def make_task(cfg: RunConfig, trace: str, pools: bool = True) -> MeasureTask:
    """The measurement of ``trace`` as the config says (``pools=False``: one unbounded pool)."""
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
    )


def knobs_text(knobs: Mapping[str, Any] | Sequence[tuple[str, Any]]) -> str:
    """``tile=4, rolling=True``."""
    pairs = knobs.items() if isinstance(knobs, Mapping) else knobs
    return ", ".join(f"{k}={v}" for k, v in pairs)


def random_assignment(space: SearchSpace, rng: np.random.Generator) -> dict[str, Any]:
    """One knob value per knob, uniformly at random (an inactive knob: its default)."""
    values = dict(space.fixed)
    for k in space.search_order():
        values[k.name] = k.choices[int(rng.integers(len(k.choices)))] if k.active(values) else k.choices[0]
    return {k.name: values[k.name] for k in space.knobs}


def constraint_of(record: TrialRecord, excess: float | None = None) -> float:
    """The constraint told to Optuna for ``record`` (see the module docstring)."""
    if record.status == "infeasible":
        return max(excess if excess is not None else 1.0, 1e-9)
    if record.ok:
        return min(excess if excess is not None else 0.0, 0.0)
    return 1.0


def value_of(record: TrialRecord) -> float:
    return float(record.median_ms) if record.ok and record.median_ms is not None else PENALTY_MS


def _constraints(trial: optuna.trial.FrozenTrial) -> tuple[float]:
    return (float(trial.user_attrs.get("constraint", 1.0)),)


def make_study(sampler: str, seed: int) -> optuna.Study:
    """A minimising study with the sampler named in the config ("tpe", "nsga2", "random"), seeded."""
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
        elif sampler == "random":
            chosen = optuna.samplers.RandomSampler(seed=seed)
        else:
            raise ConfigError(f"unknown sampler {sampler!r}; expected one of tpe, nsga2, random")
    return optuna.create_study(direction="minimize", sampler=chosen)


def distributions(space: SearchSpace) -> dict[str, Any]:
    """One categorical distribution per knob."""
    from optuna.distributions import CategoricalDistribution

    return {k.name: CategoricalDistribution(tuple(k.choices)) for k in space.knobs}


def tell(study: optuna.Study, trial: optuna.Trial, record: TrialRecord, excess: float | None = None) -> None:
    """Report a logged trial's outcome for an asked ``trial``."""
    trial.set_user_attr("constraint", constraint_of(record, excess))
    study.tell(trial, value_of(record))


def tell_failure(study: optuna.Study, trial: optuna.Trial, constraint: float) -> None:
    """An invalid or infeasible candidate that is not logged (past the round's share): told all the same."""
    trial.set_user_attr("constraint", max(constraint, 1e-9))
    study.tell(trial, PENALTY_MS)


def tell_unmeasured(study: optuna.Study, trial: optuna.Trial) -> None:
    """A sampled candidate that is not a trial of the log (ranked out, or past the budget)."""
    import optuna

    study.tell(trial, state=optuna.trial.TrialState.FAIL)


def add_logged(study: optuna.Study, space: SearchSpace, records: Sequence[TrialRecord]) -> int:
    """Add the trials of a resumed log to ``study``; return how many fitted the space's knobs."""
    import optuna

    dists = distributions(space)
    added = 0
    for record in records:
        params = dict(record.knobs)
        if set(params) != set(dists) or any(params[k.name] not in k for k in space.knobs):
            continue  # the space changed since: the record stays in the log, Optuna does not see it
        values = {**dict(space.fixed), **params}
        active = [k.name for k in space.knobs if k.active(values)]  # what the trial sampled
        c = constraint_of(record, None if record.status != "infeasible" else 1.0)
        trial = optuna.trial.create_trial(
            params={name: params[name] for name in active},
            distributions={name: dists[name] for name in active},
            value=value_of(record),
            user_attrs={"constraint": c},
            system_attrs={"constraints": (c,)},
        )
        study.add_trial(trial)
        added += 1
    return added


def choose(predicted: np.ndarray, n: int, epsilon: float, rng: np.random.Generator) -> list[int]:
    """Indices of ``n`` candidates to measure: the best ``n - round(epsilon * n)`` by prediction,
    the rest at random; all at random while any prediction is NaN (no model yet)."""
    count = len(predicted)
    if n >= count:
        return list(range(count))
    if n <= 0:
        return []
    if np.isnan(predicted).any():
        return [int(i) for i in rng.choice(count, size=n, replace=False)]
    explore = round(epsilon * n)
    order = np.argsort(predicted, kind="stable")
    top = [int(i) for i in order[: n - explore]]
    rest = order[n - explore :]
    return top + [int(i) for i in rng.choice(rest, size=explore, replace=False)]
