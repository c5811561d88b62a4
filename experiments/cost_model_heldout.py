"""How well the cost model ranks trials it has not seen, judged offline on the logs of earlier runs.

    .venv/bin/python experiments/cost_model_heldout.py [--logs results/generality/mlp ...]
        [--variants before after] [--cache DIR] [--output results]

Every log of a finished run (one with a ``best.json``) under ``results/builtins_64/*``,
``results/generality/*`` and ``results/sample_efficiency_runs/**`` (or ``--logs``) is read with the
current code: each timed trial (``ok`` or ``cutoff``: what the tuner
fits its model on) is replayed on the run's workload, lowered with its pools, planner and seed as
the tuner lowered it, and turned into features (:mod:`autotune.search.cost_model_train`). Lowered
programs and features are cached under ``--cache`` (keyed by the log's bytes and the source of
the code that computes them), so a rerun after a change to the features or the model takes
seconds. A trial whose trace no longer replays is counted as skipped.

Per log and per model variant (``VARIANTS``: ``before``, the model and its features as they were at
commit :data:`BEFORE_REVISION` (``features.py`` and ``features_estimate.py`` of that commit, read
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
- *estimate*: Spearman of the analytic estimate alone (feature ``log2_estimate_ns``), no learning.
- *noisy timings*: the ok trials whose timed runs spread more than :data:`NOISY` of their median
  (:func:`autotune.measure.timing.noise`): a descheduled time slice, or a busy machine. No feature
  of the program predicts them; *estimate, steady trials*: the estimate alone over the others.

Writes ``<output>/cost_model_heldout.md`` and ``.json``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
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
from autotune.search.features import FEATURE_NAMES  # noqa: E402
from autotune.search.rank_scores import spearman  # noqa: E402
from autotune.search.records import machine  # noqa: E402

LOG_GLOBS = (
    "results/builtins_64/*/trials.jsonl",
    "results/generality/*/trials.jsonl",
    "results/sample_efficiency_runs/**/trials.jsonl",
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


@dataclass(frozen=True)
class Log:
    label: str  # the log's directory under results/
    key: str  # the workload (leave-one-workload-out leaves out every log with this key)
    trials: tuple[Trial, ...]
    skipped: int

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
    """:func:`autotune.search.features.features` as it was at ``revision``: its module and
    ``features_estimate`` read with ``git show`` and loaded next to the current ones, under other
    names (the rest of autotune is the current code)."""
    loaded: dict[str, Any] = {}
    for name in ("features_estimate", "features"):
        source = subprocess.run(
            ["git", "-C", str(REPO), "show", f"{revision}:autotune/search/{name}.py"],
            capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip
        module_name = f"autotune.search._{name}_at_{revision[:12]}"
        source = source.replace(
            "from .features_estimate import", f"from ._features_estimate_at_{revision[:12]} import"
        )
        module = types.ModuleType(module_name)
        module.__package__ = "autotune.search"
        sys.modules[module_name] = module  # dataclasses look their module up there
        exec(compile(source, f"{revision[:12]}:autotune/search/{name}.py", "exec"), module.__dict__)
        loaded[name] = module
    return loaded["features"].features  # type: ignore[no-any-return]


def load_log(path: Path, cache: Path) -> Log:
    """A log's timed trials with their features (computed by the current code, or cached)."""
    label = path.parent.relative_to(REPO / "results").as_posix() if path.is_relative_to(REPO) else str(path)
    mine = Path(__file__).read_bytes()  # the fields cached
    key = hashlib.sha256(path.read_bytes() + _source_hash(True).encode() + mine).hexdigest()[:20]
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
            trials.append([r.trial, r.round, r.status, r.median_ms, r.predicted_ms, x, spread])
        doc = {"key": setup.key, "trials": trials, "skipped": skipped}
        file.write_text(json.dumps(doc), encoding="utf-8")
    trials = tuple(Trial(*t) for t in doc["trials"])
    return Log(label, doc["key"], trials, doc["skipped"])


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


@dataclass(frozen=True)
class Variant:
    """A model and the features it sees."""

    make: ModelFactory
    names: tuple[str, ...]
    about: str


BEFORE_SETTINGS = Settings(
    objective="reg:squarederror", rounds=100, max_depth=2, eta=0.1, min_child_weight=1.0, max_bin=32,
    prior=BEFORE + "log2_estimate_ns", prior_weight=16.0, tree_trials=30.0, huber=1.0,
)  # fmt: skip
"""The model as it was at :data:`BEFORE_REVISION`: the estimate's line and 100 trees of depth 2."""
PAIRWISE = Settings(objective="rank:pairwise", max_depth=4, prior=None)
"""Pairwise ranking, 100 trees of depth 4, a line from scores to log latency."""


def _variant(settings: Settings, names: Sequence[str], about: str) -> Variant:
    make = lambda seed: XGBoostModel(seed=seed, settings=settings, features=names)  # noqa: E731
    return Variant(make, tuple(names), about)


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
        model.fit(_matrix(seen, variant.names), np.asarray([t.median_ms for t in seen], dtype=float))
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
    y = np.concatenate([[t.median_ms for t in log.trials] for log in others])
    groups = np.concatenate([np.full(len(log.trials), i) for i, log in enumerate(others)])
    model = variant.make(seed)
    model.fit(X, y, groups)
    return spearman(model.predict(_matrix(target.ok, variant.names)), [t.median_ms for t in target.ok])


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
            row[name] = {
                "prequential": prequential(log, VARIANTS[name], seed),
                "leave_one_out": leave_one_out(logs, i, VARIANTS[name], seed),
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
        head += [f"{v}: prequential (n)", f"{v}: top-k recall", f"{v}: leave one workload out"]
    lines = ["| " + " | ".join(head) + " |", "| --- | --- | " + " | ".join("---:" for _ in head[2:]) + " |"]
    for row in rows:
        cells = [row["log"], row["workload"], str(row["ok"]), str(row["skipped"]), str(row["noisy"]),
                 _f(_q(row["logged"])), _f(row["estimate"]), _f(row["estimate_steady"])]  # fmt: skip
        for v in variants:
            pq = row[v]["prequential"]
            n = "" if pq is None else f" ({int(pq['trials'])})"
            cells += [_f(_q(pq)) + n, _f(_q(pq, "recall")), _f(row[v]["leave_one_out"])]
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
