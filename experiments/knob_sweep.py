"""One knob swept from logged schedules with every other knob held: the host's times against the
roofline estimate.

    .venv/bin/python experiments/knob_sweep.py CONFIG --logs GLOB [GLOB ...] --knob NAME
        [--values JSON ...] [--bases 3] [--rounds 5] [--output DIR]

The bases are the ``--bases`` fastest distinct ``ok`` schedules (by their search medians) of the
logs ``--logs`` (``trials.jsonl`` files of runs of CONFIG's workload and space) in which the knob
``--knob`` is active. Each base is replayed with the knob set to each of ``--values`` (default:
every choice the space gives it), its other decisions kept (a knob the new value makes active takes
its default). Every variant is lowered in CONFIG's pools and limit (an infeasible one is listed with
its reason), its roofline estimate computed (:func:`autotune.search.features.features`'s
``log2_estimate_ns``), and all feasible variants are timed together as the end of a run re-times its
best (:meth:`~autotune.search.executors.Executor.remeasure`: one worker, alternating, ``--rounds``
rounds, checked against numpy). A variant's ratio is the median over rounds of its time over its
base's time in the same round, so the host's slow phases hit both sides.

Writes ``DIR/knob_sweep_<knob>.md`` and ``.json`` (``DIR`` defaults to ``results``).
"""

from __future__ import annotations

import argparse
import datetime as dt
import glob
import json
import os
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sample_efficiency import host_line
from thread_scaling import write_results

from autotune.config import load_config
from autotune.config.workload import load_workload
from autotune.errors import AutotuneError
from autotune.schedule.trace import loads as loads_trace
from autotune.search import candidates as cand
from autotune.search.executors.local_executor import LocalExecutor
from autotune.search.features import features
from autotune.search.log import load
from autotune.search.records import machine, trace_key
from autotune.search.space import load_space

REPO = Path(__file__).resolve().parents[1]


def bases(paths: Sequence[Path], knob: str, count: int) -> list[tuple[float, str]]:
    """The ``count`` fastest distinct ``ok`` schedules of the logs whose traces decide ``knob``:
    ``(search median ms, trace)``."""
    best: dict[str, tuple[float, str]] = {}
    for path in paths:
        for r in load(path):
            if r.status != "ok" or r.median_ms is None or not r.trace:
                continue
            if not any(s.op == "sample" and s.kwargs()["name"] == knob for s in loads_trace(r.trace)):
                continue
            key = trace_key(r.trace)
            if key not in best or r.median_ms < best[key][0]:
                best[key] = (r.median_ms, r.trace)
    return sorted(best.values())[:count]


def variants(
    config: Path, logs: Sequence[Path], knob: str, values: Sequence[Any] | None, count: int
) -> dict[str, Any]:
    """Every base's variants, lowered and estimated; the feasible ones with their task."""
    cfg = load_config(config)
    wl = load_workload(cfg.workload)
    mem = cfg.memory
    space = load_space(cfg.search.space, wl, mem.pools)
    choices = {k.name: k.choices for k in space.knobs}
    if knob not in choices:
        raise SystemExit(f"{config}: the space has no knob {knob!r} with a choice; it has {sorted(choices)}")
    swept = list(values) if values is not None else list(choices[knob])
    rows: list[dict[str, Any]] = []
    tasks: dict[str, Any] = {}
    for b, (search_ms, trace) in enumerate(bases(logs, knob, count)):
        held = space.decisions(trace)
        for value in swept:
            row: dict[str, Any] = {
                "base": b, "base_search_ms": search_ms, "value": value, "own": value == held[knob],
                "knobs": {**held, knob: value},
            }  # fmt: skip
            rows.append(row)
            try:
                sch = space.apply(wl.func, {**held, knob: value})
            except (AutotuneError, ValueError) as e:
                row["error"] = str(e)
                continue
            low = cand.lower_candidate(sch.func, mem.pools, mem.planner, cfg.search.seed, mem.peak_limit)
            if low.lowered is None:
                row["error"] = low.reason
                continue
            feats = features(low.lowered.func, low.lowered.plan, original=wl.func, target=space.target)
            row["estimate_ms"] = (2.0 ** feats["log2_estimate_ns"] - 1.0) / 1e6
            row["peak_bytes"] = low.peak
            replayed = sch.trace_json()
            row["key"] = key = trace_key(replayed)
            tasks[key] = cand.make_task(cfg, replayed)
    return {"rows": rows, "tasks": tasks, "swept": swept}


def attach_times(
    rows: list[dict[str, Any]], timed: dict[str, list[float | None]], reasons: dict[str, str]
) -> None:
    """Give each timed row its rounds and median (or the failure's reason), then its ratios to its
    base's own row, per round (once every row has its times: a base's own value may come last)."""
    for row in rows:
        if "key" not in row:
            continue
        row["rounds_ms"] = timed[row["key"]]
        if None in row["rounds_ms"]:
            row["error"] = reasons[row["key"]]
            continue
        row["ms"] = statistics.median(row["rounds_ms"])
    own_of = {r["base"]: r for r in rows if r["own"]}
    for row in rows:
        own = own_of[row["base"]]
        if "ms" in row and "ms" in own:
            row["ratio"] = statistics.median(t / o for t, o in zip(row["rounds_ms"], own["rounds_ms"]))
            row["estimate_ratio"] = row["estimate_ms"] / own["estimate_ms"]


def sweep(
    config: Path, logs: Sequence[Path], knob: str, values: Sequence[Any] | None, count: int, rounds: int
) -> dict[str, Any]:
    made = variants(config, logs, knob, values, count)
    rows, tasks = made["rows"], made["tasks"]
    keys = sorted(tasks)
    print(f"timing {len(keys)} schedules, {rounds} rounds", file=sys.stderr, flush=True)
    load_start = list(os.getloadavg())
    with LocalExecutor(workers=1) as executor:
        results = executor.remeasure([tasks[k] for k in keys], rounds)
    timed = {k: [x.median_ms if x.status == "ok" else None for x in rs] for k, rs in zip(keys, results)}
    reasons = {k: next((x.reason for x in rs if x.status != "ok"), "") for k, rs in zip(keys, results)}
    attach_times(rows, timed, reasons)
    return {
        "config": str(config), "logs": [str(p) for p in logs], "knob": knob, "values": made["swept"],
        "bases": count, "rounds": rounds, "rows": rows,
        "machine": machine(), "load_average": {"start": load_start, "end": list(os.getloadavg())},
    }  # fmt: skip


def table(result: dict[str, Any], argv: Sequence[str], date: str) -> list[str]:
    knob = result["knob"]
    lines = [
        f"# {knob} swept from logged schedules, every other knob held",
        "",
        f"Command: `.venv/bin/python experiments/knob_sweep.py {' '.join(argv)}`  ",
        f"Date: {date}  ",
        f"{host_line(result['machine'], result['load_average'])}  ",
        f"Each base's own {knob} is marked *. Ratios are to the base's own value, per round (median of "
        f"{result['rounds']} rounds); the estimate's ratio is the roofline estimate's.",
        "",
        f"| base | {knob} | ms (median of rounds) | ratio | estimate ms | estimate ratio | peak bytes |",
        "| ---: | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in result["rows"]:
        value = f"{r['value']}{'*' if r.get('own') else ''}"
        if "ms" not in r:
            lines.append(f"| {r['base']} | {value} | {r.get('error', '')} | | | | |")
            continue
        ratio = f"{r['ratio']:.3f}" if "ratio" in r else "-"
        est = f"{r['estimate_ratio']:.3f}" if "estimate_ratio" in r else "-"
        lines.append(
            f"| {r['base']} | {value} | {r['ms']:.4f} | {ratio} | {r['estimate_ms']:.4f} | {est} "
            f"| {r['peak_bytes']:,} |"
        )
    held = {}
    for r in result["rows"]:
        if r.get("own"):
            held[r["base"]] = ", ".join(f"{k}={v}" for k, v in r["knobs"].items())
    lines += ["", "Bases (their logged decisions):", ""]
    lines += [f"- {b}: {text}" for b, text in sorted(held.items())]
    return [*lines, ""]


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("config", type=Path)
    parser.add_argument("--logs", nargs="+", required=True, metavar="GLOB")
    parser.add_argument("--knob", required=True)
    parser.add_argument("--values", nargs="+", type=json.loads, default=None, metavar="JSON")
    parser.add_argument("--bases", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--output", type=Path, default=REPO / "results")
    args = parser.parse_args(argv)
    logs = sorted(Path(p) for pattern in args.logs for p in glob.glob(pattern))
    if not logs:
        raise SystemExit(f"no log matches {args.logs}")
    from autotune.codegen import configure_numba_env

    configure_numba_env()
    date = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    result = sweep(args.config, logs, args.knob, args.values, args.bases, args.rounds)
    write_results(args.output, f"knob_sweep_{args.knob}", table(result, argv, date), result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
