"""Train a cost model on earlier runs' logs, and measure how well it ranks trials it has not seen.

``autotune train-cost-model RUN [RUN...] --output model.json`` calls :func:`train`: each run
directory (or its ``trials.jsonl``) gives one group of rows, its ``ok`` trials replayed on the
workload that the run's ``best.json`` (or ``run.jsonl``) names, lowered with its pools and turned
into features (:mod:`autotune.search.features`). A share of each run's trials is held out
(seeded); a model fitted on the rest predicts them, and :func:`~autotune.search.cost_model.spearman`
and :func:`~autotune.search.cost_model.top_k_recall` say how well it orders them. The model saved
is then fitted on every row, with those figures in the file::

    rows = [log_rows("runs/chain_a"), log_rows("runs/chain_b")]
    model, held_out = train(rows, holdout=0.25, seed=0)
    save_model(model, "model.json", {"trained_on": ..., "held_out": ...})
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..config import WorkloadConfig, load_workload
from ..errors import AutotuneError, ScheduleError
from ..memory import Pool
from ..schedule import Schedule
from . import candidates as cand
from .cost_model import TOP_SHARE, XGBoostModel, spearman, top_k, top_k_recall
from .features import feature_vector, features
from .log import RUN_LOG_NAME, load, load_sessions
from .target import Target

__all__ = ["TOP_SHARE", "HeldOut", "LogRows", "log_rows", "top_k", "train"]


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


def _setup(directory: Path) -> tuple[WorkloadConfig, tuple[Pool, ...], str, int, Target | None]:
    """The workload, pools, planner, seed and target of a run, from best.json or run.jsonl."""
    best = directory / "best.json"
    if best.is_file():
        data = json.loads(best.read_text(encoding="utf-8"))
        wl = data["workload"]
        pools = tuple(Pool(p["name"], p["size"]) for p in data["pools"])
        target = Target.from_json(data["target"]) if isinstance(data.get("target"), dict) else None
        wc = WorkloadConfig(wl.get("name"), wl.get("path"), tuple((wl.get("args") or {}).items()))
        return wc, pools, data["planner"], int(data["seed"]), target
    starts = [line["session"] for line in load_sessions(directory) if "session" in line]
    if not starts:
        raise AutotuneError(
            f"{directory}: no best.json or {RUN_LOG_NAME} says which workload the trials are of"
        )
    fields = starts[-1].get("config", {})
    args = tuple((k.split(".", 2)[2], v) for k, v in fields.items() if k.startswith("workload.args."))
    wc = WorkloadConfig(fields.get("workload.name"), fields.get("workload.path"), args)
    pools = tuple(Pool(p["name"], p["size"]) for p in fields.get("memory.pools", []))
    return wc, pools, fields.get("memory.planner", "greedy_by_size"), int(fields.get("search.seed", 0)), None


def log_rows(path: str | os.PathLike[str]) -> LogRows:
    """The rows of a run directory or its ``trials.jsonl`` (AutotuneError naming it when it is
    neither, or says nothing of its workload)."""
    path = Path(path)
    directory = path.parent if path.suffix == ".jsonl" else path
    records = [r for r in load(directory / "trials.jsonl") if r.ok and r.median_ms and r.trace]
    wc, pools, planner, seed, target = _setup(directory)
    wl = load_workload(wc)
    rows, times, skipped = [], [], 0
    for r in records:
        try:
            sch = Schedule.replay(wl.func, r.trace)
        except (ScheduleError, ValueError):
            skipped += 1  # a trace of an older space or schedule language
            continue
        low = cand.lower_candidate(sch.func, pools, planner, seed, None)
        assert low.lowered is not None  # no peak limit, unbounded pools: always lowered
        x = features(low.lowered.func, low.lowered.plan, original=wl.func, target=target)
        rows.append(feature_vector(x))
        times.append(float(r.median_ms))  # type: ignore[arg-type]
    name = directory.name if directory.name not in ("", ".") else str(directory)
    X = np.asarray(rows, dtype=np.float64).reshape(len(rows), -1)
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
