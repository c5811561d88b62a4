"""A tuned schedule against variants of it with some knobs changed, timed in one process.

    .venv/bin/python experiments/knob_variants.py WORKLOAD NAME=JSON [NAME=JSON ...]
        [--rounds 4] [--min-ms 100] [--output results]

Replays the knobs of ``results/<workload>/best.json`` through the search space of
``experiments/configs/<workload>.yaml`` (full size, its pools, planner and seed),
and the same knobs with each ``NAME=JSON`` override applied, for example
``'tile1={"regtile_expand": 1}'``. Every variant is lowered, built and checked
against numpy, then each round times every variant in turn on 2 threads (the
median of at least ``--min-ms`` of back-to-back calls). A variant's ratio is the
median over rounds of its time divided by the tuned schedule's time in the same
round, so slow phases of the host (minutes when every kernel runs 1.3-2x slower)
hit both sides of a ratio.
A variant that the space rejects is listed with the reason. Writes
``<output>/knob_variants_<workload>.md`` and ``.json``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_vs_baselines as bench
from thread_scaling import _median_ms, write_results

from autotune import workloads
from autotune.config import load_config
from autotune.errors import AutotuneError
from autotune.lowering import lower
from autotune.measure import reference_outputs
from autotune.memory import Pool
from autotune.search.space import load_space

REPO = bench.REPO


def parse_variant(text: str) -> tuple[str, dict[str, Any]]:
    name, sep, knobs = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"expected NAME=JSON, got {text!r}")
    try:
        values = json.loads(knobs)
    except json.JSONDecodeError as e:
        raise argparse.ArgumentTypeError(f"{name}: the knobs are not JSON ({e})") from None
    if not isinstance(values, dict):
        raise argparse.ArgumentTypeError(f"{name}: expected a JSON object of knob values, got {knobs!r}")
    return name, values


def run(workload: str, variants: list[tuple[str, dict[str, Any]]], rounds: int, min_ms: float) -> dict[str, Any]:
    from autotune.codegen import configure_numba_env

    configure_numba_env()  # 512-bit vectors on AVX-512: before numba reads its configuration
    import numba

    numba.set_num_threads(2)
    cfg = load_config(REPO / "experiments" / "configs" / f"{workload}.yaml")
    wl = workloads.get(workload, **bench.FULL[workload])
    best, why = bench.read_best(REPO / "results" / workload / "best.json", wl)
    if best is None:
        raise SystemExit(why)
    pools = tuple(Pool(p["name"], p["size"]) for p in best["pools"])
    space = load_space(cfg.search.space, wl, pools)
    inputs = wl.make_inputs(0)
    expected = reference_outputs(wl, inputs)
    built, rows = {}, []
    for name, knobs in [("tuned", {}), *variants]:
        values = {**best["knobs"], **knobs}
        row: dict[str, Any] = {"variant": name, "knobs": knobs}
        try:
            lowered = lower(space.apply(wl.func, values).func, pools=pools, planner=best["planner"], seed=best["seed"])
        except (AutotuneError, ValueError) as e:
            rows.append({**row, "error": str(e)})
            continue
        system = bench.numba_system(name, lowered, inputs, expected)  # built and checked against numpy
        if system.run is None:
            rows.append({**row, "error": system.error})
            continue
        built[name] = system.run
        rows.append({**row, "peak_bytes": lowered.plan.total_peak, "ms": []})
        print(f"  built {name}: {lowered.plan.total_peak:,} B", flush=True)
    by_name = {r["variant"]: r for r in rows}
    for _ in range(rounds):
        times = {n: _median_ms(run, min_ms) for n, run in built.items()}
        for n, t in times.items():
            by_name[n]["ms"].append(t)
        print("  " + ", ".join(f"{n} {t:.3f} ms" for n, t in times.items()), flush=True)
    for r in rows:
        if "ms" in r:
            r["ratio"] = statistics.median(t / base for t, base in zip(r["ms"], by_name["tuned"]["ms"]))
    return {"workload": workload, "best_knobs": best["knobs"], "rounds": rounds, "rows": rows}


def table(result: dict[str, Any], argv: Sequence[str], date: str) -> list[str]:
    knobs = ", ".join(f"{k}={v}" for k, v in result["best_knobs"].items())
    lines = [
        f"# {result['workload']}: the tuned schedule against knob variants",
        "",
        f"Command: `.venv/bin/python experiments/knob_variants.py {' '.join(argv)}`  ",
        f"Date: {date}  ",
        f"Machine: {bench._machine()}.  ",
        f"Tuned knobs: {knobs}",
        "",
        "| variant | knobs changed | workspace bytes | ms per round | median ratio to tuned |",
        "| --- | --- | ---: | --- | ---: |",
    ]
    for r in result["rows"]:
        changed = json.dumps(r["knobs"]) if r["knobs"] else "-"
        if "error" in r:
            lines.append(f"| {r['variant']} | `{changed}` | - | {r['error']} | - |")
        else:
            ms = ", ".join(f"{t:.3f}" for t in r["ms"])
            lines.append(f"| {r['variant']} | `{changed}` | {r['peak_bytes']:,} | {ms} | {r['ratio']:.3f} |")
    return [*lines, ""]


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("workload", choices=bench.WORKLOADS)
    parser.add_argument("variants", nargs="+", type=parse_variant, metavar="NAME=JSON")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--min-ms", type=float, default=100.0)
    parser.add_argument("--output", type=Path, default=REPO / "results")
    args = parser.parse_args(argv)
    date = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    result = run(args.workload, args.variants, args.rounds, args.min_ms)
    write_results(args.output, f"knob_variants_{args.workload}", table(result, argv, date), result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
