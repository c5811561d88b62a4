"""How well the cost model ranks trials it has not seen, judged offline on the logs of earlier runs.

    .venv/bin/python experiments/cost_model_heldout.py [--logs results/generality/mlp ...]
        [--variants before after] [--cache DIR] [--output results]

Every log of a finished run (one with a ``best.json``) under ``results/builtins_64/*``,
``results/generality/*``, ``results/sample_efficiency_runs/**`` and
``results/sample_efficiency_runs_rocketlake/**`` (or ``--logs``) is read with the
current code: each timed trial (``ok`` or ``cutoff``: what the tuner
fits its model on) is replayed on the run's workload, lowered with its pools, planner and seed as
the tuner lowered it, and turned into features (:mod:`autotune.search.cost_model_train`). Lowered
programs and features are cached under ``--cache`` (keyed by the log's bytes and the source of
the code that computes them), so a rerun after a change to the features or the model takes
seconds. A trial whose trace no longer replays is counted as skipped.

Per log and per model variant (``VARIANTS``: ``before``, the model and its features as they were at
commit :data:`BEFORE_REVISION` (``features.py`` and its estimate modules of that commit, read
with ``git show``, featurise the same lowered programs); ``after``, the current model on the
current features; others for ablation):

- *prequential*: the tuner's loop replayed. Before each round the model is fitted on the timed
  trials of the earlier rounds (the tuner refits once per round), and predicts the round's ``ok``
  trials; a prediction is kept when the model says it gives milliseconds, as the tuner records
  ``predicted_ms``. Spearman and top-k recall over the kept ones come from
  :func:`autotune.report.analysis.cost_model_quality`, the function that writes report.md's
  figure. ``logged``: the same function on the ``predicted_ms`` the run recorded (report.md's
  figure, by the model and features of the day).
- *leave one workload out*: a model fitted on the timed trials of every log of another workload
  (one group per log) ranks this log's ``ok`` trials (Spearman, :func:`~autotune.search.rank_scores.spearman`).
- *out of fold*: the run's trials dealt into 4 seeded folds, each fold's ``ok`` trials predicted by
  a model fitted on the rest of the log (:func:`autotune.search.cost_model_train.cross_validated`,
  the figure best.json and report.md give after a run): how well the features order one
  workload's schedules when the model has seen the whole run, where *prequential* also asks it to
  guess ahead of the search, on the trials it chose as the fastest it predicted. Only for the
  variants fitted on the medians.
- *estimate*: Spearman of the analytic estimate alone (feature ``log2_estimate_ns``), no learning.
- *noisy timings*: the ok trials whose timed runs spread more than :data:`NOISY` of their median
  (:func:`autotune.measure.timing.noise`): a descheduled time slice, or a busy machine. No feature
  of the program predicts them; *estimate, steady trials*: the estimate alone over the others.

A variant may fit its model on other labels than the measured medians (``Variant.labels``: each
trial's fastest timed run, :func:`min_labels`; noisy trials weighing less, :func:`noise_weighted`;
``cutoff`` trials raised to the slowest ok one, :func:`cutoff_censored`); whatever it fits on, its
predictions are scored against the medians, as report.md scores them. A model fitted on other
workloads counts its trees at ``n / (n + tree_trials)`` with ``n = 0`` (``Settings.tree_trials``),
so *leave one workload out* is the estimate's order for every variant with a prior and
``tree_trials > 0``. The summary table gives each variant's medians and means over the logs and
on how many logs its prequential Spearman is above or below ``after``'s: a median moves with
the few logs near it, those counts say whether most logs moved.

Writes ``<output>/cost_model_heldout.md`` and ``.json``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import inspect
import json
import math
import pickle
import shlex
import subprocess
import sys
import tempfile
import time
import types
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from autotune.measure.timing import noise  # noqa: E402
from autotune.report.analysis import cost_model_quality  # noqa: E402
from autotune.search import cost_model_train as ct  # noqa: E402
from autotune.search.cost_model import CostModel, Settings, XGBoostModel  # noqa: E402
from autotune.search.cost_model_train import cross_validated  # noqa: E402
from autotune.search.features import FEATURE_NAMES  # noqa: E402
from autotune.search.rank_scores import spearman  # noqa: E402
from autotune.search.records import machine  # noqa: E402

LOG_GLOBS = (
    "results/builtins_64/*/trials.jsonl",
    "results/generality/*/trials.jsonl",
    "results/sample_efficiency_runs/**/trials.jsonl",
    "results/sample_efficiency_runs_rocketlake/**/trials.jsonl",
)
MIN_OK = 8
"""Logs with fewer ok trials that replay are left out (a run still under way, or one that failed)."""
NOISY = 0.3
"""A timing whose :func:`~autotune.measure.timing.noise` is above this share is counted as noisy."""

BEFORE_REVISION = "b19e958685db0ce52ebed1bc8e208fca340eedcc"
"""The commit whose features and model ``before`` stands for."""
BEFORE = "before:"
"""The prefix of a feature computed by the code of :data:`BEFORE_REVISION`."""
BEFORE_NAMES: tuple[str, ...] = (
    "n_loops", "n_serial", "n_parallel", "n_vectorized", "n_unrolled", "max_depth", "n_nests",
    "n_stores", "log2_iterations", "log2_ops", "inner_log2_extent", "inner_const_frac",
    "inner_vectorized_frac", "inner_contig_frac", "inner_guards", "guarded_frac", "mod_index_frac",
    "log2_param_bytes", "log2_param_accesses", "param_reuse", "log2_inter_bytes",
    "log2_inter_accesses", "inter_reuse", "n_allocations", "n_banked", "largest_inter_l1",
    "largest_inter_l2", "largest_fits_l1", "largest_fits_l2", "halo_max", "halo_mean",
    "intensity_param", "intensity_access", "log2_workspace_peak", "n_pools_used", "parallel",
    "log2_bytes_l1", "log2_bytes_l2", "log2_bytes_l3", "log2_bytes_mem", "log2_reuse_distance",
    "vector_lanes_used", "log2_parallel_extent", "parallel_frac", "log2_unrolled_work",
    "inner_reduction_frac", "log2_estimate_ns", "log2_compute_ns", "log2_memory_ns",
    "vector_op_frac", "latency_bound_frac", "ops_ratio",
)  # fmt: skip
"""The features of :data:`BEFORE_REVISION` (:data:`~autotune.search.features.FEATURE_NAMES` of that commit)."""


# ---------------------------------------------------------------- the logs


@dataclass(frozen=True)
class Trial:
    trial: int
    round: int
    status: str
    median_ms: float
    logged_ms: float | None  # the predicted_ms the run recorded
    features: dict[str, float]
    noise: float = 0.0  # how far the timed runs spread (autotune.measure.timing.noise)
    min_ms: float | None = None  # the fastest timed run
    knobs: dict[str, Any] | None = None  # the trial's knobs as the run logged them


@dataclass(frozen=True)
class Log:
    label: str  # the log's directory under results/
    key: str  # the workload (leave-one-workload-out leaves out every log with this key)
    trials: tuple[Trial, ...]
    skipped: int
    knob_columns: tuple[str, ...] = ()  # the trials' knobs as features (:class:`KnobColumns`)

    @property
    def ok(self) -> list[Trial]:
        return [t for t in self.trials if t.status == "ok"]


def _source_hash(mine: bool) -> str:
    """A hash of autotune's source: all of it (``mine``), or all but the cost model's own files
    (what lowering a trial depends on)."""
    own = ("features", "cost_model", "report/analysis", "cli/cost_model")
    h = hashlib.sha256()
    for path in sorted((REPO / "autotune").rglob("*.py")):
        rel = path.relative_to(REPO / "autotune").as_posix()
        if mine or not any(rel.startswith(o) or rel.startswith(f"search/{o}") for o in own):
            h.update(rel.encode() + b"\0" + path.read_bytes())
    return h.hexdigest()[:16]


FEATURE_MODULES = ("features_estimate", "features_roofline", "features_walk", "features")
"""The modules of :mod:`autotune.search` that compute features, each after those it imports."""


def _feature_source_hash() -> str:
    """A hash of what a trial's features depend on: the lowering code (:func:`_source_hash`) and
    the feature modules, not the model's."""
    h = hashlib.sha256(_source_hash(False).encode())
    for name in (*FEATURE_MODULES, "cost_model_train"):
        h.update((REPO / "autotune" / "search" / f"{name}.py").read_bytes())
    return h.hexdigest()[:16]


def _lowered(path: Path, setup: ct.RunSetup, records: list[Any], cache: Path) -> dict[int, Any]:
    """``{trial: Lowered or None}``, from the pickle cache when the log and the lowering code are
    the same."""
    key = hashlib.sha256(path.read_bytes() + _source_hash(False).encode()).hexdigest()[:20]
    file = cache / f"lowered-{key}.pkl"
    if file.is_file():
        return pickle.loads(file.read_bytes())  # type: ignore[no-any-return]
    out = {r.trial: ct.lower_trial(setup, r.trace) for r in records}
    file.write_bytes(pickle.dumps(out, protocol=pickle.HIGHEST_PROTOCOL))
    return out


def _features_at(revision: str) -> Callable[..., dict[str, float]]:
    """:func:`autotune.search.features.features` as it was at ``revision``: its module and the
    estimate modules it imports (those of :data:`FEATURE_MODULES` that the revision has), read with
    ``git show`` and loaded next to the current ones, under other names (the rest of autotune is the
    current code)."""
    loaded: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for name in FEATURE_MODULES:
        path = f"{revision}:autotune/search/{name}.py"
        shown = subprocess.run(["git", "-C", str(REPO), "show", path], capture_output=True, text=True)
        if shown.returncode == 0:
            sources[name] = shown.stdout
    for name, source in sources.items():
        module_name = f"autotune.search._{name}_at_{revision[:12]}"
        for other in sources:
            source = source.replace(f"from .{other} import", f"from ._{other}_at_{revision[:12]} import")
        module = types.ModuleType(module_name)
        module.__package__ = "autotune.search"
        sys.modules[module_name] = module  # dataclasses look their module up there
        exec(compile(source, f"{revision[:12]}:autotune/search/{name}.py", "exec"), module.__dict__)
        loaded[name] = module
    return loaded["features"].features  # type: ignore[no-any-return]


def load_log(path: Path, cache: Path) -> Log:
    """A log's timed trials with their features (computed by the current code, or cached)."""
    label = path.parent.relative_to(REPO / "results").as_posix() if path.is_relative_to(REPO) else str(path)
    mine = inspect.getsource(load_log).encode()  # the fields cached
    key = hashlib.sha256(path.read_bytes() + _feature_source_hash().encode() + mine).hexdigest()[:20]
    file = cache / f"features-{key}.json"
    if file.is_file():
        doc = json.loads(file.read_text(encoding="utf-8"))
    else:
        setup = ct.run_setup(path)
        records = ct.timed_records(path)
        lowered = _lowered(path, setup, records, cache)
        trials, skipped = [], 0
        before = _features_at(BEFORE_REVISION)
        for r in records:
            low = lowered.get(r.trial)
            if low is None:
                skipped += 1
                continue
            x = ct.trial_features(setup, low)
            then = before(low.func, low.plan, original=setup.workload.func, target=setup.target)
            x.update({BEFORE + name: value for name, value in then.items()})
            spread = (
                noise(r.median_ms, r.min_ms, r.iqr_ms)
                if r.min_ms is not None and r.iqr_ms is not None
                else 0.0
            )
            trials.append(
                [r.trial, r.round, r.status, r.median_ms, r.predicted_ms, x, spread, r.min_ms, dict(r.knobs)]
            )
        doc = {"key": setup.key, "trials": trials, "skipped": skipped}
        file.write_text(json.dumps(doc), encoding="utf-8")
    trials = tuple(Trial(*t) for t in doc["trials"])
    columns = KnobColumns([t.knobs or {} for t in trials])
    for t in trials:
        t.features.update(columns(t.knobs or {}))
    return Log(label, doc["key"], trials, doc["skipped"], columns.names)


class KnobColumns:
    """A trial's knobs as feature columns (``knob:NAME`` its value for a knob whose values are
    numbers or flags, ``knob:NAME=VALUE`` 0 or 1 for each value of any other), AutoTVM's knob
    features, over the values ``seen`` in a log."""

    def __init__(self, seen: Sequence[dict[str, Any]]) -> None:
        values: dict[str, list[Any]] = {}
        for knobs in seen:
            for name, value in knobs.items():
                values.setdefault(name, [])
                if value not in values[name]:
                    values[name].append(value)
        self.numeric = {n for n, vs in values.items() if all(isinstance(v, (int, float)) for v in vs)}
        self.values = {n: values[n] for n in sorted(values)}
        self.names = tuple(
            f"knob:{n}" if n in self.numeric else f"knob:{n}={v}"
            for n, vs in self.values.items()
            for v in ([None] if n in self.numeric else vs)
        )

    def __call__(self, knobs: dict[str, Any]) -> dict[str, float]:
        out = {}
        for n in self.values:
            if n in self.numeric:
                out[f"knob:{n}"] = float(knobs.get(n, 0))
            else:
                out.update({f"knob:{n}={v}": float(knobs.get(n) == v) for v in self.values[n]})
        return out


def find_logs(patterns: Sequence[str]) -> list[Path]:
    """The ``trials.jsonl`` of the finished runs (with a ``best.json``) that the patterns name."""
    found: set[Path] = set()
    for pattern in patterns:
        p = Path(pattern)
        if p.is_dir():
            p = p / "trials.jsonl"
        found.update([p.resolve()] if p.is_file() else REPO.glob(pattern))
    return sorted(f for f in found if (f.parent / "best.json").is_file())


# ---------------------------------------------------------------- the models

ModelFactory = Callable[[int], CostModel]
Labels = Callable[[Sequence[Trial]], tuple[np.ndarray, np.ndarray | None]]
"""What a model is fitted on, from one log's timed trials: the latencies (ms) and each one's weight
(None: 1 each). Whatever is fitted, the predictions are scored against the measured medians."""


def median_labels(trials: Sequence[Trial]) -> tuple[np.ndarray, np.ndarray | None]:
    """The measured medians, each trial counting once (what the tuner fits)."""
    return np.asarray([t.median_ms for t in trials], dtype=float), None


def noise_weighted(trials: Sequence[Trial]) -> tuple[np.ndarray, np.ndarray | None]:
    """The medians; a trial whose timing is noisy (:data:`NOISY`) counts ``NOISY / noise``."""
    weights = [1.0 if t.noise <= NOISY else NOISY / t.noise for t in trials]
    return median_labels(trials)[0], np.asarray(weights, dtype=float)


def min_labels(trials: Sequence[Trial]) -> tuple[np.ndarray, np.ndarray | None]:
    """The fastest timed run of each trial (its median when the log has no minimum)."""
    return np.asarray([t.min_ms or t.median_ms for t in trials], dtype=float), None


def fast_weighted(power: float) -> Labels:
    """The medians, each trial counting ``(fastest / median) ** power`` (``fastest``: the least
    median among the trials fitted on): the fit leans on the fast schedules, where the search picks
    its candidates (MetaSchedule's model fits throughput over the fastest's, which does the same)."""

    def labels(trials: Sequence[Trial]) -> tuple[np.ndarray, np.ndarray | None]:
        y = median_labels(trials)[0]
        return y, (float(y.min()) / y) ** power if len(y) else None

    return labels


def cutoff_censored(trials: Sequence[Trial]) -> tuple[np.ndarray, np.ndarray | None]:
    """The medians, a ``cutoff`` trial's raised at least to the slowest ok trial among them
    (its median is of its first runs only: it was stopped because it was clearly slow)."""
    slowest = max((t.median_ms for t in trials if t.status == "ok"), default=0.0)
    y = [t.median_ms if t.status == "ok" else max(t.median_ms, slowest) for t in trials]
    return np.asarray(y, dtype=float), None


@dataclass(frozen=True)
class Variant:
    """A model, the features it sees and what it is fitted on."""

    make: ModelFactory
    names: tuple[str, ...]
    about: str
    labels: Labels = median_labels
    knobs: Settings | None = None
    """Also the log's knob columns (:class:`KnobColumns`), for a model of these settings."""

    def of(self, log: Log) -> Variant:
        """The variant as it fits ``log`` (with that log's knob columns, if it takes them)."""
        if self.knobs is None:
            return self
        names, settings = self.names + log.knob_columns, self.knobs
        make = lambda seed: XGBoostModel(seed=seed, settings=settings, features=names)  # noqa: E731
        return replace(self, make=make, names=names, knobs=None)


BEFORE_SETTINGS = Settings(
    objective="reg:squarederror", rounds=100, max_depth=2, eta=0.1, min_child_weight=1.0, max_bin=32,
    prior=BEFORE + "log2_estimate_ns", prior_weight=16.0, tree_trials=30.0, huber=1.0,
)  # fmt: skip
"""The model as it was at :data:`BEFORE_REVISION`: the estimate's line and 100 trees of depth 2."""
PAIRWISE = Settings(objective="rank:pairwise", max_depth=4, prior=None)
"""Pairwise ranking, 100 trees of depth 4, a line from scores to log latency."""


def _variant(settings: Settings, names: Sequence[str], about: str, labels: Labels = median_labels) -> Variant:
    make = lambda seed: XGBoostModel(seed=seed, settings=settings, features=names)  # noqa: E731
    return Variant(make, tuple(names), about, labels)


def _tuned(about: str, labels: Labels = median_labels, **changes: Any) -> Variant:
    """The current model with some of its settings changed."""
    return _variant(replace(XGBoostModel.SETTINGS, **changes), FEATURE_NAMES, about, labels)


def min_noise_weighted(trials: Sequence[Trial]) -> tuple[np.ndarray, np.ndarray | None]:
    """The fastest timed runs (:func:`min_labels`), weighted as :func:`noise_weighted`."""
    return min_labels(trials)[0], noise_weighted(trials)[1]


VARIANTS: dict[str, Variant] = {
    "before": _variant(
        BEFORE_SETTINGS, [BEFORE + n for n in BEFORE_NAMES],
        f"the model and its features as they were at commit {BEFORE_REVISION[:7]}",
    ),
    "rank_all": _variant(PAIRWISE, FEATURE_NAMES, "pairwise ranking on the current features"),
    "estimate_line": _variant(
        replace(XGBoostModel.SETTINGS, rounds=0), FEATURE_NAMES, "the estimate's line alone (no trees)"
    ),
    "trees_in_full": _variant(
        replace(XGBoostModel.SETTINGS, tree_trials=0.0), FEATURE_NAMES,
        "the current model with its trees counted in full from the first fit (no blend)",
    ),
    "no_prior": _variant(
        replace(XGBoostModel.SETTINGS, prior=None), FEATURE_NAMES, "the current model without the estimate's line"
    ),
    "rank_labels": _variant(
        replace(XGBoostModel.SETTINGS, labels="rank"), FEATURE_NAMES,
        "the current model fitted on each workload's ranks laid on a normal curve (`Settings.labels`)",
    ),
    "noise_weight": _variant(
        XGBoostModel.SETTINGS, FEATURE_NAMES,
        f"the current model, a trial timed noisily (spread above {NOISY:.0%}) weighing NOISY / spread",
        noise_weighted,
    ),
    "min_label": _variant(
        XGBoostModel.SETTINGS, FEATURE_NAMES, "the current model fitted on each trial's fastest timed run",
        min_labels,
    ),
    "cutoff_censored": _variant(
        XGBoostModel.SETTINGS, FEATURE_NAMES,
        "the current model, a cutoff trial's latency raised at least to the slowest ok trial's",
        cutoff_censored,
    ),
    "fast_weight_half": _variant(
        XGBoostModel.SETTINGS, FEATURE_NAMES,
        "the current model, each trial counting (fastest / median) ** 0.5", fast_weighted(0.5),
    ),
    "fast_weight1": _variant(
        XGBoostModel.SETTINGS, FEATURE_NAMES, "the current model, each trial counting fastest / median",
        fast_weighted(1.0),
    ),
    "depth3": _tuned("the current model with trees of depth 3", max_depth=3),
    "slow_eta": _tuned("the current model with 300 trees at eta 0.03", rounds=300, eta=0.03),
    "min_child4": _tuned("the current model with min_child_weight 4", min_child_weight=4.0),
    "tree_trials10": _tuned("the current model, trees counting n / (n + 10)", tree_trials=10.0),
    "tree_trials60": _tuned("the current model, trees counting n / (n + 60)", tree_trials=60.0),
    "prior_weight4": _tuned("the current model, the line's slope with a prior of 4 trials", prior_weight=4.0),
    "prior_weight64": _tuned("the current model, the line's slope with a prior of 64 trials", prior_weight=64.0),
    "prior_weight8": _tuned("the current model, the line's slope with a prior of 8 trials", prior_weight=8.0),
    "prior_weight2": _tuned("the current model, the line's slope with a prior of 2 trials", prior_weight=2.0),
    "tree_trials20": _tuned("the current model, trees counting n / (n + 20)", tree_trials=20.0),
    "huber_half": _tuned("the current model, pseudo-Huber slope 0.5", huber=0.5),
    "huber_off": _tuned("the current model, squared error and a mean intercept", huber=0.0),
    "min_noise_weight": _variant(
        XGBoostModel.SETTINGS, FEATURE_NAMES,
        "the current model fitted on each trial's fastest timed run, noisy trials weighing less",
        min_noise_weighted,
    ),
    "min_prior_weight4": _tuned(
        "the current model fitted on each trial's fastest timed run, the line's slope with a prior of 4 trials",
        min_labels, prior_weight=4.0,
    ),
    "knob_features": replace(
        _variant(
            XGBoostModel.SETTINGS, FEATURE_NAMES, "the current model, the trials' knobs as more features"
        ),
        knobs=XGBoostModel.SETTINGS,
    ),
    "after": _variant(XGBoostModel.SETTINGS, FEATURE_NAMES, "the current model (`XGBoostModel.SETTINGS`)"),
}  # fmt: skip


def _matrix(trials: Sequence[Trial], names: Sequence[str]) -> np.ndarray:
    return np.asarray([[t.features[n] for n in names] for t in trials], dtype=np.float64).reshape(
        len(trials), len(names)
    )


def prequential(log: Log, variant: Variant, seed: int = 0) -> dict[str, float] | None:
    """The tuner's loop replayed on one log: before each round a model fitted on the timed trials
    of the earlier rounds predicts the round's ok trials (kept when it gives milliseconds); scored
    by report.md's :func:`~autotune.report.analysis.cost_model_quality`."""
    import pandas as pd

    rows = []
    for r in sorted({t.round for t in log.ok}):
        seen = [t for t in log.trials if t.round < r]
        new = [t for t in log.ok if t.round == r]
        model = variant.make(seed)
        y, weights = variant.labels(seen)
        model.fit(_matrix(seen, variant.names), y, weights=weights)
        if model.ready and model.predicts_ms:
            predicted = model.predict(_matrix(new, variant.names))
        else:
            predicted = np.full(len(new), np.nan)
        rows += [
            {"status": "ok", "predicted_ms": p, "median_ms": t.median_ms} for t, p in zip(new, predicted)
        ]
    return cost_model_quality(pd.DataFrame(rows, columns=["status", "predicted_ms", "median_ms"]))


def logged(log: Log) -> dict[str, float] | None:
    """report.md's figure: :func:`cost_model_quality` on the predictions the run recorded."""
    import pandas as pd

    rows = [{"status": "ok", "predicted_ms": t.logged_ms, "median_ms": t.median_ms} for t in log.ok]
    df = pd.DataFrame(rows, columns=["status", "predicted_ms", "median_ms"])
    df["predicted_ms"] = pd.to_numeric(df["predicted_ms"])
    return cost_model_quality(df)


def leave_one_out(logs: Sequence[Log], index: int, variant: Variant, seed: int = 0) -> float:
    """Spearman of a model fitted on every log of another workload, on this log's ok trials."""
    target = logs[index]
    others = [log for log in logs if log.key != target.key]
    if not others or len(target.ok) < 3:
        return float("nan")
    X = np.concatenate([_matrix(log.trials, variant.names) for log in others])
    labels = [variant.labels(log.trials) for log in others]
    y = np.concatenate([y for y, _ in labels])
    weights = (
        None
        if all(w is None for _, w in labels)
        else np.concatenate([np.ones(len(y)) if w is None else w for y, w in labels])
    )
    groups = np.concatenate([np.full(len(log.trials), i) for i, log in enumerate(others)])
    model = variant.make(seed)
    model.fit(X, y, groups, weights=weights)
    return spearman(model.predict(_matrix(target.ok, variant.names)), [t.median_ms for t in target.ok])


def out_of_fold(log: Log, variant: Variant, seed: int = 0) -> dict[str, float] | None:
    """:func:`~autotune.search.cost_model_train.cross_validated` on the log's timed trials, for a
    variant fitted on the medians (None for the others)."""
    if variant.labels is not median_labels:
        return None
    y = np.asarray([t.median_ms for t in log.trials], dtype=np.float64)
    ok = np.asarray([t.status == "ok" for t in log.trials])
    return cross_validated(lambda: variant.make(seed), _matrix(log.trials, variant.names), y, ok, seed=seed)


def estimate_spearman(log: Log, steady: bool = False) -> float:
    """Spearman of the estimate alone over the log's ok trials (``steady``: those whose timing is
    not noisy)."""
    if "log2_estimate_ns" not in FEATURE_NAMES:
        return float("nan")
    trials = [t for t in log.ok if not steady or t.noise <= NOISY]
    return spearman([t.features["log2_estimate_ns"] for t in trials], [t.median_ms for t in trials])


def evaluate(logs: Sequence[Log], variants: Sequence[str], seed: int = 0) -> list[dict[str, Any]]:
    """One row per log: its figures for every variant."""
    out = []
    for i, log in enumerate(logs):
        row: dict[str, Any] = {
            "log": log.label, "workload": log.key, "ok": len(log.ok), "timed": len(log.trials),
            "skipped": log.skipped, "noisy": sum(t.noise > NOISY for t in log.ok),
            "logged": logged(log), "estimate": estimate_spearman(log),
            "estimate_steady": estimate_spearman(log, steady=True),
        }  # fmt: skip
        for name in variants:
            variant = VARIANTS[name].of(log)  # a log's knob columns mean nothing to another workload's
            others = float("nan") if VARIANTS[name].knobs else leave_one_out(logs, i, variant, seed)
            row[name] = {
                "prequential": prequential(log, variant, seed),
                "leave_one_out": others,
                "out_of_fold": out_of_fold(log, variant, seed),
            }
        out.append(row)
    return out


# ---------------------------------------------------------------- the report


def _f(value: float | None) -> str:
    return "-" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.2f}"


def _q(quality: dict[str, float] | None, key: str = "spearman") -> float | None:
    return None if quality is None else quality[key]


def table(rows: Sequence[dict[str, Any]], variants: Sequence[str]) -> list[str]:
    head = ["log", "workload", "ok", "skipped", "noisy timings", "logged (report.md)", "estimate alone",
            "estimate, steady trials"]  # fmt: skip
    for v in variants:
        head += [f"{v}: prequential (n)", f"{v}: top-k recall", f"{v}: leave one workload out", f"{v}: out of fold"]
    lines = ["| " + " | ".join(head) + " |", "| --- | --- | " + " | ".join("---:" for _ in head[2:]) + " |"]
    for row in rows:
        cells = [row["log"], row["workload"], str(row["ok"]), str(row["skipped"]), str(row["noisy"]),
                 _f(_q(row["logged"])), _f(row["estimate"]), _f(row["estimate_steady"])]  # fmt: skip
        for v in variants:
            pq = row[v]["prequential"]
            n = "" if pq is None else f" ({int(pq['trials'])})"
            cells += [_f(_q(pq)) + n, _f(_q(pq, "recall")), _f(row[v]["leave_one_out"]), _f(_q(row[v]["out_of_fold"]))]
        lines.append("| " + " | ".join(cells) + " |")
    summary = ["**median**", "", "", "", "", _f(_median([_q(r["logged"]) for r in rows])),
               _f(_median([r["estimate"] for r in rows])),
               _f(_median([r["estimate_steady"] for r in rows]))]  # fmt: skip
    for v in variants:
        pq = [_q(r[v]["prequential"]) for r in rows]
        summary += [
            f"{_f(_median(pq))} ({sum(1 for s in pq if s is not None and s >= 0.6)} of {len(rows)} >= 0.6)",
            _f(_median([_q(r[v]["prequential"], "recall") for r in rows])),
            _f(_median([r[v]["leave_one_out"] for r in rows])),
            _f(_median([_q(r[v]["out_of_fold"]) for r in rows])),
        ]
    lines.append("| " + " | ".join(summary) + " |")
    return lines


def before_after(rows: Sequence[dict[str, Any]], before: str = "before", after: str = "after") -> list[str]:
    """The prequential Spearman (report.md's figure) and leave-one-workload-out of two variants."""
    lines = [
        f"| log | {before}: prequential | {after}: prequential | {before}: leave one out | {after}: leave one out |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for row in rows:
        cells = [_f(_q(row[before]["prequential"])), _f(_q(row[after]["prequential"])),
                 _f(row[before]["leave_one_out"]), _f(row[after]["leave_one_out"])]  # fmt: skip
        lines.append(f"| {row['log']} | " + " | ".join(cells) + " |")
    columns = [[_q(r[v]["prequential"]) for r in rows] for v in (before, after)]
    columns += [[r[v]["leave_one_out"] for r in rows] for v in (before, after)]
    medians = [_f(_median(c)) for c in columns]
    counts = [f"{sum(1 for x in c if x is not None and x >= 0.6)} of {len(rows)}" for c in columns]
    lines.append("| **median** | " + " | ".join(medians) + " |")
    lines.append("| **at or above 0.6** | " + " | ".join(counts) + " |")
    return lines


def summary(rows: Sequence[dict[str, Any]], variants: Sequence[str], base: str = "after") -> list[str]:
    """Per variant: the medians and means over the logs, the logs at or above 0.6, and on how many
    logs its prequential Spearman is above or below ``base``'s (a median can move with the few
    logs near it; these counts say whether most logs moved)."""
    lines = [
        f"| variant | prequential: median | mean | at or above 0.6 | logs above / below {base} "
        "| leave one out: median | mean | at or above 0.6 | out of fold: median | at or above 0.6 |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for v in variants:
        pq = [_q(r[v]["prequential"]) for r in rows]
        loo = [r[v]["leave_one_out"] for r in rows]
        oof = [_q(r[v]["out_of_fold"]) for r in rows]
        pairs = [(a, _q(r[base]["prequential"])) for a, r in zip(pq, rows) if base in r]
        pairs = [(a, b) for a, b in pairs if a is not None and b is not None]
        above, below = sum(a > b + 1e-9 for a, b in pairs), sum(a < b - 1e-9 for a, b in pairs)
        cells = [_f(_median(pq)), _f(_mean(pq)), _count(pq), f"{above} / {below}" if base in rows[0] else "-",
                 _f(_median(loo)), _f(_mean(loo)), _count(loo), _f(_median(oof)), _count(oof)]  # fmt: skip
        lines.append(f"| `{v}` | " + " | ".join(cells) + " |")
    return lines


def _count(values: Sequence[float | None]) -> str:
    return f"{sum(1 for v in values if v is not None and v >= 0.6)} of {len(values)}"


def _mean(values: Sequence[float | None]) -> float | None:
    kept = [v for v in values if v is not None and not math.isnan(v)]
    return float(np.mean(kept)) if kept else None


def _median(values: Sequence[float | None]) -> float | None:
    kept = [v for v in values if v is not None and not math.isnan(v)]
    return float(np.median(kept)) if kept else None


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--logs", nargs="+", default=list(LOG_GLOBS), metavar="GLOB")
    parser.add_argument("--variants", nargs="+", default=["before", "after"], choices=sorted(VARIANTS))
    parser.add_argument(
        "--cache", type=Path, default=Path(tempfile.gettempdir()) / "autotune-cost-model-heldout"
    )
    parser.add_argument("--output", type=Path, default=REPO / "results")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    args.cache.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    logs = []
    for path in find_logs(args.logs):
        t0 = time.perf_counter()
        log = load_log(path, args.cache)
        print(f"{log.label}: {len(log.ok)} ok, {len(log.trials)} timed, {log.skipped} skipped "
              f"({time.perf_counter() - t0:.1f} s)", flush=True)  # fmt: skip
        if len(log.ok) >= MIN_OK:
            logs.append(log)
    rows = evaluate(logs, args.variants, args.seed)
    host = machine()
    command = "cd /work/main && .venv/bin/python experiments/cost_model_heldout.py " + shlex.join(
        sys.argv[1:] if argv is None else list(argv)
    )
    date = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    isa = "AVX-512" if "avx512f" in host["isa"] else "AVX2"
    md = [
        "# Cost model on held-out trials, offline", "",
        f"`{command.strip()}`, {date}. {host['cpu']} (LLVM cpu {host['llvm_cpu']}, {isa}), "
        f"{host['usable_cores']} cores; {time.perf_counter() - start:.0f} s.", "",
        "Each log's timed trials replayed, lowered and featurised by the current code. *prequential*: "
        "before each round, a model fitted on the earlier rounds' timed trials predicts the round's ok "
        "trials, kept when it predicts milliseconds (as the tuner records them); Spearman of predicted "
        "and measured latency by report.md's function (`autotune.report.analysis.cost_model_quality`), "
        "(n) the trials predicted. *leave one workload out*: fitted on the logs of every other "
        "workload. *logged*: report.md's figure from the run's recorded predictions. *estimate alone*: "
        "Spearman of the analytic estimate (`log2_estimate_ns`) over all ok trials. *noisy timings*: "
        f"ok trials whose timed runs spread more than {NOISY:.0%} of their median; *estimate, steady "
        "trials*: the estimate alone over the others.", "",
        *(f"- `{name}`: {VARIANTS[name].about} ({len(VARIANTS[name].names)} features)" for name in args.variants),
        "", *([*before_after(rows), ""] if {"before", "after"} <= set(args.variants) else []),
        "Each variant over the logs:", "", *(summary(rows, args.variants) if rows else []), "",
        "Every variant:", "", *table(rows, args.variants), "",
    ]  # fmt: skip
    payload = {"command": command, "date": date, "machine": host, "variants": args.variants, "logs": rows}
    args.output.mkdir(parents=True, exist_ok=True)
    (args.output / "cost_model_heldout.md").write_text("\n".join(md), encoding="utf-8")
    (args.output / "cost_model_heldout.json").write_text(json.dumps(payload, indent=1), encoding="utf-8")
    print("\n".join(md))
    return 0


if __name__ == "__main__":
    sys.exit(main())
