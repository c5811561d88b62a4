"""Train a cost model on earlier runs' logs, and measure how well it ranks trials it has not seen.

``autotune train-cost-model RUN [RUN...] --output model.json`` calls :func:`train`: each run
directory (or its ``trials.jsonl``) gives one group of rows, its ``ok`` trials replayed on the
workload that the run's ``best.json`` (or ``run.jsonl``) names, lowered with its pools and turned
into features (:mod:`autotune.search.features`). A share of each run's trials is held out
(seeded); a model fitted on the rest predicts them, and :func:`~autotune.search.rank_scores.spearman`
and :func:`~autotune.search.rank_scores.top_k_recall` say how well it orders them. The model saved
is then fitted on every row, with those figures in the file::

    rows = [log_rows("runs/chain_a"), log_rows("runs/chain_b")]
    model, held_out = train(rows, holdout=0.25, seed=0)
    save_model(model, "model.json", {"trained_on": ..., "held_out": ...})

:func:`cross_validated` scores a model on one run's own trials, out of fold: how well a model of
the run's kind, fitted on the rest of the run, orders trials it was not fitted on (``best.json``'s
``cost_model`` and the report's "Cost model" section).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..config import WorkloadConfig, load_workload
from ..errors import AutotuneError, ScheduleError
from ..lowering import Lowered
from ..memory import Pool
from ..schedule import Schedule
from ..workloads import Workload
from . import candidates as cand
from .cost_model import CostModel, XGBoostModel
from .features import FEATURE_NAMES, feature_vector, features
from .log import RUN_LOG_NAME, load, load_sessions
from .rank_scores import TOP_SHARE, spearman, top_k, top_k_recall
from .records import TIMED_TRIAL_STATUSES, TrialRecord
from .target import Target

__all__ = [
    "CV_FOLDS", "TOP_SHARE", "HeldOut", "LogRows", "RunSetup", "cross_validated", "log_rows", "lower_trial",
    "run_setup", "timed_records", "top_k", "train", "trial_features",
]  # fmt: skip


@dataclass(frozen=True)
class LogRows:
    """The feature rows and median latencies of one run's ``ok`` trials (``skipped``: ok trials
    whose trace no longer replays on the workload)."""

    name: str
    X: np.ndarray
    y: np.ndarray
    skipped: int = 0


@dataclass(frozen=True)
class HeldOut:
    """How the model fitted without them ranks a run's held-out trials."""

    name: str
    trials: int
    held_out: int
    spearman: float
    recall: float
    k: int

    def to_json(self) -> dict[str, Any]:
        return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in self.__dict__.items()}


@dataclass(frozen=True)
class RunSetup:
    """What a run's trials are of: the workload (``key``: its name, or its file's function, without
    the arguments), the pools, planner and seed it lowered with, and the target it was tuned for."""

    workload: Workload
    key: str
    pools: tuple[Pool, ...]
    planner: str
    seed: int
    target: Target


def run_setup(path: str | os.PathLike[str]) -> RunSetup:
    """The setup of a run directory (or its ``trials.jsonl``) from its best.json, else its run.jsonl
    (the target: this host's when the run did not record one); AutotuneError naming the directory
    when neither says which workload the trials are of."""
    directory = _directory(path)
    best = directory / "best.json"
    target: Target | None = None
    if best.is_file():
        data = json.loads(best.read_text(encoding="utf-8"))
        wl = data["workload"]
        pools = tuple(Pool(p["name"], p["size"]) for p in data["pools"])
        target = Target.from_json(data["target"]) if isinstance(data.get("target"), dict) else None
        wc = WorkloadConfig(wl.get("name"), wl.get("path"), tuple((wl.get("args") or {}).items()))
        planner, seed = data["planner"], int(data["seed"])
    else:
        starts = [line["session"] for line in load_sessions(directory) if "session" in line]
        if not starts:
            raise AutotuneError(
                f"{directory}: no best.json or {RUN_LOG_NAME} says which workload the trials are of"
            )
        fields = starts[-1].get("config", {})
        args = tuple((k.split(".", 2)[2], v) for k, v in fields.items() if k.startswith("workload.args."))
        wc = WorkloadConfig(fields.get("workload.name"), fields.get("workload.path"), args)
        pools = tuple(Pool(p["name"], p["size"]) for p in fields.get("memory.pools", []))
        planner, seed = fields.get("memory.planner", "greedy_by_size"), int(fields.get("search.seed", 0))
    key = wc.name if wc.name is not None else str(wc.path).rsplit(":", 1)[-1]
    return RunSetup(load_workload(wc), key, pools, planner, seed, target or Target.host())


def _directory(path: str | os.PathLike[str]) -> Path:
    path = Path(path)
    return path.parent if path.suffix == ".jsonl" else path


def timed_records(path: str | os.PathLike[str]) -> list[TrialRecord]:
    """The trials of a run that carry a time and a trace (``ok`` and ``cutoff``), in log order:
    what the tuner fits its model on."""
    records = load(_directory(path) / "trials.jsonl")
    return [r for r in records if r.status in TIMED_TRIAL_STATUSES and r.median_ms and r.trace]


def lower_trial(setup: RunSetup, trace: str) -> Lowered | None:
    """A trial's schedule replayed on the run's workload and lowered with its pools, as the tuner
    lowered it; None when the trace no longer replays (a trace of an older space or schedule language)."""
    try:
        sch = Schedule.replay(setup.workload.func, trace)
    except (ScheduleError, ValueError):
        return None
    low = cand.lower_candidate(sch.func, setup.pools, setup.planner, setup.seed, None)
    return low.lowered  # no peak limit: None only if the pools overflow


def trial_features(setup: RunSetup, lowered: Lowered) -> dict[str, float]:
    """The features of a lowered trial, as the tuner computes them."""
    return features(lowered.func, lowered.plan, original=setup.workload.func, target=setup.target)


def log_rows(path: str | os.PathLike[str]) -> LogRows:
    """The rows of a run directory or its ``trials.jsonl`` (AutotuneError naming it when it is
    neither, or says nothing of its workload)."""
    directory = _directory(path)
    setup = run_setup(directory)
    rows, times, skipped = [], [], 0
    for r in timed_records(directory):
        if not r.ok:
            continue
        lowered = lower_trial(setup, r.trace)
        if lowered is None:
            skipped += 1
            continue
        rows.append(feature_vector(trial_features(setup, lowered)))
        times.append(float(r.median_ms))  # type: ignore[arg-type]
    name = directory.name if directory.name not in ("", ".") else str(directory)
    X = np.asarray(rows, dtype=np.float64).reshape(len(rows), len(FEATURE_NAMES))
    return LogRows(name, X, np.asarray(times, dtype=np.float64), skipped)


def train(logs: list[LogRows], holdout: float = 0.25, seed: int = 0) -> tuple[XGBoostModel, list[HeldOut]]:
    """Hold out ``holdout`` of each log's rows (seeded), fit on the rest and score the held-out
    ones per log; return the model fitted on every row, and the held-out figures."""
    if not 0.0 <= holdout < 1.0:
        raise AutotuneError(f"--holdout: expected a share from 0 to below 1, got {holdout}")
    usable = [log for log in logs if len(log.y) >= 2]
    if sum(len(log.y) for log in usable) < XGBoostModel.min_samples:
        raise AutotuneError(
            f"too few ok trials to train on ({sum(len(log.y) for log in logs)}); "
            f"a model needs {XGBoostModel.min_samples} or more"
        )
    rng = np.random.default_rng(seed)
    splits = []
    for log in usable:
        n_out = round(holdout * len(log.y)) if len(log.y) >= 6 else 0
        splits.append(rng.permutation(len(log.y))[:n_out])
    train_rows = [np.setdiff1d(np.arange(len(log.y)), out) for log, out in zip(usable, splits)]
    scores: list[HeldOut] = []
    if any(len(out) for out in splits):
        model = _fit(usable, train_rows, seed)
        for log, out in zip(usable, splits):
            if len(out) >= 2:
                predicted = model.predict(log.X[out])
                k = top_k(len(out))
                scores.append(
                    HeldOut(log.name, len(log.y), len(out), spearman(predicted, log.y[out]),
                            top_k_recall(predicted, log.y[out], k), k)
                )  # fmt: skip
    return _fit(usable, [np.arange(len(log.y)) for log in usable], seed), scores


def _fit(logs: list[LogRows], rows: list[np.ndarray], seed: int) -> XGBoostModel:
    X = np.concatenate([log.X[r] for log, r in zip(logs, rows)])
    y = np.concatenate([log.y[r] for log, r in zip(logs, rows)])
    groups = np.concatenate([np.full(len(r), i) for i, r in enumerate(rows)])
    model = XGBoostModel(seed=seed)
    model.fit(X, y, groups)
    return model


CV_FOLDS = 4
"""Folds of :func:`cross_validated`: each fold's model is fitted on three quarters of the run."""


def cross_validated(
    make: Callable[[], CostModel],
    X: np.ndarray,
    y: np.ndarray,
    ok: np.ndarray,
    folds: int = CV_FOLDS,
    seed: int = 0,
) -> dict[str, float] | None:
    """``{"trials", "folds", "spearman", "recall", "k"}``: a model scored on one run's trials it was
    not fitted on. The ``ok`` rows of ``X`` (latencies ``y``, ms) are dealt into ``folds`` seeded
    folds; each fold is predicted by a new model (``make()``) fitted on every other timed row (the
    other folds' ok rows and every row that is not ok, a cutoff trial's latency as it was
    recorded), and the out-of-fold predictions are scored against the measured latencies
    (:func:`~autotune.search.rank_scores.spearman`, :func:`~autotune.search.rank_scores.top_k_recall`).

    Unlike the search's own predictions (each trial predicted before it was measured, from the
    rounds before it), every fold's model has seen trials from the whole run, so the figure says
    how well the features and the model order this workload's schedules, not how well the model
    guessed ahead of the search. None with fewer than ``2 * folds`` ok rows, or when a fold's model
    is not ready or does not predict milliseconds."""
    if folds < 2:
        raise ValueError(f"cross_validated: expected 2 or more folds, got {folds}")
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    ok = np.asarray(ok, dtype=bool)
    if not (len(X) == len(y) == len(ok)):
        raise ValueError(f"cross_validated: {len(X)} rows, {len(y)} latencies, {len(ok)} ok flags")
    scored = np.flatnonzero(ok)
    if len(scored) < 2 * folds:
        return None
    order = np.random.default_rng(seed).permutation(scored)
    predicted = np.empty(len(y), dtype=np.float64)
    for part in np.array_split(order, folds):
        rest = np.setdiff1d(np.arange(len(y)), part)
        model = make()
        model.fit(X[rest], y[rest])
        if not (model.ready and model.predicts_ms):
            return None
        predicted[part] = model.predict(X[part])
    k = top_k(len(scored))
    return {
        "trials": float(len(scored)),
        "folds": float(folds),
        "spearman": spearman(predicted[scored], y[scored]),
        "recall": top_k_recall(predicted[scored], y[scored], k),
        "k": float(k),
    }
