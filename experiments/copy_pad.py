"""The tuned kernels with their private copies padded by 0, 4 KiB and 64 KiB, process by process.

    .venv/bin/python experiments/copy_pad.py [--workloads bottleneck pool_chain]
        [--pads 0 4096 65536] [--processes 8] [--rounds 2] [--min-ms 60] [--output results]

For each workload, ``--processes`` fresh Python processes run one after the
other. Each replays ``results/<workload>/best.json`` (full size, its pools,
planner and seed, as ``experiments/bench_vs_baselines.py`` does) once per value
of ``--pads``, with only the ``copy_pad`` argument of its ``parallel`` step
changed (0: no padding), lowers, builds and checks every variant against
numpy, then per round times them in turn on 2 threads (the median of at least
``--min-ms`` of back-to-back calls). The workspace column is each variant's
planned peak.

Why: some processes ran the unpadded kernels about 1.4x slower than others, with
the same code and inputs (``experiments/thread_scaling.py``). In such processes
the kernel became fast again when the expand and depthwise buffers were moved
at least 4 KiB apart, and stayed slow with 0-256 bytes between them, so the
padding is a schedule knob (``parallel(loop, copy_pad=...)``). A round counts as
slow here when it takes more than 1.25x the fastest round of any variant of the
same workload.

Writes ``<output>/copy_pad.md`` and ``<output>/copy_pad.json``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_vs_baselines as bench
from thread_scaling import _median_ms, fresh_process, write_results

from autotune import workloads
from autotune.codegen import build
from autotune.lowering import lower
from autotune.measure import compare, empty_outputs, reference_outputs
from autotune.memory import Pool
from autotune.schedule import Schedule, load_trace
from autotune.schedule import trace as tr

REPO = bench.REPO
SLOW = 1.25


def padded_steps(steps: Sequence[tr.Step], pad: int) -> list[tr.Step]:
    """``steps`` with the ``copy_pad`` of every ``parallel`` step set to ``pad`` (0: none)."""
    out = []
    for step in steps:
        if step.op == "parallel":
            kwargs = {k: v for k, v in step.kwargs().items() if k != "copy_pad"}
            step = tr.make_step("parallel", step.outputs, **kwargs, **({"copy_pad": pad} if pad else {}))
        out.append(step)
    return out


def child(name: str, pads: list[int], rounds: int, min_ms: float) -> dict[str, Any]:
    """Build every padding of ``name``'s tuned kernel in this process and time them in turn on 2 threads."""
    wl = workloads.get(name, **bench.FULL[name])
    best_path = REPO / "results" / name / "best.json"
    best, why = bench.read_best(best_path, wl)
    if best is None:
        return {"workload": name, "error": why}
    pools = tuple(Pool(p["name"], p["size"]) for p in best["pools"])
    steps = load_trace(str(best_path))
    if not any(s.op == "parallel" for s in steps):
        return {"workload": name, "error": "the tuned schedule has no parallel loop"}
    inputs = wl.make_inputs(0)
    expected = reference_outputs(wl, inputs)
    runs, peaks = {}, {}
    for pad in pads:
        sch = Schedule.replay(wl.func, padded_steps(steps, pad))
        lowered = lower(sch.func, pools=pools, planner=best["planner"], seed=best["seed"])
        kernel = build(lowered.func, lowered.plan)
        outputs = empty_outputs(lowered.func)
        kernel(*inputs, *outputs)
        ok, err = compare(outputs, expected)
        if not ok:
            return {"workload": name, "error": f"copy_pad {pad} differs from numpy (max abs err {err:.3g})"}
        full = (*inputs, *outputs, *kernel.storage)
        runs[pad] = (kernel.dispatcher, full)
        peaks[str(pad)] = lowered.plan.total_peak
    out = []
    for _ in range(rounds):
        row = {}
        for pad, (dispatcher, full) in runs.items():
            row[str(pad)] = _median_ms(lambda d=dispatcher, a=full: d(*a), min_ms)
        out.append(row)
    return {"workload": name, "peaks": peaks, "rounds": out}


def table(name: str, pads: list[int], samples: list[dict[str, Any]]) -> list[str]:
    ok = [s for s in samples if "error" not in s]
    heads = [f"pad {p}" for p in pads]
    lines = [f"### {name}", ""]
    if not ok:
        return [*lines, *(f"- process {i}: {s['error']}" for i, s in enumerate(samples, 1)), ""]
    peaks = ok[0]["peaks"]
    lines += [
        "Workspace (planned peak): " + ", ".join(f"{h} {peaks[str(p)]:,} B" for h, p in zip(heads, pads)),
        "",
        "| process | round | " + " | ".join(f"{h} ms" for h in heads) + " |",
        "| ---: | ---: | " + " | ".join("---:" for _ in pads) + " |",
    ]
    for i, sample in enumerate(samples, 1):
        if "error" in sample:
            lines.append(f"| {i} | - | {sample['error']} |")
            continue
        for j, row in enumerate(sample["rounds"], 1):
            lines.append(f"| {i} | {j} | " + " | ".join(f"{row[str(p)]:.3f}" for p in pads) + " |")
    rows = [row for s in ok for row in s["rounds"]]
    fastest = min(min(row.values()) for row in rows)
    lines += [
        "",
        f"Over {len(rows)} rounds in {len(ok)} processes (slow: over {SLOW}x the fastest round, {fastest:.3f} ms):",
    ]
    for h, p in zip(heads, pads):
        times = [row[str(p)] for row in rows]
        slow = sum(t > SLOW * fastest for t in times)
        lines.append(
            f"- {h}: median {statistics.median(times):.3f} ms, max {max(times):.3f} ms, slow in {slow} of {len(times)}"
        )
    return [*lines, ""]


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--workloads", nargs="+", default=["bottleneck", "pool_chain"], choices=bench.WORKLOADS
    )
    parser.add_argument("--pads", nargs="+", type=int, default=[0, 4096, 65536])
    parser.add_argument("--processes", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--min-ms", type=float, default=60.0)
    parser.add_argument("--output", type=Path, default=REPO / "results")
    parser.add_argument("--child", choices=bench.WORKLOADS, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.child:
        print(json.dumps(child(args.child, args.pads, args.rounds, args.min_ms)), flush=True)
        return 0
    started = dt.datetime.now(dt.timezone.utc)
    load = os.getloadavg()[0]
    flags = [
        f"--pads {' '.join(map(str, args.pads))}",
        f"--rounds {args.rounds}",
        f"--min-ms {args.min_ms:g}",
    ]
    results = {}
    for name in args.workloads:
        samples = []
        for i in range(args.processes):
            sample = fresh_process(__file__, ["--child", name, *" ".join(flags).split()])
            samples.append(sample)
            shown = "; ".join(" / ".join(f"{v:.3f}" for v in r.values()) for r in sample.get("rounds", []))
            print(f"  {name} process {i + 1}/{args.processes}: {shown or sample['error']} ms", flush=True)
        results[name] = samples
    command = (
        f"experiments/copy_pad.py --workloads {' '.join(args.workloads)} --processes {args.processes} "
        + " ".join(flags)
    )
    md = [
        "# Private copies padded by copy_pad: 2-thread latency process by process",
        "",
        f"`.venv/bin/python {command}`, started {started:%Y-%m-%d %H:%M} UTC, 1-minute load {load:.2f} at start, "
        f"{os.cpu_count()} CPUs. Each process replays `results/<workload>/best.json` with the `copy_pad` of its "
        "`parallel` step set to each value (0: none), checks every variant against numpy, then per round times "
        "them in turn on 2 threads (medians of back-to-back calls).",
        "",
    ]
    for name, samples in results.items():
        md += table(name, args.pads, samples)
    payload = {"command": command, "started": started.isoformat(), "load": load, "results": results}
    write_results(args.output, "copy_pad", md, payload)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
