"""Sample efficiency of the search strategies: best-so-far latency against measured trials.

    .venv/bin/python experiments/sample_efficiency.py [--workloads W ...] [--strategies S ...]
        [--trials 64] [--seeds 0 1 2] [--workers 1] [--runs DIR] [--output DIR] [--train-logs GLOB ...]
        [--referee-rounds 5] [--confirm-rounds 10] [--train-runs STRATEGY]
        [--baseline DIR] [--baseline-strategies S ...] [--epsilon E]

Options:

- ``--workloads``: the configs tuned (default ``pool_chain bottleneck matmul attention
  dw_separable``): ``small`` (``examples/small.yaml``, pool_chain at 36x36x16); the built-ins
  ``pool_chain``, ``bottleneck`` and ``matmul`` (``experiments/configs/builtins_64/<name>.yaml``);
  the generality benchmark's chains ``attention``, ``dw_separable``, ``lenet_pool_conv``, ``mlp``,
  ``se_block``, ``resnet_body`` and ``mbconv5`` (``experiments/configs/generality/<name>.yaml``).
  All search the rules' space ``cascade`` with the config's pools, ``peak_limit`` and measurement.
- ``--strategies`` (default all four), each with no warm start, no mutation, no time budget and
  rounds of 64 proposals of which 8 are measured:

  - ``random``: ``search.strategy: random``, no cost model (the control);
  - ``tpe``: Optuna's TPE, no cost model (every measured trial is TPE's own draw);
  - ``evolutionary``: ``search.strategy: evolutionary`` with the XGBoost ranking model from scratch
    (a round measures the best 6 by the model and 2 at random, with the config's ``search.epsilon``
    0.25);
  - ``pretrained``: the same, the model starting from ``search.cost_model: {kind: xgboost,
    pretrained: DIR/<workload>/pretrained_model.json}``, trained on the other workloads' logs.

- ``--trials``: the measured-trial budget of each run (default 64); ``--seeds`` (default 0 1 2);
  ``--workers``: processes of the local executor (default 1).
- ``--runs DIR`` (default ``results/sample_efficiency_runs``): each run goes to
  ``DIR/<workload>/<strategy>-s<seed>/`` (the tuner's outputs, and ``wall.json``: the run's wall
  time and the sha256 of the model file it started from). A run there whose ``best.json`` exists,
  whose last session has the config this script builds (``autotune.search.log.config_changes``: the
  same fingerprint, or files that moved with the project) and its trial budget, and
  (``pretrained``) whose model file is unchanged, is read, not run again; any other is removed and
  run afresh. A pretrained run whose session recorded its model's path without its hash
  (``search.cost_model.pretrained_sha256``) is compared by the path: read from a checkout in
  another directory, it is run again.
- ``--output DIR`` (default ``results``): where ``sample_efficiency.md``, ``.json`` and ``.png`` go.
- ``--train-logs GLOB ...`` (default ``results/*/trials.jsonl results/*/*/trials.jsonl``, relative
  to the repository): the logs a pretrained model may be trained on; logs under ``--runs`` never
  are, so the training set does not grow with this experiment's own runs.

- ``--train-runs STRATEGY`` (default none): the pretrained models are also trained on the runs of
  ``STRATEGY`` under ``--runs`` (``DIR/<workload>/<STRATEGY>-s<seed>/``, every seed), of the other
  workloads: on a host with no earlier logs, a user who tuned other chains there first. Those runs
  are made (or read) for every workload before any model is trained, so each model sees the same
  finished logs whichever workload comes first.

The pretrained model of a workload is trained once, when ``DIR/<workload>/pretrained_model.json``
does not exist (delete it to train again), by :func:`autotune.search.cost_model_train.train` (what
``autotune train-cost-model`` calls: a quarter of each log held out to score the model, then the
model fitted on every ``ok`` trial; seed 0) and written with
:func:`autotune.search.cost_model_file.save_model`. The workload of a log is the one that
:func:`~autotune.search.cost_model_train.run_setup` replays it on (the run's ``best.json``, else its
``run.jsonl`` config; not the directory name, which is a run's name such as
``bottleneck_evolutionary_seed1`` or ``small``), compared without its arguments: tuning ``small``
leaves out every pool_chain log, and the reverse. A log is also left out when its ``run.jsonl``
does not record that it was timed on this host's CPU (LLVM cpu name and vector ISA; a log with no
``run.jsonl`` records no host at all), or when the project can no longer read it. The model file
lists the logs it was trained on, those left out and why, and the held-out scores; the report
counts them per workload. Training takes place outside the runs and is not in their wall time. As
:mod:`autotune.search.cost_model` has it, until a run has fitted the model on 4 of its own trials,
a model trained on other workloads ranks by the roofline estimate's line alone (the slope fitted
there, its trees counting 0), in the same order as ``evolutionary``'s model from scratch: the two
can differ only from the first fit on (the second round, as a rule), when the run's trees are
boosted on top of the pretrained ones.

- ``--epsilon E`` (default: the config's ``search.epsilon``): the share of each round's
  measurements taken at random instead of by the cost model, in this invocation's runs (never in
  the ``--baseline`` runs, which keep their own). A run's directory does not say it: give each
  value its own ``--runs``.

- ``--baseline DIR`` (default none): the finished runs of the same workloads and seeds, and of the
  strategies ``--baseline-strategies`` names (default: every one of ``--strategies``), under another
  runs directory (made, as a rule, by another version of the project: the runs'
  fingerprint is of their config, not of the code), read and never run again, judged by this
  invocation's referee beside its own runs and reported as ``<strategy>@<DIR's name>``. Two
  versions of the search compared in one invocation are timed by one referee, in one session; a
  missing or unfinished baseline run stops the invocation, naming it, before any run is made.

- ``--referee-rounds`` (default 5, :data:`autotune.search.best.REMEASURE_ROUNDS`; 0: no referee):
  the rounds of the referee's re-timing (below); ``--confirm-rounds`` (default
  :data:`CONFIRM_ROUNDS`; 0: none): the rounds of its second pass.

The referee: the search's own medians are timed while each run goes on, one schedule at a time,
and the best of all runs is the luckiest of many noisy measurements (on the shared 2-core host a
schedule's search median and its re-measurement at the run's end differed by up to 1.9x). So after
a workload's runs, every schedule that was among a run's :data:`~autotune.search.best.TOP_K`
fastest at some point (:func:`top_spans`; a run stopped after that trial would re-time those and
keep the fastest, as :func:`autotune.search.best.finish` does) and whose search median is at most
:data:`REFEREE_RANGE` times the best search median is timed again, all in one
:meth:`~autotune.search.executors.Executor.remeasure` call (one worker, alternating, the median of
the rounds' medians; :func:`referee`, written to ``DIR/<workload>/referee.json`` and read from there
while it holds the same schedules and rounds). A run's trials to 5% by the referee are the measured
trials after which one of its top 5 so far is within 5% of the fastest re-timed schedule
(:func:`refereed`). The fastest of hundreds of noisy medians is itself the luckiest of them (on
pool_chain the fastest of 205 was 0.1647 ms with rounds of 0.164-0.194 ms, and 30 others were
within 8% of it), which would set the 5% target below what that schedule delivers. So a second pass
(:func:`confirm`) times the first pass's fastest again together with every schedule within
:data:`CONFIRM_RANGE` of it, in ``--confirm-rounds`` more rounds, and those medians replace the
first pass's: the fastest schedule is chosen by one pass and its figure is taken from another; the
report gives both figures. The report gives both judges, the plot the referee's curves, and how alike
two of the referee's rounds rank its schedules (:func:`round_agreement`: the timings' own
reliability among schedules this close, which bounds any cost model's rank correlation with them).

Figures, from each run's ``trials.jsonl``: the best ``ok`` median so far after each measured trial
(every status but ``infeasible`` uses the budget); the best latency any run of the workload in the
report found; the measured trials each run needed to come within 5% of it; the search loop's wall
time (``TuneResult.driver.total_s``: without the setup, the end's re-measurement and report), and
the whole ``tune`` call's; the infeasible and invalid trials. Per workload and strategy, the verdict counts the seeds that came
within 5% in at most 64 measured trials with a search wall of at most 180 s, and compares the mean
trials-to-5% of each model-guided strategy (over its seeds that got there) with random's; when
random missed seeds and the strategy got there on every one, also the most that ratio can be
(each seed random missed counted as one trial past its run), and the most it can be if random went
on drawing (:func:`random_trials`: random's draws are independent, so its trials to the first
schedule within 5% are geometric, and its runs that missed bound them too). The
latencies are the search's own medians, measured while the run went on, so runs done at different
times on a loaded machine differ by noise too; the report gives the host (``machine()``), its load
average at the start and end of the invocation, and how many runs were read from earlier ones.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import glob
import hashlib
import itertools
import json
import math
import os
import shutil
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from autotune.config import RunConfig, load_config
from autotune.errors import AutotuneError
from autotune.measure.timing import CONTENDED, is_contended
from autotune.report import write_report
from autotune.search.best import REMEASURE_ROUNDS, TOP_K
from autotune.search.candidates import make_task
from autotune.search.cost_model_file import save_model
from autotune.search.cost_model_train import LogRows, log_rows, run_setup, train
from autotune.search.executors.local_executor import LocalExecutor
from autotune.search.log import config_changes, load, load_sessions
from autotune.search.rank_scores import spearman
from autotune.search.records import TrialRecord, machine
from autotune.search.tuner import tune

REPO = Path(__file__).resolve().parents[1]
BUILTINS = REPO / "experiments" / "configs" / "builtins_64"
GENERALITY = REPO / "experiments" / "configs" / "generality"
CHAINS = ("attention", "dw_separable", "lenet_pool_conv", "mlp", "se_block", "resnet_body", "mbconv5")
WORKLOADS = {
    "small": REPO / "examples" / "small.yaml",
    **{name: BUILTINS / f"{name}.yaml" for name in ("pool_chain", "bottleneck", "matmul")},
    **{name: GENERALITY / f"{name}.yaml" for name in CHAINS},
}
DEFAULT_WORKLOADS = ["pool_chain", "bottleneck", "matmul", "attention", "dw_separable"]
STRATEGIES: dict[str, dict[str, Any]] = {
    "random": {"strategy": "random", "cost_model": "none"},
    "tpe": {"strategy": "optuna", "sampler": "tpe", "cost_model": "none"},
    "evolutionary": {"strategy": "evolutionary", "cost_model": "xgboost"},
    "pretrained": {"strategy": "evolutionary", "cost_model": "xgboost"},
}
MODEL_GUIDED = ("evolutionary", "pretrained")
TRAIN_LOGS = ["results/*/trials.jsonl", "results/*/*/trials.jsonl"]
MODEL_NAME = "pretrained_model.json"
WITHIN = 1.05
"""A run has found the best when its best so far is within 5% of the best any run found."""
TARGET_TRIALS = 64
REFEREE_RANGE = 1.5
"""The referee re-times a run's top schedules whose search median is at most this many times the best
any run found: one slower than that in its own run is taken not to be within 5%."""
REFEREE_FILE = "referee.json"
CONFIRM_RANGE = 1.15
"""The referee's second pass times again every schedule whose first-pass median is at most this
many times the fastest's."""
CONFIRM_ROUNDS = 10
"""The rounds of the referee's second pass."""
TARGET_WALL_S = 180.0
CONFIDENCE = 0.95
"""The confidence of the lower bound on random's mean trials to 5% (:func:`random_trials`)."""
COLOURS = {"random": "C0", "tpe": "C1", "evolutionary": "C2", "pretrained": "C3"}


def rel(path: Path) -> str:
    """``path`` relative to the repository when it is inside it."""
    path = path.resolve()
    return str(path.relative_to(REPO)) if path.is_relative_to(REPO) else str(path)


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def workload_key(wl: str) -> str:
    """The chain a config tunes, as :func:`run_setup` names a log's: the registry name or the function."""
    w = load_config(WORKLOADS[wl]).workload
    return w.name if w.name is not None else str(w.path).rsplit(":", 1)[-1]


# ---------------------------------------------------------------- the pretrained models


@dataclasses.dataclass(frozen=True)
class Log:
    """A run directory with a trial log: its workload (None when unreadable), and why a model may
    not be trained on it (empty: it may)."""

    path: Path
    workload: str | None
    reason: str = ""


def find_logs(patterns: list[str], runs: Path | None, host: dict[str, Any]) -> list[Log]:
    """The run directories of the logs matching ``patterns`` (relative to the repository), but
    those under ``runs`` (None: none left out), each with its workload and whether it was timed on
    ``host``'s CPU."""
    found = {Path(p).resolve().parent for pat in patterns for p in glob.glob(str(REPO / pat))}
    logs = []
    for d in sorted(found):
        if runs is not None and d.is_relative_to(runs.resolve()):
            continue
        try:
            key: str | None = run_setup(d).key
            machines = [s["session"].get("machine", {}) for s in load_sessions(d) if "session" in s]
        except AutotuneError as exc:
            logs.append(Log(d, None, f"unreadable ({exc})"))
            continue
        cpus = {(m.get("llvm_cpu"), tuple(m.get("isa", []))) for m in machines}
        if not cpus:
            reason = "its host is not recorded"
        elif cpus != {(host["llvm_cpu"], tuple(host["isa"]))}:
            reason = f"timed on {', '.join(sorted(str(c[0]) for c in cpus))} or another ISA"
        else:
            reason = ""
        logs.append(Log(d, key, reason))
    return logs


def train_model(key: str, logs: list[Log], path: Path, cache: dict[Path, LogRows]) -> None:
    """Train the model for the workload ``key`` on every usable log of another workload, and write it."""
    start = time.perf_counter()
    used = [log for log in logs if not log.reason and log.workload != key]
    rows = []
    for log in used:
        if log.path not in cache:
            print(f"  features of {rel(log.path)}", file=sys.stderr, flush=True)
            cache[log.path] = log_rows(log.path)
        rows.append(cache[log.path])
    model, held = train(rows, holdout=0.25, seed=0)
    left = [
        {"run": rel(log.path), "workload": log.workload, "reason": log.reason or "the tuned workload"}
        for log in logs
        if log not in used
    ]
    meta = {
        "trained_on": [
            {"run": rel(log.path), "workload": log.workload, "ok_trials": len(r.y), "skipped": r.skipped}
            for log, r in zip(used, rows)
        ],
        "left_out": left,
        "held_out": [h.to_json() for h in held],
        "holdout": 0.25,
        "seed": 0,
        "train_s": time.perf_counter() - start,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    save_model(model, path, meta)


def model_meta(path: Path) -> dict[str, Any]:
    """A model file's fields but the booster."""
    doc = json.loads(path.read_text(encoding="utf-8"))
    return {k: v for k, v in doc.items() if k != "booster"}


# ---------------------------------------------------------------- the runs


def configure(wl: str, strategy: str, seed: int, args: argparse.Namespace, model: Path | None) -> RunConfig:
    """The config of one run: the workload's, with the strategy's search settings."""
    out = (args.runs / wl / f"{strategy}-s{seed}").resolve()
    cfg = load_config(WORKLOADS[wl], {"trials": args.trials, "seed": seed, "output": str(out)})
    settings = {"sampler": "tpe", **STRATEGIES[strategy]}
    epsilon = cfg.search.epsilon if args.epsilon is None else args.epsilon
    search = dataclasses.replace(
        cfg.search, batch=64, measure_per_round=8, mutation=0.0, warm_start=None, time_budget=None,
        pretrained=model if strategy == "pretrained" else None, epsilon=epsilon, **settings,
    )  # fmt: skip
    return dataclasses.replace(cfg, search=search, ray=dataclasses.replace(cfg.ray, workers=args.workers))


def finished(cfg: RunConfig, model_sha: str | None) -> bool:
    """Whether ``cfg.output`` holds a finished run of ``cfg`` (see the module docstring)."""
    out = cfg.output
    wall_file = out / "wall.json"
    failed = wall_file.is_file() and "failed" in json.loads(wall_file.read_text())
    if not (out / "best.json").is_file() and not failed:
        return False
    starts = [line["session"] for line in load_sessions(out) if "session" in line]
    wall = json.loads((out / "wall.json").read_text()) if (out / "wall.json").is_file() else {}
    return (
        bool(starts)
        and not config_changes(starts[-1], cfg)
        and starts[-1].get("trials") == cfg.search.trials
        and wall.get("pretrained_sha256") == model_sha
    )


def baseline_config(
    wl: str, strategy: str, seed: int, args: argparse.Namespace
) -> tuple[RunConfig, str | None]:
    """The config of the ``--baseline`` run of ``wl``, ``strategy`` and ``seed``, with the sha256
    of its pretrained model (None without one); SystemExit naming the run when it is not finished
    there (:func:`finished`), so that no baseline run is ever made or removed."""
    base = argparse.Namespace(**{**vars(args), "runs": args.baseline, "epsilon": None})
    model = (args.baseline / wl / MODEL_NAME).resolve() if strategy == "pretrained" else None
    cfg = configure(wl, strategy, seed, base, model)
    sha = sha256(model) if model is not None and model.is_file() else None
    if (strategy == "pretrained" and sha is None) or not finished(cfg, sha):
        raise SystemExit(
            f"--baseline {rel(args.baseline)}: {rel(cfg.output)} is not a finished run of {wl}, "
            f"{strategy}, seed {seed} with {args.trials} trials (its model: {MODEL_NAME} beside it)"
        )
    return cfg, sha


def run_one(cfg: RunConfig, wl: str, strategy: str, seed: int, traces: dict[str, str]) -> dict[str, Any]:
    """Tune one workload with one strategy and seed (or read the finished run); its curve and figures.
    The trace of every ``ok`` trial goes to ``traces`` (by trace key), for the referee."""
    out = cfg.output
    model_sha = sha256(cfg.search.pretrained) if cfg.search.pretrained is not None else None
    ran = not finished(cfg, model_sha)
    if ran:
        if out.exists():  # unfinished, or of another config: start again
            shutil.rmtree(out)
        start = time.perf_counter()
        try:
            result = tune(cfg, progress=False, executor="local", report=write_report)
        except AutotuneError as exc:  # e.g. no trial was ok: the run is recorded as such
            wall = {"search_s": None, "total_s": time.perf_counter() - start, "pretrained_sha256": model_sha}
            wall["failed"] = str(exc)
        else:
            wall = {
                "search_s": result.driver.total_s if result.driver else None,
                "total_s": time.perf_counter() - start,
                "pretrained_sha256": model_sha,
            }
        (out / "wall.json").write_text(json.dumps(wall))
    wall = json.loads((out / "wall.json").read_text()) if (out / "wall.json").is_file() else {}
    records = sorted(load(out / "trials.jsonl"), key=lambda r: r.trial)
    curve: list[float | None] = []
    best: float | None = None
    for r in records:
        if r.status == "infeasible":
            continue
        if r.ok and r.median_ms is not None:
            best = r.median_ms if best is None else min(best, r.median_ms)
        curve.append(best)
    for r in records:
        if r.ok and r.trace:
            traces[r.key] = r.trace
    counts = Counter(r.status for r in records)
    counts["contended"] = sum(r.ok and is_contended(r.contended) for r in records)
    best_json = json.loads((out / "best.json").read_text()) if (out / "best.json").is_file() else None
    return {
        "workload": wl, "strategy": strategy, "seed": seed, "curve": curve, "counts": dict(counts),
        "tops": top_spans(records, TOP_K), "wall": wall, "remeasured_ms": best_json["figures"]["median_ms"] if best_json else None,
        "dir": rel(out), "ran": ran,
    }  # fmt: skip


def top_spans(records: list[TrialRecord], k: int) -> list[dict[str, Any]]:
    """Every ``ok`` trial that was among the ``k`` fastest (by the search's median) at some point of
    the run: its trace ``key``, ``search_ms``, the measured trial (1-based, every status but
    ``infeasible``) at which it entered the ``k`` fastest, and the one at which it left them (None:
    among them at the end). Were the run stopped after measured trial ``i``, its end would re-time
    the ``k`` fastest at ``i`` and keep the fastest of them (:func:`autotune.search.best.finish`)."""
    ranked: list[TrialRecord] = []
    spans: dict[str, dict[str, Any]] = {}
    position = 0
    for r in records:
        if r.status == "infeasible":
            continue
        position += 1
        if not (r.ok and r.median_ms is not None):
            continue
        ranked.append(r)
        ranked.sort(key=lambda x: (x.median_ms, x.trial))
        for x in ranked[k:]:
            if x.key in spans and spans[x.key]["leave"] is None:
                spans[x.key]["leave"] = position
        del ranked[k:]
        if any(x.key == r.key for x in ranked) and r.key not in spans:
            spans[r.key] = {"key": r.key, "search_ms": r.median_ms, "enter": position, "leave": None}
    return list(spans.values())


# ---------------------------------------------------------------- the referee


def digest_of(keys: list[str], rounds: int) -> str:
    """What a referee file's pass is kept by: its schedules and rounds."""
    return hashlib.sha256(f"{rounds}\n{chr(10).join(keys)}".encode()).hexdigest()


def retime(
    cfg: RunConfig, traces: dict[str, str], keys: list[str], rounds: int
) -> tuple[dict[str, Any], list[Any]]:
    """The schedules ``keys`` timed again together (one worker, alternating, ``rounds`` rounds):
    ``{"seconds", "median_ms": {key: median of the rounds' medians, None unless every round was
    ok}, "rounds_ms"}`` and each schedule's results."""
    start = time.perf_counter()
    with LocalExecutor(workers=1) as executor:
        results = executor.remeasure([make_task(cfg, traces[k]) for k in keys], rounds)
    medians = {
        k: statistics.median(x.median_ms for x in rs if x.median_ms is not None)
        if all(x.status == "ok" and x.median_ms is not None for x in rs) else None
        for k, rs in zip(keys, results)
    }  # fmt: skip
    rounds_ms = {k: [x.median_ms for x in rs] for k, rs in zip(keys, results)}
    return {"seconds": time.perf_counter() - start, "median_ms": medians, "rounds_ms": rounds_ms}, results


def referee(
    wl: str, runs: list[dict[str, Any]], traces: dict[str, str], cfg: RunConfig, path: Path, rounds: int
) -> dict[str, Any]:
    """Time again, together, every schedule that was among a run's :data:`TOP_K` fastest and whose
    search median is within :data:`REFEREE_RANGE` of the best any run of ``wl`` found: one worker,
    alternating, ``rounds`` rounds (:meth:`~autotune.search.executors.Executor.remeasure`, as a
    run's end re-times its best). Returns ``{"median_ms": {key: median of the rounds' medians, None
    unless every round was ok}, ...}``, written to ``path`` and read from it when it holds the same
    schedules and rounds."""
    best = min(t["search_ms"] for r in runs for t in r["tops"])
    keys = sorted({t["key"] for r in runs for t in r["tops"] if t["search_ms"] <= REFEREE_RANGE * best})
    digest = digest_of(keys, rounds)
    if path.is_file():
        doc = json.loads(path.read_text(encoding="utf-8"))
        if doc.get("schedules_sha256") == digest:
            return dict(doc)
    print(f"{wl}: the referee re-times {len(keys)} schedules, {rounds} rounds", file=sys.stderr, flush=True)
    load_start = list(os.getloadavg())
    timed, results = retime(cfg, traces, keys, rounds)
    date = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    medians = timed["median_ms"]
    doc = {
        "workload": wl, "rounds": rounds, "range": REFEREE_RANGE, "top_k": TOP_K, "schedules": len(keys),
        "schedules_sha256": digest, "date": date, **timed,
        "load_average": {"start": load_start, "end": list(os.getloadavg())},
        "failed": {k: [x.reason for x in rs if x.status != "ok"][:1] for k, rs in zip(keys, results) if medians[k] is None},
        "contended": {
            k: max((x.contended for x in rs if x.contended is not None), default=None) for k, rs in zip(keys, results)
        },
    }  # fmt: skip
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=1), encoding="utf-8")
    return doc


def confirm(
    wl: str, ref: dict[str, Any], traces: dict[str, str], cfg: RunConfig, path: Path, rounds: int
) -> dict[str, Any]:
    """The referee's second pass (see the module docstring): the first pass's fastest schedule and
    those within :data:`CONFIRM_RANGE` of it timed again together (one worker, alternating,
    ``rounds`` rounds). ``ref`` with ``"confirm": {"winner": the first pass's fastest key,
    "median_ms": {key: median of this pass's rounds' medians, None unless every round was ok},
    ...}``, written to ``path``; read from it while it holds the same schedules and rounds."""
    first = {k: v for k, v in ref["median_ms"].items() if v is not None}
    if not first or rounds <= 0:
        return ref
    winner = min(first, key=lambda k: (first[k], k))
    keys = sorted(k for k, v in first.items() if v <= CONFIRM_RANGE * first[winner])
    digest = digest_of(keys, rounds)
    if ref.get("confirm", {}).get("schedules_sha256") == digest:
        return ref
    doing = f"{wl}: the referee's second pass re-times {len(keys)} schedules, {rounds} rounds"
    print(doing, file=sys.stderr, flush=True)
    timed, _ = retime(cfg, traces, keys, rounds)
    doc = {
        **ref,
        "confirm": {
            "winner": winner, "rounds": rounds, "range": CONFIRM_RANGE, "schedules": len(keys),
            "schedules_sha256": digest, **timed,
        },
    }  # fmt: skip
    path.write_text(json.dumps(doc, indent=1), encoding="utf-8")
    return doc


def referee_medians(ref: dict[str, Any]) -> tuple[dict[str, float | None], float | None]:
    """The referee's median per schedule (its second pass's where it has one) and its best: the
    second pass's median of the first pass's fastest, or without a second pass (or when that one
    did not time ok), the least median (None: none timed ok)."""
    medians = dict(ref.get("median_ms", {}))
    second = ref.get("confirm")
    if second:
        medians.update(second["median_ms"])
        winner = second["median_ms"].get(second["winner"])
        if winner is not None:
            return medians, winner
    timed = [v for v in medians.values() if v is not None]
    return medians, min(timed) if timed else None


def delivered(run: dict[str, Any]) -> int | None:
    """A run's trials to 5% by the referee when its end would keep a schedule within 5% too (the
    fastest re-timed of its last top 5 is); None otherwise: a schedule within 5% that left its top 5
    (pushed out by luckier measurements of slower ones) is not what the run delivers."""
    ref = run["referee"]
    return ref["to_within"] if ref["final_ms"] is not None and ref["final_ms"] <= ref["target_ms"] else None


def refereed(run: dict[str, Any], medians: dict[str, float | None], target: float) -> dict[str, Any]:
    """A run judged by the referee's medians: ``to_within``, the first measured trial at which one of
    its :data:`TOP_K` fastest so far is within ``target`` ms (None: never); ``final_ms``, the fastest
    referee median among its last :data:`TOP_K` (what its end picks from; None: none re-timed);
    ``curve``, that figure after each measured trial."""
    timed = [(t, medians[t["key"]]) for t in run["tops"] if medians.get(t["key"]) is not None]
    within = [t["enter"] for t, ms in timed if ms is not None and ms <= target]
    curve: list[float | None] = []
    for i in range(1, len(run["curve"]) + 1):
        now = [
            ms
            for t, ms in timed
            if ms is not None and t["enter"] <= i and (t["leave"] is None or i < t["leave"])
        ]
        curve.append(min(now) if now else None)
    return {
        "to_within": min(within) if within else None,
        "final_ms": curve[-1] if curve else None,
        "target_ms": target,
        "curve": curve,
    }


# ---------------------------------------------------------------- figures


def trials_to(curve: list[float | None], target: float) -> int | None:
    """The measured trials a curve needs to reach ``target`` (1-based), None if it never does."""
    return next((i + 1 for i, v in enumerate(curve) if v is not None and v <= target), None)


def poisson_upper(events: int, confidence: float) -> float:
    """The upper ``confidence`` bound on the mean of a Poisson count that came out ``events``: the
    mean at which a count of at most ``events`` has probability ``1 - confidence`` (bisection)."""

    def at_most(mean: float) -> float:
        term = total = math.exp(-mean)
        for k in range(1, events + 1):
            term *= mean / k
            total += term
        return total

    lo, hi = 0.0, events + 10.0 * math.sqrt(events + 1.0) + 10.0
    for _ in range(200):
        mid = (lo + hi) / 2.0
        lo, hi = (mid, hi) if at_most(mid) > 1.0 - confidence else (lo, mid)
    return (lo + hi) / 2.0


def random_trials(
    randoms: list[dict[str, Any]], to_within: Callable[[dict[str, Any]], int | None]
) -> dict[str, Any]:
    """Random's mean trials to 5% had its runs gone on drawing. Each measured trial of random is
    a uniform draw among the schedules that fit, independent of the others but for repeats, so the
    trials to its first schedule within 5% are geometric while a run draws a small share of the
    space (its chance per trial grows by about the share drawn): over its runs, ``trials``
    measured trials (a run's trials up to its first within 5%, or all of them) of which
    ``reached`` were a run's first within 5% give the chance per trial ``reached / trials`` and
    the ``mean`` trials ``trials / reached`` (None when no run got there); at :data:`CONFIDENCE`,
    the chance is at most the Poisson upper bound of ``reached`` over ``trials``, so random's mean
    is ``at_least`` ``trials`` over that bound (with no run there, about ``trials / 3``: the rule
    of three)."""
    ns = [to_within(r) for r in randoms]
    trials = sum(n if n is not None else len(r["curve"]) for n, r in zip(ns, randoms))
    reached = sum(n is not None for n in ns)
    return {
        "trials": trials, "reached": reached, "mean": trials / reached if reached else None,
        "at_least": trials / poisson_upper(reached, CONFIDENCE),
    }  # fmt: skip


def verdict(runs: list[dict[str, Any]], to_within: Callable[[dict[str, Any]], int | None]) -> dict[str, Any]:
    """Per strategy: the seeds within 5% in at most 64 trials and 180 s of search wall, and the
    mean trials-to-5% of the seeds that got there; each model-guided strategy's mean over random's
    (``vs_random``), and, when random missed some seeds and the strategy none, a bound on that ratio
    (``vs_random_at_most``): each seed random missed counted as needing one trial more than its run
    measured, so random's mean is at least that and the ratio at most the bound. With random runs,
    random's geometric estimate (``random["geometric"]``: :func:`random_trials`), and for a
    strategy that got there on every seed, its mean over the estimate's lower bound
    (``vs_random_geometric_at_most``).
    ``to_within``: a run's trials to 5% (by the search's medians or by the referee's)."""
    out: dict[str, Any] = {}
    for strategy in dict.fromkeys(r["strategy"] for r in runs):
        rs = [r for r in runs if r["strategy"] == strategy]
        reached = [n for n in map(to_within, rs) if n is not None]
        met = [
            r for r in rs
            if (n := to_within(r)) is not None and n <= TARGET_TRIALS
            and (r["wall"].get("search_s") or math.inf) <= TARGET_WALL_S
        ]  # fmt: skip
        out[strategy] = {
            "seeds": len(rs), "met": len(met), "reached": len(reached),
            "mean_trials": statistics.mean(reached) if reached else None,
        }  # fmt: skip
    control = random_label(out)
    base = out[control]["mean_trials"] if control is not None else None
    randoms = [r for r in runs if r["strategy"] == control]
    if control is not None:
        out[control]["geometric"] = random_trials(randoms, to_within)
    for strategy in (s for s in out if kind(s) in MODEL_GUIDED):
        x = out[strategy]
        mean = x["mean_trials"]
        x["vs_random"] = None if base is None or mean is None else mean / base
        if control is None or mean is None or x["reached"] < x["seeds"]:
            continue  # the bounds hold for a strategy that got there on every seed
        if out[control]["reached"] < len(randoms):
            at_least = [n if (n := to_within(r)) is not None else len(r["curve"]) + 1 for r in randoms]
            x["vs_random_at_most"] = mean / statistics.mean(at_least)
        x["vs_random_geometric_at_most"] = mean / out[control]["geometric"]["at_least"]
    return out


def kind(label: str) -> str:
    """The strategy of a run's label: ``random@RUNS_DIR`` (a ``--baseline``'s run) is ``random``."""
    return label.split("@", 1)[0]


def random_label(labels: Iterable[str]) -> str | None:
    """The runs the others are compared with: this invocation's random runs, else a baseline's."""
    randoms = [s for s in labels if kind(s) == "random"]
    return "random" if "random" in randoms else next(iter(randoms), None)


def summarise(runs: list[dict[str, Any]], referees: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Per workload: the best search median, each run's trials to 5% of it, and with the workload's
    referee (``referees``), the best referee median and each run judged by it (``run["referee"]``)."""
    by_wl: dict[str, list[dict[str, Any]]] = {}
    for r in runs:
        by_wl.setdefault(r["workload"], []).append(r)
    out: dict[str, Any] = {}
    for wl, rs in by_wl.items():
        best = min(v for r in rs for v in r["curve"] if v is not None)
        for r in rs:
            r["to_within"] = trials_to(r["curve"], WITHIN * best)
        out[wl] = {"best_ms": best, "runs": rs, "verdict": verdict(rs, lambda r: r["to_within"])}
        medians, ref_best = referee_medians(referees.get(wl, {}))
        if ref_best is not None:
            for r in rs:
                r["referee"] = refereed(r, medians, WITHIN * ref_best)
            out[wl]["referee_ms"] = ref_best
            out[wl]["referee_verdict"] = verdict(rs, delivered)
            out[wl]["referee"] = {k: v for k, v in referees[wl].items() if k != "median_ms"}
            out[wl]["referee_first_ms"] = min(v for v in referees[wl]["median_ms"].values() if v is not None)
    return out


def plot(summary: dict[str, Any], path: Path) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    cols = min(3, len(summary))
    rows = math.ceil(len(summary) / cols)
    fig = Figure(figsize=(4.6 * cols, 4.0 * rows), dpi=100)
    FigureCanvasAgg(fig)
    styles = ["-", "--", "-.", (0, (1, 1))]
    for i, (wl, s) in enumerate(summary.items()):
        ax = fig.add_subplot(rows, cols, i + 1)
        judged = "referee_ms" in s  # the referee's curves, else the search's own
        base = s["referee_ms"] if judged else s["best_ms"]
        for r in s["runs"]:
            curve = r["referee"]["curve"] if judged else r["curve"]
            xs = [k + 1 for k, v in enumerate(curve) if v is not None]
            ys = [v / base for v in curve if v is not None]
            # a baseline run: its strategy's colour, paler
            strategy, _, baseline = r["strategy"].partition("@")
            ax.step(xs, ys, where="post", color=COLOURS.get(strategy, "C4"), alpha=0.45 if baseline else 1.0,
                    label=f"{r['strategy']} s{r['seed']}", linestyle=styles[r["seed"] % len(styles)])  # fmt: skip
        ax.axhline(WITHIN, color="0.5", linestyle=":", linewidth=1)
        ax.set_yscale("log")
        ax.set_xlabel("measured trials")
        ax.set_ylabel(
            "re-timed best of the top 5 so far / best" if judged else "best so far / best of any run"
        )
        ax.set_title(f"{wl} ({'referee' if judged else 'search'} best {base:.3g} ms)")
        ax.legend(fontsize=6, ncol=2)
    fig.tight_layout()
    fig.savefig(path, format="png", metadata={"Software": None})


# ---------------------------------------------------------------- the report


def host_line(host: dict[str, Any], load: dict[str, list[float]]) -> str:
    isa = host.get("isa", [])
    vectors = "AVX-512" if "avx512f" in isa else "AVX2" if "avx2" in isa else "neither AVX2 nor AVX-512"
    start, end = (", ".join(f"{v:.2f}" for v in load[k]) for k in ("start", "end"))
    return (
        f"Host: {host.get('cpu', '?')} (LLVM `{host.get('llvm_cpu', '?')}`), {vectors}, {host.get('cores', '?')} "
        f"cores ({host.get('usable_cores', '?')} usable). Load average (1, 5, 15 min) {start} at the start "
        f"of this invocation and {end} at its end: the timings depend on whatever else ran on the host."
    )


def model_lines(meta: dict[str, Any], path: str) -> list[str]:
    used = Counter(t["workload"] for t in meta["trained_on"])
    trials = sum(t["ok_trials"] for t in meta["trained_on"])
    held = [h["spearman"] for h in meta.get("held_out", []) if h.get("spearman") is not None]
    why: dict[str, list[str]] = {}
    for x in meta["left_out"]:
        why.setdefault(x["reason"], []).append(f"`{x['run']}`")
    left = "; ".join(f"{reason}: {', '.join(runs)}" for reason, runs in why.items())
    return [
        f"Pretrained model `{path}`: {len(meta['trained_on'])} logs, {trials} ok trials "
        f"({', '.join(f'{k} {n}' for k, n in sorted(used.items()))} logs), trained in "
        f"{meta.get('train_s', math.nan):.0f} s"
        + (f"; held-out Spearman median {statistics.median(held):.2f}" if held else "")
        + f". Left out: {left or 'none'}.",
        "",
    ]


def verdict_lines(v: dict[str, Any], judge: str) -> list[str]:
    met = ", ".join(f"{s} {x['met']}/{x['seeds']}" for s, x in v.items())
    control = random_label(v)
    base = v[control] if control is not None else None
    ratios = []
    for s in (s for s in v if kind(s) in MODEL_GUIDED):
        x = v[s]
        mean = "-" if x["mean_trials"] is None else f"{x['mean_trials']:.1f}"
        reached = f"{mean} over {x['reached']} of {x['seeds']} seeds"
        if base is None:
            ratios.append(f"{s} {reached}")
            continue
        base_mean = "-" if base["mean_trials"] is None else f"{base['mean_trials']:.1f}"
        ratio = "-" if x.get("vs_random") is None else f"{x['vs_random']:.2f}"
        if "vs_random_at_most" in x:  # random missed seeds (each counted as one trial past its run)
            ratio += f", at most {x['vs_random_at_most']:.2f}"
        ratios.append(f"{s} {ratio} ({reached}; {control} {base_mean} over {base['reached']} of {base['seeds']})")
    line = (
        f"By the {judge}: within 5% in at most {TARGET_TRIALS} measured trials and {TARGET_WALL_S:.0f} s of "
        f"search wall: {met}."
    )
    if ratios:
        about = "over random's (seeds that got there)" if base else "(seeds that got there; no random runs here)"
        line += f" Mean trials to 5% {about}: {'; '.join(ratios)}."
    if base is not None and "geometric" in base:
        g = base["geometric"]
        mean = "-" if g["mean"] is None else f"{g['mean']:.1f}"
        line += (
            f" Random had it drawn on (its trials to 5% geometric; {g['trials']} measured trials, "
            f"{g['reached']} a run's first within 5%): mean {mean} trials, at least {g['at_least']:.1f} "
            f"at {CONFIDENCE:.0%}"
        )
        bounded = [
            f"{s}'s mean at most {v[s]['vs_random_geometric_at_most']:.2f} of it"
            for s in v if kind(s) in MODEL_GUIDED and "vs_random_geometric_at_most" in v[s]
        ]  # fmt: skip
        line += f"; {', '.join(bounded)}." if bounded else "."
    return [line, ""]


def round_agreement(ref: dict[str, Any]) -> tuple[float, float, float] | None:
    """How alike the referee's rounds rank its schedules: Spearman of two rounds' medians over the
    schedules timed ok in every round, ``(mean, min, max)`` over the pairs of rounds (None: fewer
    than 3 such schedules or 2 rounds). One round is one timing, as a search times a trial, so a
    model's rank correlation with a search's timings of schedules this close cannot be expected to
    exceed about the square root of this mean (the timings' reliability, in the sense of test
    theory) even if it knew each schedule's true latency."""
    rounds = [v for v in ref.get("rounds_ms", {}).values() if v and all(x is not None for x in v)]
    full = max((len(v) for v in rounds), default=0)
    rounds = [v for v in rounds if len(v) == full]  # a schedule timed once (SLOWER_ONE_ROUND) is left out
    if len(rounds) < 3 or full < 2:
        return None
    pairs = [
        spearman([v[i] for v in rounds], [v[j] for v in rounds])
        for i, j in itertools.combinations(range(len(rounds[0])), 2)
    ]
    pairs = [p for p in pairs if not math.isnan(p)]
    return (statistics.fmean(pairs), min(pairs), max(pairs)) if pairs else None


def referee_line(s: dict[str, Any]) -> str:
    ref = s["referee"]
    load = ", ".join(f"{v:.2f}" for v in ref["load_average"]["start"])
    failed = f"; {len(ref['failed'])} did not time ok in every round (not counted)" if ref["failed"] else ""
    spreads = [
        (max(v) - min(v)) / statistics.median(v)
        for v in ref.get("rounds_ms", {}).values()
        if v and all(x is not None for x in v)
    ]
    spread = (
        f" Its rounds' medians of one schedule spread (max - min over the median) {statistics.median(spreads):.0%} "
        f"for the median schedule, at most {max(spreads):.0%}."
        if spreads else ""
    )  # fmt: skip
    agree = round_agreement(ref)
    if agree is not None:
        spread += (
            f" Two rounds rank the schedules alike by Spearman {agree[0]:.2f} on average ({agree[1]:.2f} to "
            f"{agree[2]:.2f} over the pairs of rounds)."
        )
    busy = sum(map(is_contended, ref.get("contended", {}).values()))
    if busy:
        spread += (
            f" {busy} schedules had a round contended (threads waiting for a CPU over {CONTENDED:.0%} of "
            "the timing: another process had the cores)."
        )
    second = ref.get("confirm")
    if second:
        spread += (
            f" Second pass: the fastest of them ({s['referee_first_ms']:.4g} ms) and the {second['schedules'] - 1} "
            f"others within {second['range']}x of it timed again together, median of {second['rounds']} rounds, "
            f"{second['seconds']:.0f} s; the fastest's figure there is the best, and every schedule's figure there "
            "replaces its first."
        )
    return (
        f"Referee: best {s['referee_ms']:.4g} ms. {ref['schedules']} distinct schedules (every run's top "
        f"{ref['top_k']} within {ref['range']}x of the best search median) timed again together on "
        f"{ref['date']}, one worker, alternating, median of {ref['rounds']} rounds, {ref['seconds']:.0f} s, "
        f"load average {load} at its start{failed}.{spread}"
    )


def markdown(summary: dict[str, Any], args: argparse.Namespace, host: str, models: dict[str, Any]) -> str:
    runs = [r for s in summary.values() for r in s["runs"]]
    read = sum(not r["ran"] for r in runs)
    earlier = f" ({read} finished ones were read from `{rel(args.runs)}`, timed earlier)" if read else ""
    lines = [
        "# Sample efficiency: random vs TPE vs evolutionary + XGBoost, from scratch and pretrained",
        "",
        f"`.venv/bin/python experiments/sample_efficiency.py {command(args)}`, {dt.date.today().isoformat()}.",
        "",
        f"{host} {len(runs) - read} of the {len(runs)} runs ran in this invocation{earlier}. "
        "One run per strategy, workload and seed, one after the other, on the local executor "
        f"with {args.workers} worker(s); no warm start; each workload's own pools and `peak_limit`. "
        "`pretrained`: evolutionary + XGBoost starting from a model trained on the logs of the other "
        "workloads (none of the tuned chain, at any size), timed on this CPU.",
        "",
        "Two judges. *Search*: the measured trials (every status but `infeasible`) a run needed before its "
        "best `ok` median was within 5% of the best median any run of the workload found (`-`: never); the "
        "medians are the search's own, timed while its run went on, so the best of all runs is the luckiest "
        "of many noisy measurements, and runs timed at different times differ by the machine's load. "
        f"*Referee*: every schedule that was among a run's {TOP_K} fastest at some point (a run stopped "
        f"there would re-time those {TOP_K} and keep the fastest) and within {REFEREE_RANGE}x of the best "
        "search median is timed again, all together in one session, alternating; a run's trials to 5% are "
        "the measured trials after which one of its top 5 so far is within 5% of the fastest re-timed "
        "schedule, and *top 5 at the end* is the fastest re-timed of its last top 5; the referee's verdict "
        "counts a seed only when that is within 5% too (what the run delivers). Re-measured: the "
        "run's own end (best.json). Wall: the search loop (the targets' figure), and the whole run with "
        "its setup, re-measurement and report; neither holds the pretrained model's training. Contended ok: "
        f"trials timed while another process had the cores (threads waiting for a CPU over {CONTENDED:.0%} "
        "of the timing; unknown for runs logged before it was measured).",
        "",
    ]
    for wl, s in summary.items():
        judged = "referee_ms" in s
        lines += [f"## {wl}", "", f"Best search median of any run: {s['best_ms']:.4g} ms.", ""]
        if judged:
            lines += [referee_line(s), ""]
            lines += verdict_lines(s["referee_verdict"], "referee")
        lines += verdict_lines(s["verdict"], "search's medians")
        if wl in models:
            lines += model_lines(models[wl]["meta"], models[wl]["path"])
        lines += [
            "| strategy | seed | trials to 5%: referee | top 5 at the end, re-timed | trials to 5%: search "
            "| best (search) | best re-measured | ok / infeasible / invalid / contended ok | wall: search, run |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: |",
        ]
        for r in s["runs"]:
            final = next((v for v in reversed(r["curve"]) if v is not None), None)
            again = r["remeasured_ms"]
            c = r["counts"]
            wall, whole = r["wall"].get("search_s"), r["wall"].get("total_s")
            ref = r.get("referee")
            ref_to = "" if ref is None else f"{ref['to_within'] or '-'} of {len(r['curve'])}"
            ref_final = (
                "" if ref is None else "-" if ref["final_ms"] is None
                else f"{ref['final_ms']:.4g} ms ({ref['final_ms'] / s['referee_ms']:.2f})"
            )  # fmt: skip
            lines.append(
                f"| {r['strategy']} | {r['seed']} | {ref_to} | {ref_final} | {r['to_within'] or '-'} of {len(r['curve'])} | "
                f"{'-' if final is None else f'{final:.4g} ms'} | "
                f"{'-' if again is None else f'{again:.4g} ms'} | "
                f"{c.get('ok', 0)} / {c.get('infeasible', 0)} / {c.get('invalid', 0)} / {c.get('contended', 0)} | "
                f"{'-' if wall is None else f'{wall:.0f} s'}, {'-' if whole is None else f'{whole:.0f} s'} |"
            )
        lines.append("")
    lines += ["![best so far against measured trials](sample_efficiency.png)", ""]
    return "\n".join(lines)


def command(args: argparse.Namespace) -> str:
    return (
        f"--workloads {' '.join(args.workloads)} --strategies {' '.join(args.strategies)} --trials {args.trials} "
        f"--seeds {' '.join(map(str, args.seeds))} --workers {args.workers} --runs {rel(args.runs)} "
        f"--output {rel(args.output)} --train-logs {' '.join(repr(g) for g in args.train_logs)} "
        f"--referee-rounds {args.referee_rounds} --confirm-rounds {args.confirm_rounds}"
        + (f" --train-runs {args.train_runs}" if args.train_runs else "")
        + (f" --epsilon {args.epsilon}" if args.epsilon is not None else "")
        + (f" --baseline {rel(args.baseline)}" if args.baseline else "")
        + (
            f" --baseline-strategies {' '.join(args.baseline_strategies)}"
            if args.baseline and args.baseline_strategies
            else ""
        )
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workloads", nargs="+", default=DEFAULT_WORKLOADS, choices=list(WORKLOADS))
    p.add_argument("--strategies", nargs="+", default=list(STRATEGIES), choices=list(STRATEGIES))
    p.add_argument("--trials", type=int, default=TARGET_TRIALS)
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--runs", type=Path, default=REPO / "results" / "sample_efficiency_runs")
    p.add_argument("--output", type=Path, default=REPO / "results")
    p.add_argument("--train-logs", nargs="+", default=TRAIN_LOGS, metavar="GLOB")
    p.add_argument("--referee-rounds", type=int, default=REMEASURE_ROUNDS)
    p.add_argument("--confirm-rounds", type=int, default=CONFIRM_ROUNDS)
    p.add_argument("--train-runs", choices=[s for s in STRATEGIES if s != "pretrained"], default=None)
    p.add_argument("--baseline", type=Path, default=None, metavar="DIR")
    p.add_argument("--baseline-strategies", nargs="+", default=None, choices=list(STRATEGIES), metavar="S")
    p.add_argument("--epsilon", type=float, default=None, metavar="E")
    args = p.parse_args(argv)
    load = {"start": list(os.getloadavg())}
    host = machine()
    logs = find_logs(args.train_logs, args.runs, host) if "pretrained" in args.strategies else []
    baselines = {
        (wl, strategy, seed): baseline_config(wl, strategy, seed, args)
        for wl in (args.workloads if args.baseline else [])
        for seed in args.seeds
        for strategy in args.baseline_strategies or args.strategies
    }  # fmt: skip
    if args.train_runs and "pretrained" in args.strategies:
        for wl in args.workloads:  # every workload's, before any model is trained
            for seed in args.seeds:
                print(f"{wl} {args.train_runs} seed {seed} (to train on)", file=sys.stderr, flush=True)
                run_one(configure(wl, args.train_runs, seed, args, None), wl, args.train_runs, seed, {})
        pattern = f"{rel(args.runs)}/*/{args.train_runs}-s*/trials.jsonl"
        logs += find_logs([pattern], None, host)
    cache: dict[Path, LogRows] = {}
    runs, models, referees = [], {}, {}
    for wl in args.workloads:
        traces: dict[str, str] = {}
        model = None
        if "pretrained" in args.strategies:
            model = (args.runs / wl / MODEL_NAME).resolve()
            if not model.is_file():
                print(f"{wl}: training the pretrained model", file=sys.stderr, flush=True)
                train_model(workload_key(wl), logs, model, cache)
            models[wl] = {"path": rel(model), "meta": model_meta(model)}
        for seed in args.seeds:
            for strategy in args.strategies:
                print(f"{wl} {strategy} seed {seed}", file=sys.stderr, flush=True)
                runs.append(run_one(configure(wl, strategy, seed, args, model), wl, strategy, seed, traces))
        for (w, strategy, seed), (cfg, _) in baselines.items():
            if w == wl:
                label = f"{strategy}@{args.baseline.name}"
                runs.append({**run_one(cfg, wl, strategy, seed, traces), "strategy": label})
        if args.referee_rounds > 0:
            cfg = configure(wl, args.strategies[0], 0, args, model)
            mine = [r for r in runs if r["workload"] == wl]
            path = args.runs / wl / REFEREE_FILE
            first = referee(wl, mine, traces, cfg, path, args.referee_rounds)
            referees[wl] = confirm(wl, first, traces, cfg, path, args.confirm_rounds)
    summary = summarise(runs, referees)
    load["end"] = list(os.getloadavg())
    args.output.mkdir(parents=True, exist_ok=True)
    plot(summary, args.output / "sample_efficiency.png")
    doc = {"command": command(args), "host": host, "load_average": load, "models": models, "summary": summary}
    (args.output / "sample_efficiency.json").write_text(json.dumps(doc, indent=1))
    text = markdown(summary, args, host_line(host, load), models)
    (args.output / "sample_efficiency.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
