"""Search strategies compared on a surrogate of this host's timings: many seeds, no kernel timed.

    .venv/bin/python experiments/surrogate_search.py WORKLOAD --data RUNS_DIR [RUNS_DIR ...]
        [--arm NAME[:MODULE.ATTR=VALUE,...] ...] [--seeds 0 1 ...] [--trials 64] [--noise 0.05]
        [--jobs 2] [--output results/surrogate_search]

A real comparison of two search settings (``experiments/sample_efficiency.py``) times every
candidate on the shared host, whose noise moves a 5% verdict (its referee's rounds agree by
0.7-0.9), and takes half an hour for 6 seeds of one workload. Here the timings come from a
*surrogate*: boosted trees fitted on the knobs of every schedule timed on this host for
``WORKLOAD`` (the ``ok`` trials of the runs under each ``RUNS_DIR/WORKLOAD``, each run's latencies
shifted by its own offset, since runs on different evenings differ by a factor; the referee's
medians, where a run directory has a ``referee.json``, anchor the scale). Everything else is the
tuner's: each simulated run is ``autotune.search.tuner.tune`` on the workload's config with the
settings of ``sample_efficiency.py`` (batch 64, 8 measured per round, the strategy
``evolutionary`` with the XGBoost model), whose proposals are applied, lowered (infeasible ones
are the real ones) and ranked by its cost model on the lowered program's features; only the
executor is replaced: a schedule's median is the surrogate's value of its knobs (read from its
trace's sample steps) times ``exp(N(0, noise))``, and one whose time is over the task's cutoff is
``cutoff``. The cost model sees features of the lowered program and the surrogate is a function
of the knobs, so the model has to learn the surrogate as it learns the host, from the trials.

An *arm* is a name and the settings of its runs, comma-separated (``--arm default`` sets nothing):

- ``MODULE.ATTR=VALUE``: a module attribute set to a Python literal before the run
  (``autotune.search.strategies.evolutionary.SCORED_RANDOM=4.0``);
- ``search.FIELD=VALUE``: a field of the run's ``search`` config (``search.epsilon=0.5``);
- ``model.FIELD=VALUE``: a field of the XGBoost model's default ``Settings`` (``model.tree_trials=0.0``);
- ``oracle``: the cost model replaced by the surrogate itself (:class:`Oracle`), so that what is
  left of a miss is the proposals'.

Each run is a process of its own (``--jobs`` at once). Per run: the true (noise-free) value of the
schedule the run would report after ``n`` measured trials (its fastest measured median so far), and of the
best after its end's re-measure. The best known is the least true value of every schedule any
run of this invocation measured and every schedule of the data. Per arm: the runs whose choice
came within 5% of it within ``--trials`` trials, the mean trials to get there (a run that did
not counts ``trials + 1``), and the final choice's true value over the best known (geometric
mean and worst). The surrogate's own fidelity, 4-fold out of fold over the data, is printed,
over all and over the fastest quarter: a comparison here says which search finds the
surrogate's fast schedules, and where the surrogate orders the fastest quarter poorly (data of
kernels so short that the host's noise is most of their differences) it says little; a setting
that wins here is then confirmed by ``sample_efficiency.py`` on the host.

Writes ``<output>/<workload>.md`` and ``.json`` (runs under ``<output>/runs``, the surrogate's trees in
``<output>/surrogate.ubj``).
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import importlib
import json
import math
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "experiments"))

from model_reach import run_config, space_path  # noqa: E402
from sample_efficiency import WITHIN, configure  # noqa: E402
from sample_efficiency import referee_medians as referee_verdict  # noqa: E402

from autotune.measure.result import MeasureResult  # noqa: E402
from autotune.measure.task import MeasureTask  # noqa: E402
from autotune.search import cost_model_train as ct  # noqa: E402
from autotune.search.cost_model import CostModel  # noqa: E402
from autotune.search.executors import Executor  # noqa: E402
from autotune.search.log import load  # noqa: E402
from autotune.search.rank_scores import spearman  # noqa: E402
from autotune.search.records import trace_key  # noqa: E402
from autotune.search.space import Knob, SearchSpace, load_space  # noqa: E402

SURROGATE = {
    "objective": "reg:squarederror", "max_depth": 6, "eta": 0.05, "min_child_weight": 1.0,
    "subsample": 0.9, "tree_method": "exact", "nthread": 1, "verbosity": 0, "seed": 0,
}  # fmt: skip
"""The surrogate's trees (deeper than the cost model's: it has every run's trials to fit)."""
SURROGATE_ROUNDS = 400
OFFSET_PASSES = 3
"""Fits alternating with each run's offset (its median residual) before the last fit."""
FOLDS = 4


# ---------------------------------------------------------------- the surrogate


def decisions(trace: str, space: SearchSpace) -> dict[str, Any]:
    """The knobs of a schedule from its trace's ``sample`` steps; a knob without one (inactive, or
    fixed by the space) at its default, a fixed one at its value."""
    out: dict[str, Any] = {k.name: k.choices[0] for k in space.knobs}
    out.update(dict(space.fixed))
    for step in json.loads(trace).get("steps", []):
        if step.get("op") == "sample":
            out[step["args"]["name"]] = step["args"]["decision"]
    return out


@dataclass(frozen=True)
class Encoder:
    """Knobs to a row of numbers: a numeric knob its value, a flag 0 or 1, any other one column
    per choice (one-hot)."""

    knobs: tuple[Knob, ...]

    def columns(self) -> Iterator[tuple[Knob, Any]]:
        for k in self.knobs:
            if _numeric(k):
                yield k, None
            else:
                yield from ((k, c) for c in k.choices)

    def row(self, values: Mapping[str, Any]) -> list[float]:
        out: list[float] = []
        for knob, choice in self.columns():
            v = values.get(knob.name, knob.choices[0])
            out.append(float(v) if choice is None else float(v == choice and type(v) is type(choice)))
        return out


def _numeric(knob: Knob) -> bool:
    return all(isinstance(c, (int, float)) for c in knob.choices)  # a bool is an int: 0 or 1


@dataclass
class Data:
    """The timed schedules of the data: knobs, log latency, and the run (offset group) of each."""

    rows: list[list[float]]
    log_ms: list[float]
    group: list[int]
    groups: list[str]
    """Each group's source: the referee (group 0), then each run's directory."""


def data_of(run_dirs: Sequence[Path], space: SearchSpace, encoder: Encoder) -> Data:
    """Every ``ok`` trial of the runs under ``run_dirs`` (each a workload's directory of runs) whose
    knobs the space still has, and the referee's medians (group 0, the anchor)."""
    data = Data([], [], [], ["referee"])
    names = {k.name for k in space.knobs} | {n for n, _ in space.fixed}
    knobs_of: dict[str, dict[str, Any]] = {}
    for wl_dir in run_dirs:
        for log in sorted(wl_dir.glob("*/trials.jsonl")):
            group = len(data.groups)
            data.groups.append(str(log.parent))
            for r in load(log):
                given = dict(r.knobs)
                if not r.ok or r.median_ms is None or not set(given) <= names:
                    continue
                knobs = {**dict(space.fixed), **given}
                knobs_of[r.key] = knobs
                data.rows.append(encoder.row(knobs))
                data.log_ms.append(math.log(r.median_ms))
                data.group.append(group)
    for wl_dir in run_dirs:
        ref = wl_dir / "referee.json"
        if not ref.is_file():
            continue
        medians, _ = referee_verdict(json.loads(ref.read_text(encoding="utf-8")))
        for key, ms in medians.items():
            if ms is not None and key in knobs_of:
                data.rows.append(encoder.row(knobs_of[key]))
                data.log_ms.append(math.log(ms))
                data.group.append(0)
    if not data.rows:
        raise SystemExit(f"no ok trial of this space under {', '.join(map(str, run_dirs))}")
    return data


class Surrogate:
    """Log latency from knobs: trees fitted with an offset per run (see the module docstring).
    Fitted once per invocation and saved; each run's process loads it."""

    def __init__(self, booster: Any, offset: np.ndarray) -> None:
        self.booster, self.offset = booster, offset

    @classmethod
    def fit(cls, X: np.ndarray, z: np.ndarray, group: np.ndarray) -> Surrogate:
        import xgboost

        offset = np.zeros(int(group.max()) + 1)
        for _ in range(OFFSET_PASSES):
            data = xgboost.DMatrix(X, label=z - offset[group], nthread=1)
            model = cls(xgboost.train(SURROGATE, data, num_boost_round=SURROGATE_ROUNDS), offset)
            residual = z - model._raw(X)
            for g in range(1, len(offset)):  # group 0 (the referee) is the scale
                mask = group == g
                if mask.any():
                    offset[g] = float(np.median(residual[mask]))
        return model

    @classmethod
    def load(cls, path: str) -> Surrogate:
        """The trees :meth:`save` wrote (the offsets, which only the fit needs, are not kept)."""
        import xgboost

        booster = xgboost.Booster()
        booster.load_model(path)
        return cls(booster, np.zeros(1))

    def save(self, path: Path) -> None:
        self.booster.save_model(str(path))

    def _raw(self, X: np.ndarray) -> np.ndarray:
        import xgboost

        return np.asarray(self.booster.predict(xgboost.DMatrix(X, nthread=1)), dtype=np.float64)

    def ms(self, X: np.ndarray) -> np.ndarray:
        return np.exp(self._raw(X))


def fidelity(data: Data, full: Surrogate) -> dict[str, float]:
    """Spearman of out-of-fold surrogate values against the data, over all rows and over the
    fastest quarter of them (offsets removed as ``full``, fitted on all rows, fitted them)."""
    X, z, g = np.asarray(data.rows), np.asarray(data.log_ms), np.asarray(data.group)
    zz = z - full.offset[g]
    order = np.random.default_rng(0).permutation(len(z))
    pred = np.empty(len(z))
    for f in range(FOLDS):
        held = order[f::FOLDS]
        kept = np.setdiff1d(order, held)
        pred[held] = np.log(Surrogate.fit(X[kept], z[kept], g[kept]).ms(X[held]))
    fast = zz <= np.quantile(zz, 0.25)
    return {
        "rows": len(z),
        "spearman": spearman(pred, zz),
        "spearman_fastest_quarter": spearman(pred[fast], zz[fast]),
    }


# ---------------------------------------------------------------- one simulated run


class SurrogateExecutor(Executor):
    """Times a task by the surrogate's value of its knobs, with noise (see the module docstring);
    remembers each schedule's true value by trace key."""

    name, workers = "surrogate", 1

    def __init__(
        self, space: SearchSpace, encoder: Encoder, surrogate: Surrogate, noise: float, seed: int
    ) -> None:
        self.space, self.encoder, self.surrogate, self.noise = space, encoder, surrogate, noise
        self.rng = np.random.default_rng(seed)
        self.truth: dict[str, float] = {}

    def true_ms(self, task: MeasureTask) -> float:
        key = trace_key(task.trace)
        if key not in self.truth:
            row = np.asarray([self.encoder.row(decisions(task.trace, self.space))])
            self.truth[key] = float(self.surrogate.ms(row)[0])
        return self.truth[key]

    def _result(self, task: MeasureTask) -> MeasureResult:
        ms = self.true_ms(task) * math.exp(self.rng.normal(0.0, self.noise))
        if task.cutoff_ms is not None and ms > task.cutoff_ms:
            return MeasureResult(
                "cutoff", 0.0, ms, ms, 0.0, 3, compile_s=0.0, workspace_bytes=0, error="over the cutoff"
            )
        return MeasureResult("ok", 0.0, ms, ms, 0.0, 10, compile_s=0.0, workspace_bytes=0)

    def run(self, tasks: Sequence[MeasureTask]) -> Iterator[tuple[int, MeasureResult, str]]:
        yield from ((i, self._result(t), "surrogate") for i, t in enumerate(tasks))

    def remeasure(self, tasks: Sequence[MeasureTask], rounds: int) -> list[list[MeasureResult]]:
        return [[self._result(t) for _ in range(rounds)] for t in tasks]

    def close(self) -> None:
        pass


class Oracle(CostModel):
    """The surrogate's noise-free value as the cost model's prediction (the arm setting ``oracle``):
    what the search finds when its model is right, so that a miss is the proposals' and not the
    model's. It knows a row by the knobs :class:`~autotune.search.prepared.Prepared` lowered it for."""

    name = "oracle"

    def __init__(self, space: SearchSpace, encoder: Encoder, surrogate: Surrogate) -> None:
        super().__init__(0)
        self.space, self.encoder, self.surrogate = space, encoder, surrogate
        self.value: dict[tuple[float, ...], float] = {}

    def fit(self, X: Any, y: Any, groups: Any = None, weights: Any = None) -> None:
        pass

    def predict(self, X: np.ndarray) -> np.ndarray:
        return np.asarray([self.value.get(tuple(row), np.inf) for row in np.asarray(X)], dtype=np.float64)

    @property
    def ready(self) -> bool:
        return True

    @property
    def predicts_ms(self) -> bool:
        return True

    def install(self) -> None:
        """Record the value of every row the run lowers, and give the tuner this model."""
        from autotune.search import prepared, tuner

        lower = prepared.Prepared.prepare

        def prepare(this: Any, knobs: Any, key: str, sch: Any, trace: Any) -> Any:
            out = lower(this, knobs, key, sch, trace)
            if isinstance(out, prepared.Fit):
                row = np.asarray([self.encoder.row({**dict(self.space.fixed), **dict(knobs)})])
                self.value[tuple(np.asarray(out.row, dtype=np.float64))] = float(self.surrogate.ms(row)[0])
            return out

        prepared.Prepared.prepare = prepare  # type: ignore[method-assign]
        tuner.make_cost_model = lambda *args, **kwargs: self  # type: ignore[attr-defined]


def set_attributes(settings: Sequence[str]) -> None:
    """``MODULE.ATTR=VALUE`` each: the attribute set to the Python literal ``VALUE``;
    ``model.FIELD=VALUE``: a field of the XGBoost model's default
    :class:`~autotune.search.cost_model.Settings` (``oracle`` and ``search.FIELD=VALUE`` are the
    caller's: :func:`prefixed`)."""
    from autotune.search.cost_model import XGBoostModel

    model = prefixed(settings, "model.")
    if model:
        XGBoostModel.SETTINGS = dataclasses.replace(XGBoostModel.SETTINGS, **model)
    for setting in settings:
        if setting == "oracle" or setting.startswith(("search.", "model.")):
            continue
        target, _, value = setting.partition("=")
        module, _, attr = target.rpartition(".")
        mod = importlib.import_module(module)
        if not hasattr(mod, attr):
            raise SystemExit(f"--arm: {module} has no attribute {attr!r}")
        setattr(mod, attr, ast.literal_eval(value))


def prefixed(settings: Sequence[str], prefix: str) -> dict[str, Any]:
    """``{FIELD: VALUE}`` of an arm's ``PREFIX.FIELD=VALUE`` settings (``search.``: fields of the
    run's search config; ``model.``: of the XGBoost model's default settings)."""
    out = {}
    for setting in settings:
        if setting.startswith(prefix):
            field, _, value = setting.removeprefix(prefix).partition("=")
            out[field] = ast.literal_eval(value)
    return out


def one_run(spec: dict[str, Any]) -> dict[str, Any]:
    """One simulated run (in its own process): its choice's true value after each measured trial."""
    from autotune.search.tuner import tune

    set_attributes(spec["settings"])
    run_dirs = [Path(d) for d in spec["data"]]
    space = data_space(run_dirs)
    encoder = Encoder(space.knobs)
    surrogate = Surrogate.load(spec["surrogate"])
    args = argparse.Namespace(runs=Path(spec["runs"]), trials=spec["trials"], workers=1, epsilon=None)
    cfg = configure(spec["workload"], "evolutionary", spec["seed"], args, None)
    cfg = dataclasses.replace(
        cfg, search=dataclasses.replace(cfg.search, **prefixed(spec["settings"], "search."))
    )
    if cfg.output.exists():
        import shutil

        shutil.rmtree(cfg.output)
    if "oracle" in spec["settings"]:
        Oracle(space, encoder, surrogate).install()
    executor = SurrogateExecutor(space, encoder, surrogate, spec["noise"], spec["seed"])
    start = time.perf_counter()
    result = tune(cfg, progress=False, executor=executor)
    search_s = result.driver.total_s if result.driver else None
    records = sorted(load(cfg.output / "trials.jsonl"), key=lambda r: r.trial)
    curve: list[float | None] = []
    best: tuple[float, str] | None = None
    for r in records:
        if r.status == "infeasible":
            continue
        if r.ok and r.median_ms is not None and (best is None or r.median_ms < best[0]):
            best = (r.median_ms, r.key)
        curve.append(None if best is None else executor.truth[best[1]])
    final = json.loads((cfg.output / "best.json").read_text(encoding="utf-8"))
    final_key = final.get("key")
    return {
        "arm": spec["arm"], "seed": spec["seed"], "curve": curve,
        "final_ms": executor.truth.get(final_key) if final_key else None,
        "measured_best_ms": min(executor.truth.values()), "data_best_ms": spec["data_best_ms"],
        "search_s": search_s, "wall_s": time.perf_counter() - start,
        "model_spearman": ((final.get("cost_model") or {}).get("cross_validated") or {}).get("spearman"),
    }  # fmt: skip


def data_space(run_dirs: Sequence[Path]) -> SearchSpace:
    """The space of the first run of the data (its workload, pools and target)."""
    run = next(run_dirs[0].glob("*/trials.jsonl")).parent
    setup = ct.run_setup(run)
    return load_space(space_path(run_config(run)["search.space"]), setup.workload, setup.pools, setup.target)


# ---------------------------------------------------------------- the comparison


def parse_arm(text: str) -> tuple[str, list[str]]:
    name, _, settings = text.partition(":")
    return name, [s for s in settings.split(",") if s]


def launch(spec: dict[str, Any], log_dir: Path) -> dict[str, Any]:
    log = log_dir / f"{spec['arm']}-s{spec['seed']}.log"
    proc = subprocess.run(
        [sys.executable, __file__, "--one", json.dumps(spec)], capture_output=True, text=True, check=False
    )
    log.write_text(proc.stderr, encoding="utf-8")
    if proc.returncode != 0:
        raise SystemExit(f"run {spec['arm']} seed {spec['seed']} failed (see {log}):\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def trials_to(curve: Sequence[float | None], target: float) -> int | None:
    return next((i + 1 for i, v in enumerate(curve) if v is not None and v <= target), None)


def summarise(runs: list[dict[str, Any]], arms: list[str], trials: int) -> dict[str, Any]:
    best = min(min(r["measured_best_ms"], r["data_best_ms"]) for r in runs)
    target = WITHIN * best
    out: dict[str, Any] = {"best_ms": best, "arms": {}}
    for arm in arms:
        mine = [r for r in runs if r["arm"] == arm]
        to = [trials_to(r["curve"][:trials], target) for r in mine]
        finals = [r["final_ms"] / best for r in mine if r["final_ms"] is not None]
        out["arms"][arm] = {
            "runs": len(mine),
            "within": sum(t is not None for t in to),
            "mean_trials": statistics.mean(trials + 1 if t is None else t for t in to),
            "final_geomean": math.exp(statistics.mean(math.log(f) for f in finals)) if finals else None,
            "final_worst": max(finals) if finals else None,
            "search_s_max": max(r["search_s"] or 0.0 for r in mine),
            "model_spearman": _median([r.get("model_spearman") for r in mine]),
            "per_seed": {
                r["seed"]: {"trials_to": t, "final": r["final_ms"] / best} for r, t in zip(mine, to)
            },
        }
    return out


def _median(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None and math.isfinite(v)]
    return statistics.median(known) if known else None


def data_host(run_dirs: Sequence[Path]) -> str:
    """The LLVM cpu and cores the data's runs were tuned on (each distinct one)."""
    hosts = set()
    for best in sorted(d for wl in run_dirs for d in wl.glob("*/best.json")):
        target = json.loads(best.read_text(encoding="utf-8")).get("target") or {}
        hosts.add(f"LLVM cpu `{target.get('llvm_cpu', '?')}`, {target.get('cores', '?')} cores")
    return "; ".join(sorted(hosts)) or "unknown"


def markdown(
    wl: str,
    summary: dict[str, Any],
    fid: dict[str, float],
    argv: Sequence[str],
    arms: dict[str, list[str]],
    host: str,
) -> str:
    lines = [
        f"# Search settings on a surrogate of the host: {wl}",
        "",
        "`" + " ".join([".venv/bin/python", "experiments/surrogate_search.py", *argv]) + "`",
        "",
        f"Surrogate: {fid['rows']} schedules timed on {host}; out of fold Spearman "
        f"{fid['spearman']:.2f} over all, {fid['spearman_fastest_quarter']:.2f} over the fastest quarter. "
        f"Best known: {summary['best_ms']:.4f} ms (true value). Nothing was timed: see the script's "
        "docstring.",
        "",
        "*model*: the median over the arm's runs of its cost model's out of fold Spearman on the"
        " run's trials (best.json's, the figure a run on the host reports beside it).",
        "",
        "| arm | settings | within 5% | mean trials | final / best (geomean) | worst | search s (max) "
        "| model |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for arm, s in summary["arms"].items():
        settings = ", ".join(f"`{x}`" for x in arms[arm]) or "(defaults)"
        lines.append(
            f"| {arm} | {settings} | {s['within']}/{s['runs']} | {s['mean_trials']:.1f} | "
            f"{s['final_geomean']:.3f} | {s['final_worst']:.3f} | {s['search_s_max']:.0f} | "
            + ("-" if s["model_spearman"] is None else f"{s['model_spearman']:.2f}")
            + " |"
        )
    lines += ["", "Per seed (trials to 5%, `-`: not within the trials; final / best):", ""]
    for arm, s in summary["arms"].items():
        cells = [
            f"s{seed}: {'-' if v['trials_to'] is None else v['trials_to']} / {v['final']:.3f}"
            for seed, v in sorted(s["per_seed"].items())
        ]
        lines.append(f"- {arm}: " + "; ".join(cells))
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--one"]:
        print(json.dumps(one_run(json.loads(argv[1]))))
        return 0
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("workload")
    p.add_argument("--data", nargs="+", type=Path, required=True, metavar="RUNS_DIR")
    p.add_argument("--arm", action="append", default=None, metavar="NAME[:MODULE.ATTR=VALUE,...]")
    p.add_argument("--seeds", nargs="+", type=int, default=list(range(12)))
    p.add_argument("--trials", type=int, default=64)
    p.add_argument("--noise", type=float, default=0.05)
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--output", type=Path, default=REPO / "results" / "surrogate_search")
    args = p.parse_args(argv)
    arms = dict(parse_arm(a) for a in (args.arm or ["default"]))
    run_dirs = [(d / args.workload).resolve() for d in args.data]
    missing = [str(d) for d in run_dirs if not d.is_dir()]
    if missing:
        raise SystemExit(f"--data: no runs of {args.workload} in {', '.join(missing)}")
    out = args.output.resolve()
    (out / "logs").mkdir(parents=True, exist_ok=True)
    space = data_space(run_dirs)
    data = data_of(run_dirs, space, Encoder(space.knobs))
    X = np.asarray(data.rows)
    surrogate = Surrogate.fit(X, np.asarray(data.log_ms), np.asarray(data.group))
    surrogate.save(out / "surrogate.ubj")
    data_best = float(surrogate.ms(X).min())
    specs = [
        {
            "arm": arm,
            "settings": settings,
            "seed": seed,
            "workload": args.workload,
            "data": [str(d) for d in run_dirs],
            "runs": str(out / "runs" / arm),
            "trials": args.trials,
            "noise": args.noise,
            "surrogate": str(out / "surrogate.ubj"),
            "data_best_ms": data_best,
        }
        for seed in args.seeds
        for arm, settings in arms.items()
    ]
    with ThreadPoolExecutor(args.jobs) as pool:
        runs = []
        for r in pool.map(lambda s: launch(s, out / "logs"), specs):
            runs.append(r)
            print(
                f"{r['arm']} s{r['seed']}: final {r['final_ms']:.4f} ms, search {r['search_s']:.0f} s",
                flush=True,
            )
    fid = fidelity(data, surrogate)
    summary = summarise(runs, list(arms), args.trials)
    text = markdown(args.workload, summary, fid, argv, arms, data_host(run_dirs))
    (out / f"{args.workload}.md").write_text(text, encoding="utf-8")
    (out / f"{args.workload}.json").write_text(
        json.dumps({"summary": summary, "fidelity": fid, "runs": runs, "arms": arms}, indent=1),
        encoding="utf-8",
    )
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
