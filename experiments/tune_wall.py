"""Where the wall time of one tune goes: the driver's parts, the workers' side, before and after a change.

    .venv/bin/python experiments/tune_wall.py bottleneck [--executor ray] [--trials N] [--label after]
        [--height H --width W] [--peak-limit 256KiB] [--worker-sample 8] [--output results]

Tunes one built-in config (``experiments/configs/builtins_64/<name>.yaml``, or a config file) from
scratch into a temporary directory, with empty numba and kernel caches (every compile counted),
and times the whole call: setting up, the fit check, starting the executor, the rounds, the
re-measure of the best, stopping the executor and the report. ``--height``, ``--width`` and
``--peak-limit`` make a smaller run of the same shape.

The parts are the stopwatch's (:mod:`autotune.search.stopwatch`: the loop's ``PARTS`` and the
``RUN_PARTS`` around it) as ``TuneResult.driver`` gives them. The code that runs is the
``autotune`` that Python imports, so an older commit checked out in a ``git worktree`` is timed
by putting it first on ``PYTHONPATH`` (``--label before``); a stopwatch with fewer parts leaves
the rest of the run as ``outside the loop``.

The workers' side: the numba compile time of every measured trial (``compile_s`` in the log), and,
with ``--worker-sample N``, N measured trials replayed after the run in this process under
cProfile (fresh kernel cache) to split a task into replaying + lowering the trace, generating and
loading the kernel source, compiling, running once and checking against the reference, and timing;
the means per task times the trials measured are the workers' seconds by part (two workers share
them).

``--same-log`` checks instead that a change keeps what the search does: it tunes with an executor
whose results depend only on the trace (no compile, no timing; the median a number drawn from the
trace's hash) and records a digest of the log (every trial's number, round, knobs, status, peaks,
reason, figures, prediction and trace). Two code versions that propose, judge, rank and log alike
give the same digest; a real run cannot show it, as its timings (noise) steer the cost model's
ranking from the second round on.

Prints the table and appends the run to ``<output>/tune_wall.json``; writes ``<output>/tune_wall.md``
from every run in it.
"""

from __future__ import annotations

import argparse
import cProfile
import datetime as dt
import json
import os
import pstats
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
CONFIGS = REPO / "experiments" / "configs" / "builtins_64"

HOST = "AMD EPYC (znver5), AVX-512, 2 cores"
NOTES = "<!-- notes: kept when the tables above are written again -->\n"

WORKER_PARTS = {
    # (file suffix, function name) whose cumulative time is the part, per replayed task
    "worker: replay + lowering": [("autotune/measure/task.py", "lower_task")],
    "worker: build (source, import: compiles the outlined nests)": [("autotune/codegen/build.py", "build")],
    "worker: compile of the entry function (compile_s)": [("autotune/codegen/build.py", "compile")],
    "worker: reference + check": [
        ("autotune/measure/task.py", "_prepare"),
        ("autotune/measure/check.py", "compare"),
    ],
    "worker: timing": [("autotune/measure/timing.py", "time_candidate")],
}


def config_path(name: str, args: argparse.Namespace, tmp: Path) -> Path:
    """The built-in's config (or the file ``name``) with the command line's changes, in ``tmp``."""
    path = Path(name) if name.endswith((".yaml", ".yml")) else CONFIGS / f"{name}.yaml"
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    wl_args = doc["workload"].setdefault("args", {})
    for key in ("height", "width"):
        if getattr(args, key) is not None:
            wl_args[key] = getattr(args, key)
    if args.peak_limit is not None:
        doc["memory"]["peak_limit"] = args.peak_limit
    if args.trials is not None:
        doc["search"]["trials"] = args.trials
    doc["output"] = str(tmp / "run")
    out = tmp / "config.yaml"
    out.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return out


def worker_parts(cfg: Any, records: list[Any], sample: int, tmp: Path) -> dict[str, Any]:
    """Replay ``sample`` measured trials in this process under cProfile; mean seconds per task by part."""
    from autotune.measure.task import run_task
    from autotune.search import candidates as cand

    measured = [r for r in records if r.status not in ("infeasible", "invalid") and r.trace]
    chosen = measured[:: max(1, len(measured) // sample)][:sample] if sample > 0 else []
    if not chosen:
        return {}
    os.environ["AUTOTUNE_CACHE_DIR"] = str(tmp / "replay_cache")  # compiled anew, as the workers did
    profile = cProfile.Profile()
    t0 = time.perf_counter()
    profile.enable()
    for record in chosen:
        run_task(cand.make_task(cfg, record.trace))
    profile.disable()
    wall = time.perf_counter() - t0
    stats = pstats.Stats(profile).stats  # type: ignore[attr-defined]
    per_task: dict[str, float] = {}
    for part, functions in WORKER_PARTS.items():
        seconds = 0.0
        for (file, _line, func), (_cc, _nc, _tt, cumulative, _callers) in stats.items():
            if func in [f for suffix, f in functions if file.endswith(suffix)]:
                seconds += cumulative
        per_task[part] = seconds / len(chosen)
    per_task["worker: rest of the task"] = max(0.0, wall / len(chosen) - sum(per_task.values()))
    return {"tasks": len(chosen), "per_task_s": {k: round(v, 4) for k, v in per_task.items()}}


def same_log(args: argparse.Namespace) -> dict[str, Any]:
    """Tune with results that depend only on the trace; the digest of the log."""
    import hashlib

    from autotune.config import load_config
    from autotune.measure.result import MeasureResult
    from autotune.search.executors import Executor
    from autotune.search.log import load
    from autotune.search.tuner import LOG_NAME, tune

    def result(task: Any) -> MeasureResult:
        ms = 0.1 + int(hashlib.sha256(task.trace.encode()).hexdigest()[:8], 16) % 1000 / 100
        return MeasureResult("ok", 0.0, ms, ms, 0.0, 10, compile_s=0.0, workspace_bytes=0)

    class ByTrace(Executor):
        name, workers = "by-trace", 1

        def run(self, tasks: Any) -> Any:
            yield from ((i, result(t), "by-trace") for i, t in enumerate(tasks))

        def remeasure(self, tasks: Any, rounds: int) -> list[list[MeasureResult]]:
            return [[result(t)] * rounds for t in tasks]

        def close(self) -> None:
            pass

    tmp = Path(tempfile.mkdtemp(prefix="tune_wall_same_"))
    cfg = load_config(config_path(args.config, args, tmp))
    t0 = time.perf_counter()
    driver = tune(cfg, progress=False, executor=ByTrace()).driver
    wall = time.perf_counter() - t0
    records = load(cfg.output / LOG_NAME)
    fields = ("trial", "round", "knobs", "status", "peak_bytes", "pool_bytes", "reason", "median_ms")
    rows = [[getattr(r, f) for f in fields] + [r.predicted_ms, r.trace] for r in records]
    import autotune

    return {
        "kind": "same-log",
        "label": args.label,
        "command": " ".join([".venv/bin/python", "experiments/tune_wall.py", *sys.argv[1:]]),
        "pythonpath": os.environ.get("PYTHONPATH", ""),
        "autotune_file": str(Path(autotune.__file__).resolve().parent),
        "date_utc": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M"),
        "trials": len(records),
        "statuses": dict(sorted(Counter(r.status for r in records).items())),
        "digest": hashlib.sha256(json.dumps(rows, default=str).encode()).hexdigest(),
        "wall_s": round(wall, 2),
        "parts": {} if driver is None else {n: round(s, 2) for n, s in driver.parts},
    }


def one_run(args: argparse.Namespace) -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix="tune_wall_"))
    for var, sub in (("NUMBA_CACHE_DIR", "numba"), ("AUTOTUNE_CACHE_DIR", "autotune")):
        os.environ[var] = str(tmp / sub)  # inherited by the workers started below
    from autotune.config import load_config
    from autotune.report import write_report
    from autotune.search.log import load
    from autotune.search.records import machine
    from autotune.search.tuner import LOG_NAME, tune

    path = config_path(args.config, args, tmp)
    cfg = load_config(path)
    t0 = time.perf_counter()
    result = tune(cfg, progress=False, executor=args.executor, report=write_report)
    wall = time.perf_counter() - t0
    driver = result.driver
    assert driver is not None
    outside = getattr(driver, "outside", ())
    parts = {n: s for n, s in driver.parts}
    parts["other"] = driver.other_s
    run_parts = dict(outside) if outside else {}
    run_parts["outside the loop" if not outside else "unaccounted"] = max(
        0.0, wall - driver.total_s - sum(run_parts.values())
    )
    records = load(cfg.output / LOG_NAME)
    statuses = Counter(r.status for r in records)
    compiles = [r.compile_s for r in records if r.compile_s is not None]
    workers = worker_parts(cfg, records, args.worker_sample, tmp)
    import autotune

    return {
        "label": args.label,
        "config": args.config,
        "workload": {"name": cfg.workload.name, "args": dict(cfg.workload.args)},
        "peak_limit": cfg.memory.peak_limit,
        "trials": cfg.search.trials,
        "executor": args.executor,
        "command": " ".join([".venv/bin/python", "experiments/tune_wall.py", *sys.argv[1:]]),
        "pythonpath": os.environ.get("PYTHONPATH", ""),
        "autotune_file": str(Path(autotune.__file__).resolve().parent),
        "date_utc": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M"),
        "machine": {k: machine()[k] for k in ("cpu", "llvm_cpu", "cores")},
        "load_after": [round(x, 2) for x in os.getloadavg()],
        "wall_s": round(wall, 2),
        "loop_s": round(driver.total_s, 2),
        "parts_s": {k: round(v, 3) for k, v in parts.items()},
        "run_parts_s": {k: round(v, 3) for k, v in run_parts.items()},
        "statuses": dict(sorted(statuses.items())),
        "compile_s_sum": round(sum(compiles), 2),
        "compile_s_median": round(statistics.median(compiles), 3) if compiles else None,
        "best_ms": result.figures.median_ms,
        "best_trial": result.best.trial,
        "workers": workers,
    }


def table(run: dict[str, Any]) -> list[tuple[str, float]]:
    """``(part, seconds)`` of the run: the parts around the loop, then the loop's, then the workers' estimate."""
    rows = [(f"run: {n}", s) for n, s in run["run_parts_s"].items()]
    rows += [(f"loop: {n}", s) for n, s in run["parts_s"].items()]
    return rows


def worker_rows(run: dict[str, Any]) -> list[tuple[str, float]]:
    w = run.get("workers") or {}
    measured = sum(n for s, n in run["statuses"].items() if s not in ("infeasible", "invalid"))
    return [(k, v * measured) for k, v in w.get("per_task_s", {}).items()]


def print_run(run: dict[str, Any]) -> None:
    wall = run["wall_s"]
    print(
        f"{run['label']}: {run['command']}\nwall {wall:.1f} s, loop {run['loop_s']:.1f} s; {run['statuses']}"
    )
    for name, s in table(run):
        print(f"  {name:32s} {s:9.2f} s  {s / wall:6.1%}")
    print(f"  compile_s in the log: {run['compile_s_sum']:.1f} s (median {run['compile_s_median']})")
    for name, s in worker_rows(run):
        print(f"  {name:32s} {s:9.2f} worker-s")


def markdown(runs: list[dict[str, Any]]) -> str:
    lines = [
        "# Where a tune's wall time goes",
        "",
        f"Host: {HOST}. Written by `experiments/tune_wall.py` (its docstring says how each figure is "
        "made). Each run tunes from scratch with empty numba and kernel caches; `before` runs import the "
        "older commit from a `git worktree` put first on `PYTHONPATH`.",
        "",
    ]
    checks = [r for r in runs if r.get("kind") == "same-log"]
    runs = [r for r in runs if r.get("kind") != "same-log"]
    if checks:
        lines += ["## Same search (`--same-log`)", ""]
        for c in checks:
            where = f" with PYTHONPATH={c['pythonpath']}" if c["pythonpath"] else ""
            lines.append(
                f"- `{c['label']}` ({c['date_utc']} UTC, autotune from `{c['autotune_file']}`): `{c['command']}`"
                f"{where}: {c['trials']} trials {c['statuses']}, log digest `{c['digest'][:16]}`, "
                f"driver {c['wall_s']:.1f} s"
                + (
                    f" ({', '.join(f'{n} {v:.1f} s' for n, v in c['parts'].items())})"
                    if c.get("parts")
                    else ""
                )
            )
        lines.append("")
    groups: dict[str, list[dict[str, Any]]] = {}
    for run in runs:
        key = f"{run['workload']['name']} {run['workload']['args']}, peak_limit {run['peak_limit']}, " + (
            f"{run['trials']} trials, executor {run['executor']}"
        )
        groups.setdefault(key, []).append(run)
    for key, group in groups.items():
        lines += [f"## {key}", ""]
        for run in group:
            lines.append(
                f"- `{run['label']}` ({run['date_utc']} UTC, autotune from `{run['autotune_file']}`): "
                f"`{run['command']}`{' with PYTHONPATH=' + run['pythonpath'] if run['pythonpath'] else ''}; "
                f"wall **{run['wall_s']:.1f} s**, loop {run['loop_s']:.1f} s; trials {run['statuses']}; "
                f"compile_s sum {run['compile_s_sum']:.1f} s; best {run['best_ms']:.4g} ms (trial "
                f"{run['best_trial']}); load after {run['load_after']}"
            )
        names: list[str] = []
        for run in reversed(group):  # the latest run's parts first
            names += [n for n, _ in table(run) + worker_rows(run) if n not in names]
        lines += ["", "| part | " + " | ".join(r["label"] for r in group) + " |"]
        lines.append("| --- |" + " ---: |" * len(group))
        lines.append("| **wall** | " + " | ".join(f"**{r['wall_s']:.1f} s**" for r in group) + " |")
        for name in names:
            cells = []
            for run in group:
                values = dict(table(run))
                if name in values:
                    cells.append(f"{values[name]:.1f} s ({values[name] / run['wall_s']:.0%})")
                else:
                    w = dict(worker_rows(run))
                    cells.append(f"{w[name]:.1f} worker-s" if name in w else "")
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
        lines.append("")
    lines += [
        "Parts: `run:` around the search loop (setup, the fit check, starting the executor, re-measuring "
        "the best and writing it, stopping the executor, the report); `loop:` the rounds (`wait` is the driver "
        "blocked on the workers, the rest its own work); `worker:` the workers' seconds by part, estimated "
        "from the replayed sample (the two workers share them, so they overlap each other and `loop: wait`).",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "config", help="a built-in's name in experiments/configs/builtins_64, or a config file"
    )
    parser.add_argument("--executor", default="ray", choices=("ray", "local"))
    parser.add_argument("--trials", type=int)
    parser.add_argument("--height", type=int)
    parser.add_argument("--width", type=int)
    parser.add_argument("--peak-limit", dest="peak_limit")
    parser.add_argument("--label", default="after")
    parser.add_argument("--worker-sample", dest="worker_sample", type=int, default=8)
    parser.add_argument("--output", type=Path, default=REPO / "results")
    parser.add_argument(
        "--same-log", dest="same_log", action="store_true", help="digest of a run with fake results"
    )
    args = parser.parse_args(argv)
    if args.same_log:
        run = same_log(args)
        print(f"{run['label']}: {run['trials']} trials {run['statuses']}, log digest {run['digest']}")
        print("driver: " + ", ".join(f"{n} {v:.2f} s" for n, v in run["parts"].items()))
    else:
        run = one_run(args)
        print_run(run)
    args.output.mkdir(parents=True, exist_ok=True)
    store = args.output / "tune_wall.json"
    runs = json.loads(store.read_text(encoding="utf-8")) if store.exists() else []
    runs.append(run)
    store.write_text(json.dumps(runs, indent=1) + "\n", encoding="utf-8")
    md = args.output / "tune_wall.md"
    notes = md.read_text(encoding="utf-8").partition(NOTES)[2] if md.exists() else ""
    md.write_text(markdown(runs) + (NOTES + notes if notes else ""), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
