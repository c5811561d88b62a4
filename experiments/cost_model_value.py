"""What the XGBoost cost model is worth on bottleneck: measurements to come within 5% of the best.

    .venv/bin/python experiments/cost_model_value.py [--budget 24] [--seeds 0 1 2] [--rounds 7] [--output results]

For each seed and each ``cost_model`` (``xgboost``, ``none``), one call of
:func:`autotune.search.tuner.tune` on ``experiments/configs/bottleneck_cm.yaml``:
the bottleneck chain (cin 16 -> expand 96 -> 16) on a 56x56 image instead of
112x112 (so a run takes well under a minute), pools dtcm 64 KiB + sram 2 MiB,
peak_limit 256 KiB (half the full-size 512 KiB: a row is half as large, so the
same tile sizes fit), TPE, batch 64, 8 measured per round, epsilon 0.25. The runs
alternate between the two models (xgboost first for even seeds, none first for
odd) and share one Ray executor with 2 workers.

Budget. ``search.trials`` counts measured + infeasible + invalid trials, and the
two models spend very different shares of it on infeasible candidates, so it is
set out of reach (``--trials-cap``) and each run is stopped after exactly
``--budget`` MEASURED trials (status ok, wrong, crashed, timeout or error): the
executor passed to ``tune`` counts the results it hands back and, when the tuner
asks for more after the budget, raises ``BudgetReached``, which ends ``tune``
(the log is already on disk; ``best.json`` is not written, nothing here needs it).
The first ``budget`` measured trials are exactly those of an uninterrupted run.

Latencies. Search-time figures come from two workers timing at the same time, at
different moments of a shared machine. So after all runs (Ray shut down), every
feasible schedule of the space (enumerated: every knob assignment, lowered with
the run's pools and limit), and every schedule any run measured, is re-timed in
this one process with :func:`autotune.measure.task.remeasure_tasks`: ``--rounds``
rounds, each timing every schedule once (2 warm-ups, median of 10 runs),
alternating. A schedule's re-measured latency is the median over rounds.

Metric (primary, re-measured). ``best`` = the lowest re-measured latency among
the schedules measured by any of the runs. For a run, after k measurements its
best-so-far is the lowest re-measured latency among the schedules of its first
k measured trials; ``to_5pct`` = the first k where that is <= 1.05 x best
(``budget + 1`` if never: "not reached"). Reported per run and as the median per
cost model; ratio = median(none) / median(xgboost) (> 1: the model saves measurements).
Secondary (as logged): the same with each trial's logged search-time median and
best = the lowest logged ok median over all runs.

Writes ``<output>/cost_model_value.md`` and ``<output>/cost_model_value.json``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import itertools
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
os.environ.setdefault("NUMBA_CACHE_DIR", str(REPO / ".cache" / "numba"))
os.environ.setdefault("AUTOTUNE_CACHE_DIR", str(REPO / ".cache" / "autotune"))

from autotune.config import RunConfig, load_config, load_workload  # noqa: E402
from autotune.errors import ScheduleError  # noqa: E402
from autotune.measure.result import MeasureResult  # noqa: E402
from autotune.measure.task import MeasureTask, remeasure_tasks  # noqa: E402
from autotune.search import candidates as cand  # noqa: E402
from autotune.search.executors import Executor, make_executor  # noqa: E402
from autotune.search.log import load  # noqa: E402
from autotune.search.records import TrialRecord, trace_key  # noqa: E402
from autotune.search.space import load_space  # noqa: E402
from autotune.search.tuner import LOG_NAME, tune  # noqa: E402

CONFIG = REPO / "experiments" / "configs" / "bottleneck_cm.yaml"
MODELS = ("xgboost", "none")
MEASURED = ("ok", "wrong", "crashed", "timeout", "error")
WITHIN = 0.05


class BudgetReached(Exception):
    """Raised by :class:`BudgetExecutor` to end ``tune`` once the measurement budget is spent."""


class BudgetExecutor(Executor):
    """Delegates to ``inner``; after ``budget`` results have been handed back, the next request raises."""

    def __init__(self, inner: Executor, budget: int) -> None:
        self.inner, self.budget, self.delivered = inner, budget, 0
        self.workers = inner.workers
        self.name = f"budget({inner.name})"  # type: ignore[misc]

    def run(self, tasks: Sequence[MeasureTask]) -> Iterator[tuple[int, MeasureResult, str]]:
        if self.delivered >= self.budget:
            raise BudgetReached
        stream = self.inner.run(tasks)
        try:
            for item in stream:
                yield item
                self.delivered += 1
                if self.delivered >= self.budget:
                    raise BudgetReached
        finally:
            stream.close()  # cancels what is still in flight

    def remeasure(self, tasks: Sequence[MeasureTask], rounds: int) -> list[list[MeasureResult]]:
        return self.inner.remeasure(tasks, rounds)

    def close(self) -> None:  # the inner executor is closed by its owner
        pass


@dataclass
class Run:
    seed: int
    model: str
    records: list[TrialRecord]
    wall_s: float
    stopped: str  # "budget" or "tuner" (the tuner ended first: space exhausted)
    load_before: float
    load_after: float

    @property
    def measured(self) -> list[TrialRecord]:
        return [r for r in self.records if r.status in MEASURED]


def config_for(seed: int, model: str, output: Path, trials: int) -> RunConfig:
    cfg = load_config(CONFIG, overrides={"seed": seed, "output": str(output), "trials": trials})
    return replace(cfg, search=replace(cfg.search, cost_model=model))


def one_run(seed: int, model: str, budget: int, trials: int, executor: Executor, tmp: Path) -> Run:
    out = tmp / f"{model}_seed{seed}"
    cfg = config_for(seed, model, out, trials)
    ex = BudgetExecutor(executor, budget)
    load_before = os.getloadavg()[0]
    start = time.perf_counter()
    stopped = "tuner"
    try:
        tune(cfg, progress=False, executor=ex, report=None)
    except BudgetReached:
        stopped = "budget"
    wall = time.perf_counter() - start
    records = load(out / LOG_NAME)
    run = Run(seed, model, records, wall, stopped, load_before, os.getloadavg()[0])
    counts = {s: sum(r.status == s for r in records) for s in sorted({r.status for r in records})}
    print(
        f"  seed {seed} {model:8s}: {len(run.measured)} measured ({counts}), {wall:.0f} s, stopped by {stopped}",
        flush=True,
    )
    return run


def feasible_space(cfg: RunConfig) -> dict[str, tuple[str, dict[str, Any]]]:
    """key -> (trace, knobs) of every distinct schedule of the space that fits the pools and the limit."""
    wl = load_workload(cfg.workload)
    space = load_space(cfg.search.space, wl, cfg.memory.pools)
    mem = cfg.memory
    seen: set[str] = set()
    found: dict[str, tuple[str, dict[str, Any]]] = {}
    for values in itertools.product(*(k.choices for k in space.knobs)):
        knobs = dict(zip((k.name for k in space.knobs), values))
        try:
            sch = space.apply(wl.func, knobs)
        except ScheduleError:
            continue
        trace = sch.trace_json()
        key = trace_key(trace)
        if key in seen:
            continue
        seen.add(key)
        low = cand.lower_candidate(sch.func, mem.pools, mem.planner, cfg.search.seed, mem.peak_limit)
        if low.lowered is not None:
            found[key] = (trace, knobs)
    return found


def steps_to(values: Sequence[float | None], target: float, budget: int) -> int:
    """1-based index of the first measurement whose best-so-far is <= target; budget + 1 if none."""
    best = float("inf")
    for k, v in enumerate(values, start=1):
        if v is not None:
            best = min(best, v)
        if best <= target:
            return k
    return budget + 1


def curve(values: Sequence[float | None]) -> list[float | None]:
    best, out = float("inf"), []
    for v in values:
        if v is not None:
            best = min(best, v)
        out.append(None if best == float("inf") else best)
    return out


def knobs_short(knobs: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in knobs.items())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--budget", type=int, default=24, help="measured trials per run")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--rounds", type=int, default=7, help="re-measure rounds")
    parser.add_argument("--trials-cap", type=int, default=2000, help="search.trials (out of reach)")
    parser.add_argument("--output", default=str(REPO / "results"))
    parser.add_argument("--render", metavar="JSON", help="only rewrite the report from an existing JSON")
    args = parser.parse_args(argv)
    if args.render:
        path = Path(args.render)
        payload = json.loads(path.read_text(encoding="utf-8"))
        derive(payload)
        payload["rendered_utc"] = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M")
        path.write_text(json.dumps(payload, indent=1) + "\n", encoding="utf-8")
        path.with_suffix(".md").write_text(markdown(payload), encoding="utf-8")
        return 0
    started, date = time.perf_counter(), dt.datetime.now(dt.timezone.utc)
    load_start = os.getloadavg()
    out_dir = Path(args.output)
    out_dir.mkdir(parents=True, exist_ok=True)

    base = config_for(args.seeds[0], "none", Path(tempfile.gettempdir()) / "unused", args.trials_cap)
    print("enumerating the feasible schedules of the space ...", flush=True)
    space = feasible_space(base)
    print(f"  {len(space)} distinct feasible schedules", flush=True)

    runs: list[Run] = []
    executor = make_executor("ray", workers=2, address=None)
    try:
        with tempfile.TemporaryDirectory(prefix="cost_model_value_") as tmp:
            for i, seed in enumerate(args.seeds):
                order = MODELS if i % 2 == 0 else MODELS[::-1]
                for model in order:
                    runs.append(one_run(seed, model, args.budget, args.trials_cap, executor, Path(tmp)))
    finally:
        executor.close()
    search_s = time.perf_counter() - started

    # ---- re-measure every feasible schedule (and anything measured) in this process, alternating
    traces: dict[str, str] = {k: t for k, (t, _) in space.items()}
    knobs_of: dict[str, dict[str, Any]] = {k: kn for k, (_, kn) in space.items()}
    for run in runs:
        for r in run.measured[: args.budget]:
            traces.setdefault(r.key, r.trace)
            knobs_of.setdefault(r.key, dict(r.knobs))
    keys = sorted(traces)
    tasks = [cand.make_task(base, traces[k]) for k in keys]
    print(f"re-measuring {len(tasks)} schedules, {args.rounds} rounds, in one process ...", flush=True)
    t0 = time.perf_counter()
    results = remeasure_tasks(tasks, args.rounds)
    remeasure_s = time.perf_counter() - t0
    remeasured: dict[str, float | None] = {}
    for k, res in zip(keys, results):
        ok = [r.median_ms for r in res if r.ok and r.median_ms is not None]
        remeasured[k] = statistics.median(ok) if len(ok) == len(res) else None
    failed = [k for k in keys if remeasured[k] is None]

    # ---- the metric
    budget = args.budget
    seq = {id(run): run.measured[:budget] for run in runs}
    found_keys = {r.key for run in runs for r in seq[id(run)] if r.ok}
    best_key = min((k for k in found_keys if remeasured.get(k) is not None), key=lambda k: remeasured[k])
    best = remeasured[best_key]
    assert best is not None
    space_best_key = min((k for k in space if remeasured.get(k) is not None), key=lambda k: remeasured[k])
    space_best = remeasured[space_best_key]
    target = best * (1 + WITHIN)
    near = sorted(k for k in space if remeasured.get(k) is not None and remeasured[k] <= target)
    logged_ok = [r.median_ms for run in runs for r in seq[id(run)] if r.ok and r.median_ms is not None]
    best_logged = min(logged_ok)

    rows: list[dict[str, Any]] = []
    for run in runs:
        s = seq[id(run)]
        re_vals = [remeasured.get(r.key) if r.ok else None for r in s]
        log_vals = [r.median_ms if r.ok else None for r in s]
        status_counts = {
            st: sum(r.status == st for r in run.records) for st in sorted({r.status for r in run.records})
        }
        k5 = steps_to(re_vals, target, budget)
        hit = s[k5 - 1] if k5 <= len(s) else None
        first_near = next((i for i, r in enumerate(s, 1) if r.ok and r.key in near), None)
        rows.append(
            {
                "seed": run.seed,
                "cost_model": run.model,
                "measured": len(s),
                "trials_logged": len(run.records),
                "statuses": status_counts,
                "distinct_schedules_measured": len({r.key for r in s}),
                "to_5pct_remeasured": k5,
                "reaching_trial_round": None if hit is None else hit.round,
                "reaching_trial_had_prediction": None if hit is None else hit.predicted_ms is not None,
                "to_5pct_logged": steps_to(log_vals, best_logged * (1 + WITHIN), budget),
                "first_near_best_schedule_at": first_near,
                "best_so_far_remeasured_ms": curve(re_vals),
                "best_so_far_logged_ms": curve(log_vals),
                "final_best_remeasured_ms": min((v for v in re_vals if v is not None), default=None),
                "final_best_logged_ms": min((v for v in log_vals if v is not None), default=None),
                "rounds": sorted({r.round for r in s}),
                "wall_s": round(run.wall_s, 1),
                "stopped_by": run.stopped,
                "load_before": run.load_before,
                "load_after": run.load_after,
                "measured_trials": [
                    {
                        "trial": r.trial,
                        "round": r.round,
                        "status": r.status,
                        "key": r.key[:12],
                        "logged_ms": r.median_ms,
                        "remeasured_ms": remeasured.get(r.key),
                        "predicted_ms": r.predicted_ms,
                    }
                    for r in s
                ],
            }
        )

    summary: dict[str, Any] = {}
    for model in MODELS:
        mine = [r for r in rows if r["cost_model"] == model]
        summary[model] = {
            "to_5pct_remeasured": [r["to_5pct_remeasured"] for r in mine],
            "median_to_5pct_remeasured": statistics.median(r["to_5pct_remeasured"] for r in mine),
            "to_5pct_logged": [r["to_5pct_logged"] for r in mine],
            "median_to_5pct_logged": statistics.median(r["to_5pct_logged"] for r in mine),
            "reached_remeasured": sum(r["to_5pct_remeasured"] <= budget for r in mine),
        }
    ratio = summary["none"]["median_to_5pct_remeasured"] / summary["xgboost"]["median_to_5pct_remeasured"]
    ratio_logged = summary["none"]["median_to_5pct_logged"] / summary["xgboost"]["median_to_5pct_logged"]
    # uniform random sampling of the feasible schedules without replacement: expected draws to hit one of `near`
    n_feasible, n_near = len([k for k in space if remeasured.get(k) is not None]), len(near)
    random_expect = (n_feasible + 1) / (n_near + 1) if n_near else None
    total_s = time.perf_counter() - started
    load_end = os.getloadavg()

    payload = {
        "seeds": args.seeds,
        "command": " ".join(
            [
                "cd /work/main && .venv/bin/python experiments/cost_model_value.py",
                *(sys.argv[1:] if argv is None else argv),
            ]
        ),
        "date_utc": date.strftime("%Y-%m-%d %H:%M"),
        "machine": {
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "loadavg_start": load_start,
            "loadavg_end": load_end,
        },
        "config": str(CONFIG.relative_to(REPO)),
        "workload": dict(base.workload.args),
        "peak_limit": base.memory.peak_limit,
        "pools": {p.name: p.size for p in base.memory.pools},
        "search": {
            "sampler": base.search.sampler,
            "batch": base.search.batch,
            "measure_per_round": base.search.measure_per_round,
            "epsilon": base.search.epsilon,
        },
        "executor": "ray, 2 workers (one executor shared by the six runs)",
        "budget_measured_trials": budget,
        "config_trials": load_config(CONFIG).search.trials,
        "within": WITHIN,
        "remeasure_rounds": args.rounds,
        "feasible_schedules": n_feasible,
        "feasible_tile_rows": sorted({kn["tile_rows"] for _, kn in space.values()}),
        "best_found_ms": best,
        "best_found_key": best_key[:12],
        "best_found_knobs": knobs_of[best_key],
        "space_best_ms": space_best,
        "space_best_key": space_best_key[:12],
        "space_best_knobs": knobs_of[space_best_key],
        "schedules_within_5pct": [{"key": k[:12], "ms": remeasured[k], "knobs": knobs_of[k]} for k in near],
        "random_expected_draws": random_expect,
        "best_logged_ms": best_logged,
        "remeasure_failed": [k[:12] for k in failed],
        "summary": summary,
        "ratio_none_over_xgboost_remeasured": ratio,
        "ratio_none_over_xgboost_logged": ratio_logged,
        "runs": rows,
        "remeasured_ms": {k[:12]: remeasured[k] for k in keys},
        "knobs": {k[:12]: knobs_of[k] for k in keys},
        "seconds": {
            "search": round(search_s, 1),
            "remeasure": round(remeasure_s, 1),
            "total": round(total_s, 1),
        },
    }
    derive(payload)
    (out_dir / "cost_model_value.json").write_text(json.dumps(payload, indent=1) + "\n", encoding="utf-8")
    (out_dir / "cost_model_value.md").write_text(markdown(payload), encoding="utf-8")
    print(
        f"median measurements to within 5% (re-measured): xgboost {summary['xgboost']['median_to_5pct_remeasured']}, "
        f"none {summary['none']['median_to_5pct_remeasured']}, ratio none/xgboost {ratio:.2f}; "
        f"logged: xgboost {summary['xgboost']['median_to_5pct_logged']}, none {summary['none']['median_to_5pct_logged']}; "
        f"{total_s:.0f} s",
        flush=True,
    )
    return 0


def _near_text(q: dict[str, Any]) -> str:
    return f"{q['ms']:.3f} ms: {knobs_short(q['knobs'])}"


def _fmt_steps(n: int, budget: int) -> str:
    return f"not reached ({n})" if n > budget else str(n)


def markdown(p: dict[str, Any]) -> str:
    b = p["budget_measured_trials"]
    s = p["summary"]
    m = p["machine"]
    wl = p["workload"]
    lines = [
        "# Cost model value on bottleneck: XGBoost vs no model",
        "",
        f"Command: `{p['command'].strip()}`  ",
        f"Date: {p['date_utc']} UTC; {m['platform']}, {m['cpus']} CPUs, python {m['python']}; "
        f"load average (1/5/15 min) at start {m['loadavg_start'][0]:.2f}/{m['loadavg_start'][1]:.2f}/{m['loadavg_start'][2]:.2f}, "
        f"at end {m['loadavg_end'][0]:.2f}/{m['loadavg_end'][1]:.2f}/{m['loadavg_end'][2]:.2f}; "
        f"{p['seconds']['total']:.0f} s in all ({p['seconds']['search']:.0f} s searching, {p['seconds']['remeasure']:.0f} s re-measuring).",
        *(
            [
                f"Report text regenerated from the JSON with `--render` at {p['rendered_utc']} UTC; every figure is "
                "from the run above.",
            ]
            if "rendered_utc" in p
            else []
        ),
        "",
        "## Setup",
        "",
        f"- Workload: `bottleneck` (expand 1x1 + relu6, depthwise 3x3 + relu6, project 1x1) at "
        f"height={wl['height']} width={wl['width']} cin={wl['cin']} expand={wl['expand']}: the same chain as "
        "`experiments/configs/bottleneck.yaml`, on a 56x56 image instead of 112x112, so runs are short (here "
        f"{min(r['wall_s'] for r in p['runs']):.0f} to {max(r['wall_s'] for r in p['runs']):.0f} s each). "
        f"Config `{p['config']}`: pools {', '.join(f'{k} {v // 1024} KiB' for k, v in p['pools'].items())}, "
        f"peak_limit {p['peak_limit'] // 1024} KiB (half the full-size 512 KiB, so the same tile sizes fit), "
        f"space `cascade`, sampler {p['search']['sampler']}, batch {p['search']['batch']}, "
        f"{p['search']['measure_per_round']} measured per round, epsilon {p['search']['epsilon']}.",
        f"- Runs: seeds {', '.join(map(str, p['seeds']))} x cost_model xgboost / none, each one "
        f"`autotune.search.tuner.tune(cfg)` with executor {p['executor']}; in seed order, the model that runs first "
        "alternates (xgboost first for the 1st, 3rd, ... seed), so slow drifts of the machine's load hit both.",
        f"- Budget: exactly {b} MEASURED trials per run (status ok/wrong/crashed/timeout/error). `search.trials` also "
        "counts infeasible and invalid trials, which the two models log at very different rates, so it was set out of "
        "reach (2000) and each run was stopped by the executor wrapper after its "
        f"{b}th measured result (the first {b} measured trials are those of an uninterrupted run).",
        f"- The space: {p['feasible_schedules']} distinct schedules fit the pools and the limit (every knob assignment "
        "enumerated and lowered); their tile_rows: " + ", ".join(map(str, p["feasible_tile_rows"])) + ".",
        f"- Re-measure: after the runs, with Ray shut down, all {p['feasible_schedules']} feasible schedules (a superset "
        "of what any run measured) were re-timed in one process with `autotune.measure.task.remeasure_tasks`, "
        f"{p['remeasure_rounds']} rounds alternating between them (each a median of 10 runs after 2 warm-ups); a "
        "schedule's figure is the median over rounds."
        + (f" Failed to re-measure: {', '.join(p['remeasure_failed'])}." if p["remeasure_failed"] else ""),
        f"- Metric (primary): best = the lowest re-measured latency among the schedules measured by any run: "
        f"**{p['best_found_ms']:.3f} ms** ({knobs_short(p['best_found_knobs'])}). After k measurements a run's "
        "best-so-far is the lowest re-measured latency among its first k measured schedules; the figure is the first "
        f"k where that is within 5% of best (<= {p['best_found_ms'] * 1.05:.3f} ms); not reached = {b + 1}. "
        f"Secondary: the same from the latencies as logged during the search (best = lowest logged ok median over all "
        f"runs, {p['best_logged_ms']:.3f} ms).",
        "",
        "## Results",
        "",
        "| seed | cost model | measurements to within 5% (re-measured) | (as logged) | final best-so-far, re-measured ms | trials logged (ok / infeasible / invalid / other) | distinct measured | wall s | load before / after |",
        "| ---: | --- | ---: | ---: | ---: | --- | ---: | ---: | --- |",
    ]
    for r in sorted(p["runs"], key=lambda r: (r["cost_model"] != "xgboost", r["seed"])):
        st = r["statuses"]
        other = sum(v for k, v in st.items() if k not in ("ok", "infeasible", "invalid"))
        lines.append(
            f"| {r['seed']} | {r['cost_model']} | {_fmt_steps(r['to_5pct_remeasured'], b)} | "
            f"{_fmt_steps(r['to_5pct_logged'], b)} | {r['final_best_remeasured_ms']:.3f} | "
            f"{r['trials_logged']} ({st.get('ok', 0)} / {st.get('infeasible', 0)} / {st.get('invalid', 0)} / {other}) | "
            f"{r['distinct_schedules_measured']} | {r['wall_s']:.0f} | {r['load_before']:.2f} / {r['load_after']:.2f} |"
        )
    lines += [
        "",
        f"| cost model | per seed ({', '.join(map(str, p['seeds']))}), re-measured | median | reached "
        "| per seed, as logged | median, as logged |",
        "| --- | --- | ---: | ---: | --- | ---: |",
    ]
    for model in MODELS:
        x = s[model]
        lines.append(
            f"| {model} | {', '.join(map(str, x['to_5pct_remeasured']))} | {x['median_to_5pct_remeasured']:g} | "
            f"{x['reached_remeasured']} of {len(x['to_5pct_remeasured'])} | {', '.join(map(str, x['to_5pct_logged']))} | {x['median_to_5pct_logged']:g} |"
        )
    ks = sorted({k for k in (4, 8, 12, 16, b) if k <= b})
    lines += [
        "",
        f"Ratio median(none) / median(xgboost): **{p['ratio_none_over_xgboost_remeasured']:.2f}** re-measured, "
        f"{p['ratio_none_over_xgboost_logged']:.2f} as logged (> 1: the model needs fewer measurements).",
        "",
        f"Best-so-far after k measurements (re-measured ms; target <= {p['best_found_ms'] * 1.05:.3f} ms):",
        "",
        "| seed | cost model | " + " | ".join(f"k={k}" for k in ks) + " |",
        "| ---: | --- |" + " ---: |" * len(ks),
    ]
    for r in sorted(p["runs"], key=lambda r: (r["cost_model"] != "xgboost", r["seed"])):
        c = r["best_so_far_remeasured_ms"]

        def at(k: int, c: list[float | None] = c) -> str:
            v = c[k - 1] if len(c) >= k else None
            return "-" if v is None else f"{v:.3f}"

        lines.append(f"| {r['seed']} | {r['cost_model']} | " + " | ".join(at(k) for k in ks) + " |")
    near = p["schedules_within_5pct"]
    lines += [
        "",
        f"Within 5% of best: {len(near)} of the {p['feasible_schedules']} feasible schedules "
        f"({'; '.join(_near_text(q) for q in near)}). "
        f"The fastest feasible schedule of the whole space, re-measured: {p['space_best_ms']:.3f} ms "
        f"({knobs_short(p['space_best_knobs'])})"
        + (" — the same schedule as the best found." if p["space_best_key"] == p["best_found_key"] else "."),
    ]
    if p["random_expected_draws"] is not None:
        lines.append(
            f"For scale: drawing feasible schedules uniformly at random without replacement, the expected number of "
            f"draws to hit one of those {len(near)} is (N+1)/(n+1) = {p['random_expected_draws']:.1f}."
        )
    lines += ["", "## Interpretation", "", *interpretation(p), ""]
    return "\n".join(lines)


def _ranks(values: Sequence[float]) -> list[float]:
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for t in range(i, j + 1):
            ranks[order[t]] = (i + j) / 2
        i = j + 1
    return ranks


def spearman(a: Sequence[float], b: Sequence[float]) -> float | None:
    """Rank correlation (ties get average ranks); None for fewer than 3 pairs or a constant side."""
    if len(a) < 3:
        return None
    ra, rb = _ranks(a), _ranks(b)
    ma, mb = statistics.fmean(ra), statistics.fmean(rb)
    cov = sum((x - ma) * (y - mb) for x, y in zip(ra, rb))
    va, vb = sum((x - ma) ** 2 for x in ra), sum((y - mb) ** 2 for y in rb)
    return cov / (va * vb) ** 0.5 if va and vb else None


def derive(p: dict[str, Any]) -> None:
    """Add the figures the interpretation uses (all from the per-trial data already in ``p``)."""
    limit = p.setdefault("config_trials", load_config(CONFIG).search.trials)
    for r in p["runs"]:
        ranked = [
            t
            for t in r["measured_trials"]
            if t["predicted_ms"] is not None and t["remeasured_ms"] is not None
        ]
        r["ranked_trials"] = len(ranked)
        rho = spearman([t["predicted_ms"] for t in ranked], [t["remeasured_ms"] for t in ranked])
        r["prediction_spearman_vs_remeasured"] = None if rho is None else round(rho, 3)
        r["measured_with_trial_number_below_config_trials"] = sum(
            t["trial"] < limit for t in r["measured_trials"]
        )
    best = None
    for r in p["runs"]:
        for k, t in enumerate(r["measured_trials"], 1):
            if (
                t["status"] == "ok"
                and t["logged_ms"] is not None
                and (best is None or t["logged_ms"] < best[3])
            ):
                best = (r["seed"], r["cost_model"], k, t["logged_ms"], t["remeasured_ms"], t["key"])
    assert best is not None
    p["best_logged_trial"] = dict(zip(("seed", "cost_model", "k", "logged_ms", "remeasured_ms", "key"), best))


def interpretation(p: dict[str, Any]) -> list[str]:
    b = p["budget_measured_trials"]
    s = p["summary"]
    x, n = s["xgboost"]["median_to_5pct_remeasured"], s["none"]["median_to_5pct_remeasured"]
    ratio = p["ratio_none_over_xgboost_remeasured"]
    xg_runs = sorted((r for r in p["runs"] if r["cost_model"] == "xgboost"), key=lambda r: r["seed"])
    none_runs = sorted((r for r in p["runs"] if r["cost_model"] == "none"), key=lambda r: r["seed"])
    reached = [r for r in xg_runs if r["reaching_trial_had_prediction"] is not None]
    unranked = sum(not r["reaching_trial_had_prediction"] for r in reached)
    out = []
    if x < n:
        out.append(
            f"- With re-measured latencies, the XGBoost runs came within 5% of the best in a median of {x:g} "
            f"measurements against {n:g} without a model (ratio {ratio:.2f})."
        )
        if reached and unranked == len(reached):
            out.append(
                "- **That difference is not the cost model's doing, and at this budget the model gives no measurable "
                f"advantage.** Every XGBoost run that came within 5% ({len(reached)} of {len(xg_runs)}) got there with "
                "a trial chosen before the model could rank anything (the trial has no prediction): while fewer than 4 "
                "trials are ok, an xgboost round measures up to 8 of the feasible candidates among its 64 TPE "
                "proposals picked at random (and TPE itself samples at random until 10 trials are complete), whereas "
                "a none run measures TPE's proposals 8 at a time. What the first measurements compare is these two "
                "ways of sampling, plus seed luck, not the model's ranking."
            )
        elif reached:
            out.append(
                f"- Of the {len(reached)} XGBoost runs that came within 5%, {unranked} got there with a trial chosen "
                "before the model could rank (no prediction: chosen at random among the round's feasible proposals) "
                f"and {len(reached) - unranked} with a trial chosen in a round ranked by the model (top of the ranking "
                "or an epsilon pick; the log does not say which)."
            )
    elif x > n:
        out.append(
            f"- **The XGBoost model gave no advantage at this budget**: with re-measured latencies its runs needed a "
            f"median of {x:g} measurements to come within 5% of the best, against {n:g} without a model "
            f"(ratio {ratio:.2f})."
        )
    else:
        out.append(
            f"- **The XGBoost model gave no advantage at this budget**: both needed a median of {x:g} measurements "
            "to come within 5% of the best (re-measured latencies)."
        )
    xs, ns = s["xgboost"]["to_5pct_remeasured"], s["none"]["to_5pct_remeasured"]
    runs_text = f"xgboost {', '.join(map(str, xs))}; none {', '.join(map(str, ns))}"
    if max(xs) >= min(ns) and max(ns) >= min(xs):
        out.append(
            f"- {len(xs)} seeds per model is a small sample and the two sets of runs overlap ({runs_text}): the "
            "difference between the medians is not distinguishable from seed-to-seed variation."
        )
    else:
        out.append(
            f"- The two sets of runs do not overlap ({runs_text}), but {len(xs)} seeds per model is a small sample: "
            "read the ratio as an indication, not a measured effect size."
        )
    rhos = [r["prediction_spearman_vs_remeasured"] for r in xg_runs]
    shown = ", ".join("n/a" if v is None else f"{v:.2f}" for v in rhos)
    counts = ", ".join(str(r["ranked_trials"]) for r in xg_runs)
    known = [v for v in rhos if v is not None]
    quality = (
        "the model barely orders them"
        if known and statistics.median(known) < 0.3
        else "the model orders them only roughly"
        if known and statistics.median(known) < 0.7
        else "the model orders them well"
    )
    out.append(
        f"- The model's predictions, for the trials measured in ranked rounds ({counts} per seed), against their "
        f"re-measured latencies: rank correlation {shown} (seeds in order); {quality}. (These are the candidates "
        "the model put first, plus epsilon picks, so their range is narrower than the space's, which lowers any "
        "correlation; still, the ranking had little to work with.)"
    )
    near = p["schedules_within_5pct"]
    out.append(
        f"- The target is easy to hit without a model: only {p['feasible_schedules']} schedules of the space fit "
        f"{p['peak_limit'] // 1024} KiB and {len(near)} of them are within 5% of the best, so measuring feasible "
        f"schedules uniformly at random needs {p['random_expected_draws']:.1f} measurements on average; both medians "
        f"({x:g} and {n:g}) are of that order. A budget of {b} covers {b / p['feasible_schedules']:.0%} of the feasible "
        "space, and every run reached the target well within it."
        if p["random_expected_draws"] is not None and all(v <= b for v in xs + ns)
        else f"- Only {p['feasible_schedules']} schedules of the space fit {p['peak_limit'] // 1024} KiB, and "
        f"{len(near)} of them are within 5% of the best."
    )
    lim = p["config_trials"]
    xm = ", ".join(str(r["measured_with_trial_number_below_config_trials"]) for r in xg_runs)
    nm = ", ".join(str(r["measured_with_trial_number_below_config_trials"]) for r in none_runs)
    xl = ", ".join(str(r["trials_logged"]) for r in xg_runs)
    nl = ", ".join(str(r["trials_logged"]) for r in none_runs)
    out.append(
        f"- Where the modes do differ a lot is the tuner's own trial budget, which this benchmark deliberately "
        f"factors out: to reach {b} measurements the xgboost runs logged {xl} trials and the none runs {nl} (the "
        "rest infeasible or invalid). An xgboost round proposes 64 candidates but logs at most 8 infeasible or "
        "invalid ones; a none round proposes 8 and logs all of them. With the config's `search.trials: "
        f"{lim}`, a run would have measured about as many as these runs measured among their trials numbered below {lim}: {xm} (xgboost) against {nm} (none) "
        "(not exactly: the last round would be cut short). That is the batch-and-filter design of the xgboost mode, not the model's predictions."
    )
    bl = p["best_logged_trial"]
    out.append(
        f"- As logged (search-time figures, two workers timing at once on a shared machine), the medians are "
        f"{s['xgboost']['median_to_5pct_logged']:g} (xgboost) and {s['none']['median_to_5pct_logged']:g} (none). "
        f"That metric is not usable here: its best, {bl['logged_ms']:.3f} ms (seed {bl['seed']}, {bl['cost_model']}, "
        f"measurement {bl['k']}), is a schedule that re-measures at "
        + ("n/a" if bl["remeasured_ms"] is None else f"{bl['remeasured_ms']:.3f} ms")
        + ", a single low reading"
        + (
            f"; the target it sets, {bl['logged_ms'] * 1.05:.3f} ms, is below the re-measured latency of every "
            f"feasible schedule (the fastest is {p['space_best_ms']:.3f} ms), so a run reaches it only by logging "
            "another low outlier"
            if bl["logged_ms"] * 1.05 < p["space_best_ms"]
            else ""
        )
        + ". This is why the primary figures use one re-measurement of every schedule."
    )
    out.append(
        "- Scope: one workload at a reduced size, one limit, one budget, three seeds. It says nothing about larger "
        "spaces (no limit, or gemm), where ranking many feasible candidates per round is what a cost model is for."
    )
    return out


if __name__ == "__main__":
    raise SystemExit(main())
