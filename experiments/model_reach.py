"""Would each run's cost model have pointed at the best schedules? Offline, on finished runs.

    .venv/bin/python experiments/model_reach.py RUNS_DIR/WORKLOAD [...] [--draws 400] [--seed 0]
        [--output results/model_reach]

``RUNS_DIR/WORKLOAD`` is a directory of ``experiments/sample_efficiency.py`` (its
``evolutionary-s*`` runs and its ``referee.json``). The referee timed every schedule that was among
a run's 5 fastest and within 1.5x of the best, all together; its medians (the second pass's where
there was one) are the truth here, and *near* are the schedules these runs found within 5% of its
best (the referee's of the experiment: the second pass's median of the first pass's fastest).

For each run, each model variant (:data:`VARIANTS`) is fitted on the run's ``ok`` trials, as the
tuner fits its model at the run's end, and then ranks two sets it was not fitted on:

- the referee's schedules: *Spearman* of the predictions and the referee's medians (how the model
  orders good schedules, most of them found by other runs);
- those, with ``--draws`` random assignments of the space that fit the run's memory (lowered,
  not timed) and without the schedules the run measured itself: *reach* is the position of the
  first near schedule in the model's order (0: the model puts one first). The scorer of a search
  sees children of measured schedules and random draws, not the referee's schedules, so reach is
  a proxy: a near schedule that the model ranks behind hundreds of random draws would not be
  chosen even if the search proposed it.

*Knobs from near*: how many knobs the run's fastest trial (by its search median) sets otherwise
than the closest near schedule. A run that ended far from the best (its ``best (search)`` over 5%
of the referee's best) and whose model has a low Spearman and a large reach did not miss for lack
of proposals the model liked: its model, fitted on the region the run measured, did not rank the
best region. Variants:

- ``tuned``: the tuner's model (:class:`~autotune.search.cost_model.XGBoostModel`, its defaults);
- ``estimate``: the roofline estimate's line alone (the trees' share 0);
- ``trees``: the trees in full from the first trial (``tree_trials`` 0);
- ``optimistic``: :data:`BOOTSTRAP` models of the tuned kind fitted on bootstrap resamples of the
  trials; a candidate's cost is the exponential of the mean of their log predictions less their
  standard deviation (a lower confidence bound: a schedule the resamples disagree on, far from
  the trials, is taken to be as fast as it might be).

Writes ``<output>/model_reach.md`` and ``.json``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "experiments"))

from sample_efficiency import WITHIN  # noqa: E402
from sample_efficiency import referee_medians as referee_verdict  # noqa: E402

from autotune.errors import ScheduleError  # noqa: E402
from autotune.search import candidates as cand  # noqa: E402
from autotune.search import cost_model_train as ct  # noqa: E402
from autotune.search.cost_model import Settings, XGBoostModel  # noqa: E402
from autotune.search.features import feature_vector  # noqa: E402
from autotune.search.log import TrialLog, load_sessions  # noqa: E402
from autotune.search.rank_scores import spearman  # noqa: E402
from autotune.search.records import machine, trace_key  # noqa: E402
from autotune.search.space import load_space  # noqa: E402

BOOTSTRAP = 8


def _fitted(
    settings: Settings,
) -> Callable[[np.ndarray, np.ndarray, int], Callable[[np.ndarray], np.ndarray]]:
    def fit(X: np.ndarray, y: np.ndarray, seed: int) -> Callable[[np.ndarray], np.ndarray]:
        model = XGBoostModel(seed=seed, settings=settings)
        model.fit(X, y)
        return model.predict

    return fit


def _optimistic(X: np.ndarray, y: np.ndarray, seed: int) -> Callable[[np.ndarray], np.ndarray]:
    rng = np.random.default_rng(seed)
    models = []
    for b in range(BOOTSTRAP):
        rows = rng.integers(len(y), size=len(y))
        model = XGBoostModel(seed=seed + b)
        model.fit(X[rows], y[rows])
        models.append(model)

    def predict(Z: np.ndarray) -> np.ndarray:
        logs = np.log(np.stack([m.predict(Z) for m in models]))
        return np.asarray(np.exp(logs.mean(axis=0) - logs.std(axis=0)))

    return predict


VARIANTS: dict[str, Callable[[np.ndarray, np.ndarray, int], Callable[[np.ndarray], np.ndarray]]] = {
    "tuned": _fitted(Settings()),
    "estimate": _fitted(Settings(tree_trials=1e12)),
    "trees": _fitted(Settings(tree_trials=0.0)),
    "optimistic": _optimistic,
}


def referee_medians(wl_dir: Path) -> tuple[dict[str, float], float]:
    """The referee's median per schedule key timed ok (the second pass's where it timed one again)
    and its best, by ``sample_efficiency.py``'s own rule (its ``referee_medians``)."""
    ref = json.loads((wl_dir / "referee.json").read_text(encoding="utf-8"))
    medians, best = referee_verdict(ref)
    timed = {k: v for k, v in medians.items() if v is not None}
    return timed, best if best is not None else min(timed.values())


def run_config(run: Path) -> dict[str, Any]:
    starts = [line["session"] for line in load_sessions(run) if "session" in line]
    return dict(starts[-1]["config"])


def space_path(recorded: str) -> Path:
    """The space file a run recorded, or the project's file of that name (a run made in a copy)."""
    path = Path(recorded)
    return path if path.is_file() else REPO / "search_spaces" / path.name


def random_rows(
    run: Path, setup: ct.RunSetup, draws: int, seed: int, exclude: set[str]
) -> tuple[np.ndarray, int]:
    """Feature rows of ``draws`` random assignments of the space of ``run`` (of ``setup``) that fit
    its memory (their schedules distinct and not in ``exclude``), and how many draws it took."""
    fields = run_config(run)
    space = load_space(space_path(fields["search.space"]), setup.workload, setup.pools, setup.target)
    limit = fields.get("memory.peak_limit")
    rng = np.random.default_rng(seed)
    rows: list[list[float]] = []
    seen, tried = set(exclude), 0
    while len(rows) < draws and tried < 50 * draws:
        tried += 1
        knobs = cand.random_assignment(space, rng)
        try:
            sch = space.apply(setup.workload.func, knobs)
        except ScheduleError:  # an assignment that gives no schedule is not a draw
            continue
        trace = sch.trace_json()
        key = trace_key(trace)
        if key in seen:
            continue
        seen.add(key)
        low = cand.lower_candidate(sch.func, setup.pools, setup.planner, setup.seed, limit)
        if low.lowered is not None:
            rows.append(feature_vector(ct.trial_features(setup, low.lowered)))
    return np.asarray(rows, dtype=np.float64), tried


def knob_distance(a: dict[str, Any], b: dict[str, Any]) -> int:
    """How many knobs two assignments set differently (a knob only one of them has counts)."""
    return sum(a.get(name, _MISSING) != b.get(name, _MISSING) for name in a.keys() | b.keys())


_MISSING = object()


def first_near(predicted: np.ndarray, is_near: list[bool]) -> int | None:
    """The position of the first near candidate in the order of ``predicted`` (lowest first, ties in
    the given order; None: none is near)."""
    order = np.argsort(predicted, kind="stable")
    return next((n for n, i in enumerate(order) if is_near[i]), None)


def reach_of(workload: Path, draws: int, seed: int) -> dict[str, Any]:
    medians, best = referee_medians(workload)
    runs = sorted(r for r in workload.glob("evolutionary-s*") if (r / "trials.jsonl").is_file())
    records = {run.name: TrialLog.load(run / "trials.jsonl") for run in runs}
    traces: dict[str, str] = {}
    knobs: dict[str, dict[str, Any]] = {}
    for recs in records.values():
        for r in recs:
            if r.trace and r.key in medians:
                traces.setdefault(r.key, r.trace)
                knobs.setdefault(r.key, dict(r.knobs))
    keys = sorted(traces, key=lambda k: (medians[k], k))
    near = {k for k in keys if medians[k] <= WITHIN * best}
    setup = ct.run_setup(runs[0])
    rows_of = []
    for k in keys:
        low = ct.lower_trial(setup, traces[k])
        assert low is not None, f"{k}: a referee's schedule replays and fits (the referee timed it)"
        rows_of.append(feature_vector(ct.trial_features(setup, low)))
    ref_rows = np.asarray(rows_of, dtype=np.float64)
    y_ref = np.asarray([medians[k] for k in keys])
    start = time.perf_counter()
    drawn, tried = random_rows(runs[0], setup, draws, seed, set(keys))
    drawn_s = time.perf_counter() - start
    out: dict[str, Any] = {
        "workload": workload.name, "referee_best_ms": best, "schedules": len(keys), "near": len(near),
        "draws": len(drawn), "draws_tried": tried, "draws_s": drawn_s, "runs": {},
    }  # fmt: skip
    for run in runs:
        rows = ct.log_rows(run)
        own = {r.key for r in records[run.name] if r.ok}
        timed = [r for r in records[run.name] if r.ok and r.median_ms is not None]
        fastest = min(timed, key=lambda r: float(r.median_ms or 0.0))
        figures: dict[str, Any] = {
            "best_search_ms": fastest.median_ms,
            "near_measured": len(near & own),
            "knobs_from_near": min(knob_distance(dict(fastest.knobs), knobs[k]) for k in near),
        }
        unmeasured = [i for i, k in enumerate(keys) if k not in own]
        pool = np.vstack([ref_rows[unmeasured], drawn]) if len(drawn) else ref_rows[unmeasured]
        is_near = [keys[i] in near for i in unmeasured] + [False] * len(drawn)
        for name, fit in VARIANTS.items():
            predict = fit(rows.X, rows.y, 0)
            reach = first_near(predict(pool), is_near)
            figures[name] = {"spearman": spearman(predict(ref_rows), y_ref), "reach": reach}
        out["runs"][run.name] = figures
    return out


def report(results: list[dict[str, Any]], argv: list[str]) -> str:
    host = machine()
    lines = [
        "# Would each run's model have pointed at the best schedules?",
        "",
        f"`.venv/bin/python experiments/model_reach.py {' '.join(argv)}`",
        "",
        f"Host: {host.get('cpu')} (LLVM `{host.get('llvm_cpu')}`), {host.get('cores')} cores. Offline: "
        "nothing is timed here; the truth is each workload's referee (see the script's docstring). "
        "Per run and model variant: *Spearman* over the referee's schedules / *reach*, the position of "
        "the first schedule within 5% of the referee's best among those the run did not measure and "
        "the random draws that fit (0: first; `-`: the run measured every near schedule).",
        "",
    ]
    for res in results:
        lines += [
            f"## {res['workload']}",
            "",
            f"Referee: {res['schedules']} schedules, {res['near']} within 5% of its best "
            f"({res['referee_best_ms']:.4g} ms); {res['draws']} random draws that fit "
            f"({res['draws_tried']} drawn, {res['draws_s']:.0f} s to lower).",
            "",
            "| run | best (search) / referee's best | near measured | knobs from near | "
            + " | ".join(VARIANTS)
            + " |",
            "| --- | ---: | ---: | ---: | " + " | ".join("---:" for _ in VARIANTS) + " |",
        ]
        for name, f in res["runs"].items():
            cells = []
            for v in VARIANTS:
                reach = f[v]["reach"]
                cells.append(f"{f[v]['spearman']:.2f} / {'-' if reach is None else reach}")
            ratio = f["best_search_ms"] / res["referee_best_ms"]
            lines.append(
                f"| {name} | {ratio:.2f} | {f['near_measured']} | {f['knobs_from_near']} | "
                + " | ".join(cells)
                + " |"
            )
        means = []
        for v in VARIANTS:
            rhos = [f[v]["spearman"] for f in res["runs"].values()]
            reaches = [f[v]["reach"] for f in res["runs"].values() if f[v]["reach"] is not None]
            med = f"{statistics.median(reaches):g}" if reaches else "-"
            means.append(f"{statistics.fmean(rhos):.2f} / {med}")
        lines += ["| mean / median reach | | | | " + " | ".join(means) + " |", ""]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("workloads", nargs="+", type=Path, help="RUNS_DIR/WORKLOAD directories")
    parser.add_argument("--draws", type=int, default=400)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output", type=Path, default=Path("results/model_reach"))
    args = parser.parse_args(argv)
    results = []
    for workload in args.workloads:
        if not (workload / "referee.json").is_file():
            parser.error(f"{workload}: no referee.json (a workload directory of sample_efficiency.py)")
        print(f"{workload.name} ...", file=sys.stderr, flush=True)
        results.append(reach_of(workload, args.draws, args.seed))
    args.output.mkdir(parents=True, exist_ok=True)
    text = report(results, sys.argv[1:] if argv is None else argv)
    (args.output / "model_reach.md").write_text(text, encoding="utf-8")
    (args.output / "model_reach.json").write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
