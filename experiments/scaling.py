"""How the tuner scales from 1 to 2 Ray workers on this machine, and where the driver's time goes.

    .venv/bin/python experiments/scaling.py [--trials 32] [--seed 0] [--workers 1 2] [--output results]

One config, tuned once per worker count, in this order, in one run of the
script: ``experiments/configs/bottleneck_cm.yaml`` (bottleneck 16 -> 96 -> 16
at 56x56, TPE, cost_model xgboost) with its pools enlarged to dtcm 4 MiB +
sram 8 MiB and ``peak_limit`` removed, so that every candidate fits and is
measured rather than rejected as infeasible (an infeasible trial costs the
workers nothing), and ``search.trials`` = ``--trials``, the same seed.
Each run gets a local Ray with ``num_cpus = workers`` (its start is not
counted) and fresh, empty numba and kernel caches (directories under a
temporary directory), so neither run profits from the other's compiles.

Throughput is over the search loop only (``TuneResult.driver.total_s``: from
the first proposal to the last result; not Ray's start, not the final
re-measure): logged trials per minute (``ok`` + ``infeasible`` + ``invalid``
+ failures, the unit of ``search.trials``) and measured trials per minute (the
ones sent to a worker). The tuner is synchronous per round: it proposes, ranks
and then waits while the round is measured, so the driver's own work
(``busy``) does not overlap the workers'. With ``W`` the time the 1-worker run
waited on its worker and ``D`` its own work, a second worker can at best
halve ``W``: the bound is ``(D + W) / (D + W / 2)``, lower still when the
timed parts (serialised by the machine's timing lock) or the 2 shared cores
(2 workers compiling + the driver + anything else running) limit the halving.

Writes ``<output>/scaling.md`` and ``<output>/scaling.json``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]

from autotune.config import RunConfig, load_config  # noqa: E402
from autotune.search.executors import make_executor  # noqa: E402
from autotune.search.log import load  # noqa: E402
from autotune.search.stopwatch import PARTS, WAIT  # noqa: E402
from autotune.search.tuner import LOG_NAME, tune  # noqa: E402

CONFIG = REPO / "experiments" / "configs" / "bottleneck_cm.yaml"
MEASURED = ("ok", "wrong", "crashed", "timeout", "error")
POOL_BYTES = {"dtcm": 4 << 20, "sram": 8 << 20}  # room for every schedule (unscheduled: 2.3 MiB)


def config_for(trials: int, seed: int, workers: int, output: Path) -> RunConfig:
    cfg = load_config(
        CONFIG, overrides={"trials": trials, "seed": seed, "output": str(output), "workers": workers}
    )
    pools = tuple(replace(p, size=POOL_BYTES[p.name]) for p in cfg.memory.pools)
    return replace(cfg, memory=replace(cfg.memory, pools=pools, peak_limit=None))


def one_run(trials: int, seed: int, workers: int, tmp: Path) -> dict[str, Any]:
    """Tune with ``workers`` workers on a fresh local Ray and fresh caches; return the run's figures."""
    for var, sub in (("NUMBA_CACHE_DIR", "numba"), ("AUTOTUNE_CACHE_DIR", "autotune")):
        os.environ[var] = str(tmp / f"cache_w{workers}" / sub)  # inherited by the Ray workers started below
    cfg = config_for(trials, seed, workers, tmp / f"run_w{workers}")
    load_before = os.getloadavg()
    t0 = time.perf_counter()
    executor = make_executor("ray", address=None, workers=workers)
    ray_start_s = time.perf_counter() - t0
    try:
        t1 = time.perf_counter()
        result = tune(cfg, progress=False, executor=executor)
        tune_s = time.perf_counter() - t1
    finally:
        executor.close()
    driver = result.driver
    assert driver is not None
    records = load(cfg.output / LOG_NAME)
    measured = [r for r in records if r.status in MEASURED]
    ok = [r for r in records if r.ok]
    compile_s = [r.compile_s for r in measured if r.compile_s is not None]
    m = cfg.measure
    timed_s = sum((m.warmup + m.repeats) * r.median_ms for r in ok if r.median_ms is not None) / 1000
    minutes = driver.total_s / 60
    run = {
        "workers": workers,
        "trials_logged": len(records),
        "trials_measured": len(measured),
        "trials_ok": len(ok),
        "status_counts": {
            s: sum(r.status == s for r in records) for s in sorted({r.status for r in records})
        },
        "nodes": sorted({r.node for r in measured}),
        "ray_start_s": round(ray_start_s, 2),
        "tune_s": round(tune_s, 2),
        "loop_s": round(driver.total_s, 2),
        "finish_s": round(tune_s - driver.total_s, 2),
        "logged_per_min": round(len(records) / minutes, 1),
        "measured_per_min": round(len(measured) / minutes, 1),
        "idle_fraction": round(driver.idle_fraction, 3),
        "wait_s": round(driver.wait_s, 2),
        "busy_s": round(driver.busy_s, 2),
        "parts_s": {**{n: round(s, 3) for n, s in driver.parts}, "other": round(driver.other_s, 3)},
        "compile_s_median": round(sorted(compile_s)[len(compile_s) // 2], 3) if compile_s else None,
        "compile_s_sum": round(sum(compile_s), 2),
        "timed_s_sum": round(timed_s, 3),
        "best_ms": result.figures.median_ms,
        "load_before": [round(x, 2) for x in load_before],
        "load_after": [round(x, 2) for x in os.getloadavg()],
    }
    print(
        f"workers={workers}: {run['trials_logged']} trials ({run['trials_measured']} measured) in "
        f"{run['loop_s']:.1f} s of search loop: {run['logged_per_min']:.1f} trials/min, "
        f"{run['measured_per_min']:.1f} measured/min; driver idle {run['idle_fraction']:.0%}; {driver.text()}",
        flush=True,
    )
    return run


def analyse(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The ratios, the Amdahl bound from the 1-worker run, and which part bounds the scaling."""
    one, two = runs[0], runs[-1]
    ratio_logged = two["logged_per_min"] / one["logged_per_min"]
    ratio_measured = two["measured_per_min"] / one["measured_per_min"]
    per_trial = {r["workers"]: r["wait_s"] / max(1, r["trials_measured"]) for r in runs}
    busy_per_trial = {r["workers"]: r["busy_s"] / max(1, r["trials_measured"]) for r in runs}
    d, w = one["busy_s"], one["wait_s"]
    bound = (d + w) / (d + w / 2) if d + w > 0 else None
    timed_share = one["timed_s_sum"] / w if w > 0 else 0.0
    part, seconds = max(((n, s) for n, s in two["parts_s"].items() if n != WAIT), key=lambda x: x[1])
    if two["idle_fraction"] >= 0.5:
        bottleneck = (
            f"the measurement side, not the driver: with 2 workers the driver still waits "
            f"{two['idle_fraction']:.0%} of the loop, and its own work is {1 - two['idle_fraction']:.0%} "
            f"(biggest part: {part}, {seconds:.1f} s). The 2 workers already fill the 2 cores: a compile took "
            f"{two['compile_s_median']} s (median) with 2 workers against {one['compile_s_median']} s with 1, "
            "so a third worker on this machine would only stretch every compile further"
        )
    else:
        bottleneck = (
            f"the driver: with 2 workers it works {1 - two['idle_fraction']:.0%} of the loop and waits only "
            f"{two['idle_fraction']:.0%}; its biggest part is {part} ({seconds:.1f} s of {two['loop_s']:.1f} s)"
        )
    return {
        "ratio_logged_per_min": round(ratio_logged, 2),
        "ratio_measured_per_min": round(ratio_measured, 2),
        "wait_s_per_measured": {k: round(v, 3) for k, v in per_trial.items()},
        "busy_s_per_measured": {k: round(v, 3) for k, v in busy_per_trial.items()},
        "amdahl_bound_from_1_worker": None if bound is None else round(bound, 2),
        "timed_share_of_1_worker_wait": round(timed_share, 4),
        "bottleneck": bottleneck,
    }


def markdown(p: dict[str, Any]) -> str:
    runs, a = p["runs"], p["analysis"]
    la = p["load_start"]
    # the driver's parts as the runs recorded them
    parts = [n for n in runs[0]["parts_s"] if n not in (WAIT, "other")]
    lines = [
        "# Scaling from 1 to 2 Ray workers",
        "",
        f"Command: `cd /work/main && {p['command']}`  ",
        f"Date: {p['date_utc']} UTC; {p['platform']}, {p['cpus']} CPUs, python {p['python']}; "
        f"load average (1/5/15 min) at start {la[0]:.2f}/{la[1]:.2f}/{la[2]:.2f}; {p['total_s']:.0f} s in all.",
        *(
            [
                f"Report text regenerated from the JSON with `--render` at {p['rendered_utc']} UTC; every figure "
                "is from the run above."
            ]
            if "rendered_utc" in p
            else []
        ),
        "",
        "## Setup",
        "",
        f"- Config `experiments/configs/bottleneck_cm.yaml` (bottleneck 16 -> 96 -> 16 at 56x56, space cascade, TPE, "
        f"cost_model xgboost, batch {p['batch']}, {p['measure_per_round']} measured per round) with the pools "
        "enlarged to dtcm 4 MiB + sram 8 MiB and peak_limit removed, so that every candidate fits and is measured; "
        f"search.trials = {p['trials']}, seed {p['seed']}; measure: warmup "
        f"{p['warmup']}, repeats {p['repeats']}, the machine's timing lock on (the default).",
        "- One run per worker count, in the order of the table, each on a fresh local Ray (num_cpus = workers; its "
        "start is not counted) with empty numba and kernel caches.",
        "- Rates are over the search loop (first proposal to last result; not Ray's start, not the final "
        "re-measure of the top 5). The driver's time is split by `TuneResult.driver`: `wait` is time blocked "
        "on the executor; the rest is the driver's own work.",
        "",
        "## Results",
        "",
        "| workers | trials logged (measured) | loop s | trials/min | measured/min | driver idle | wait s | "
        + "".join(f"{n} s | " for n in parts)
        + "other s | median compile s | timed s | load before |",
        "| ---: " * (10 + len(parts)) + "| --- |",
    ]
    for r in runs:
        ps = r["parts_s"]
        lines.append(
            f"| {r['workers']} | {r['trials_logged']} ({r['trials_measured']}) | {r['loop_s']:.1f} | "
            f"{r['logged_per_min']:.1f} | {r['measured_per_min']:.1f} | {r['idle_fraction']:.0%} | {ps['wait']:.1f} | "
            + "".join(f"{ps.get(n, 0.0):.2f} | " for n in parts)
            + f"{ps['other']:.2f} | {r['compile_s_median']} | {r['timed_s_sum']:.2f} | "
            f"{'/'.join(f'{x:.2f}' for x in r['load_before'])} |"
        )
    lines += [
        "",
        f"Ratio 2 workers / 1 worker: **{a['ratio_logged_per_min']:.2f}x** trials/min, "
        f"**{a['ratio_measured_per_min']:.2f}x** measured trials/min. Bound from the 1-worker run if a second "
        f"worker halved its waiting and nothing else changed: {a['amdahl_bound_from_1_worker']}x. Trials/min "
        f"also counts the trials that were never measured ({runs[0]['trials_logged'] - runs[0]['trials_measured']} "
        f"and {runs[-1]['trials_logged'] - runs[-1]['trials_measured']} here: invalid or infeasible, no cost to the "
        "workers), so measured/min is the figure to compare.",
        "",
        "Parts: "
        + "; ".join(f"`{n}` {PARTS[n]}" for n in (WAIT, *parts) if n in PARTS)
        + "; `other` what no part covers.",
        "`timed s` is the timed part of the ok trials (warm-up + repeats x median), the only part the "
        f"timing lock serialises: {a['timed_share_of_1_worker_wait']:.1%} of the 1-worker run's waiting.",
        "",
        "## What bounds the scaling",
        "",
        f"The bottleneck is {a['bottleneck']}.",
        "",
        "The machine was shared: other processes (see the load averages) used the cores and, when they timed "
        "kernels, the same per-machine timing lock, so both runs are slower than on an idle machine; one run "
        "per worker count gives no error bar, and a ratio above the bound can only be such noise.",
        "",
        p["conclusion"],
        "",
    ]
    return "\n".join(lines)


def conclusion(p: dict[str, Any]) -> str:
    one, two, a = p["runs"][0], p["runs"][-1], p["analysis"]
    return (
        f"Waiting per measured trial went from {a['wait_s_per_measured'][1]:.2f} s (1 worker) to "
        f"{a['wait_s_per_measured'][2]:.2f} s (2 workers), where perfect overlap would give "
        f"{a['wait_s_per_measured'][1] / 2:.2f} s; the driver's own work per measured trial was "
        f"{a['busy_s_per_measured'][1]:.2f} s and {a['busy_s_per_measured'][2]:.2f} s. "
        f"The machine has 2 cores: 2 workers compiling take both, the driver runs between rounds (the tuner "
        f"does not propose while a round is measured), and the load average was {p['load_start'][0]:.2f} "
        f"at the start, so other processes held part of a core. The timing lock costs little here: the timed parts "
        f"add up to {one['timed_s_sum']:.2f} s and {two['timed_s_sum']:.2f} s, against "
        f"{one['compile_s_sum']:.1f} s and {two['compile_s_sum']:.1f} s of compiling; compiles dominate a "
        "measurement, so the lock would bound the scaling only for kernels whose timed runs are as long as a compile."
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--trials", type=int, default=32, help="search.trials of each run")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--output", default=str(REPO / "results"))
    parser.add_argument("--render", metavar="JSON", help="only rewrite the report from an existing JSON")
    args = parser.parse_args(argv)
    if args.render:
        path = Path(args.render)
        payload = json.loads(path.read_text(encoding="utf-8"))
        payload["runs"] = [{**r, "workers": int(r["workers"])} for r in payload["runs"]]
        payload["analysis"] = analyse(payload["runs"])
        payload["conclusion"] = conclusion(payload)
        payload["rendered_utc"] = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M")
        path.write_text(json.dumps(payload, indent=1) + "\n", encoding="utf-8")
        path.with_suffix(".md").write_text(markdown(payload), encoding="utf-8")
        return 0
    started, date = time.perf_counter(), dt.datetime.now(dt.timezone.utc)
    load_start = os.getloadavg()
    out_dir = Path(args.output)
    out_dir.mkdir(parents=True, exist_ok=True)
    runs = []
    with tempfile.TemporaryDirectory(prefix="scaling_") as tmp:
        for workers in args.workers:
            runs.append(one_run(args.trials, args.seed, workers, Path(tmp)))
        cfg = config_for(args.trials, args.seed, 1, Path(tmp) / "unused")
    payload: dict[str, Any] = {
        "command": " ".join([".venv/bin/python", "experiments/scaling.py", *(argv or sys.argv[1:])]),
        "date_utc": date.strftime("%Y-%m-%d %H:%M"),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "load_start": [round(x, 2) for x in load_start],
        "trials": args.trials,
        "seed": args.seed,
        "batch": cfg.search.batch,
        "measure_per_round": cfg.search.measure_per_round,
        "warmup": cfg.measure.warmup,
        "repeats": cfg.measure.repeats,
        "runs": runs,
        "analysis": analyse(runs),
    }
    payload["conclusion"] = conclusion(payload)
    payload["total_s"] = round(time.perf_counter() - started, 1)
    a = payload["analysis"]
    print(
        f"ratio 2/1 workers: {a['ratio_logged_per_min']:.2f}x trials/min, {a['ratio_measured_per_min']:.2f}x "
        f"measured/min (bound from the 1-worker run: {a['amdahl_bound_from_1_worker']}x)"
    )
    print(f"bottleneck: {a['bottleneck']}")
    print(payload["conclusion"])
    (out_dir / "scaling.json").write_text(json.dumps(payload, indent=1) + "\n", encoding="utf-8")
    (out_dir / "scaling.md").write_text(markdown(payload), encoding="utf-8")
    print(f"wrote {out_dir / 'scaling.md'} and {out_dir / 'scaling.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
