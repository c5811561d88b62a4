"""How the tuned kernels scale from 1 to 2 threads, process by process.

    .venv/bin/python experiments/thread_scaling.py [--workloads bottleneck matmul pool_chain]
        [--processes 6] [--rounds 3] [--min-ms 60] [--output results]

For each workload, ``--processes`` fresh Python processes run one after the
other. Each replays ``results/<workload>/best.json`` (as
``experiments/bench_vs_baselines.py`` does: same full-size shapes, pools,
planner and seed), builds the kernel, checks it against the numpy reference
and then, ``--rounds`` times, takes the median latency of at least
``--min-ms`` of back-to-back calls with numba's parallel loops on 1 thread
(``numba.set_num_threads(1)``) and then on 2. The speedup of a round is its
1-thread median over its 2-thread median; GFLOP/s is ``Workload.flops`` over
the 2-thread median.

Why per process: the bench found the tuned bottleneck kernel at about 0.27 ms
in some processes and about 0.40 ms in others, with the same code, cache and
arrays. A fresh process per sample shows whether a workload's 2-thread time
has such modes while its 1-thread time does not.

Writes ``<output>/thread_scaling.md`` and ``<output>/thread_scaling.json``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_vs_baselines as bench

from autotune import workloads
from autotune.codegen import build
from autotune.lowering import lower
from autotune.measure import compare, empty_outputs, reference_outputs
from autotune.memory import Pool
from autotune.schedule import Schedule, load_trace

REPO = bench.REPO


def _median_ms(run: Any, min_ms: float) -> float:
    """Median of back-to-back calls filling at least ``min_ms`` (at least 20 calls)."""
    run()
    times: list[float] = []
    start = time.perf_counter()
    while len(times) < 20 or (time.perf_counter() - start) * 1e3 < min_ms:
        t0 = time.perf_counter()
        run()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def child(name: str, rounds: int, min_ms: float) -> dict[str, Any]:
    """Build ``name``'s tuned kernel in this process and time it on 1 and 2 threads."""
    from autotune.codegen import configure_numba_env

    configure_numba_env()  # 512-bit vectors on AVX-512: before numba reads its configuration
    import numba

    wl = workloads.get(name, **bench.FULL[name])
    best_path = REPO / "results" / name / "best.json"
    best, why = bench.read_best(best_path, wl)
    if best is None:
        return {"workload": name, "error": why}
    pools = tuple(Pool(p["name"], p["size"]) for p in best["pools"])
    sch = Schedule.replay(wl.func, load_trace(str(best_path)))
    lowered = lower(sch.func, pools=pools, planner=best["planner"], seed=best["seed"])
    kernel = build(lowered.func, lowered.plan)
    inputs = wl.make_inputs(0)
    outputs = empty_outputs(lowered.func)
    args = (*inputs, *outputs)
    kernel(*args)
    ok, err = compare(outputs, reference_outputs(wl, inputs))
    if not ok:
        return {"workload": name, "error": f"differs from the numpy reference (max abs err {err:.3g})"}
    dispatcher, full = kernel.dispatcher, (*args, *kernel.storage)

    def run() -> None:
        dispatcher(*full)

    out: list[dict[str, float]] = []
    for _ in range(rounds):
        numba.set_num_threads(1)
        one = _median_ms(run, min_ms)
        numba.set_num_threads(2)
        two = _median_ms(run, min_ms)
        out.append({"ms_1": one, "ms_2": two})
    return {"workload": name, "flops": wl.flops, "parallel": kernel.kernel_source.parallel, "rounds": out}


def fresh_process(script: str, args: list[str]) -> dict[str, Any]:
    """Run ``script`` with ``args`` in a fresh Python; its last stdout line that is a JSON object, or the error."""
    proc = subprocess.run([sys.executable, script, *args], capture_output=True, text=True, check=False)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        return {"error": f"exit {proc.returncode}: {proc.stderr.strip()[-300:]}"}
    result: dict[str, Any] = json.loads(lines[-1])
    return result


def write_results(output: Path, stem: str, md: list[str], payload: dict[str, Any]) -> None:
    """``<output>/<stem>.md`` and ``<stem>.json``; the markdown is printed too."""
    output.mkdir(parents=True, exist_ok=True)
    (output / f"{stem}.md").write_text("\n".join(md), encoding="utf-8")
    (output / f"{stem}.json").write_text(json.dumps(payload, indent=1), encoding="utf-8")
    print("\n".join(md))


def run_processes(name: str, processes: int, rounds: int, min_ms: float) -> list[dict[str, Any]]:
    """One fresh process per sample, one after the other."""
    samples = []
    for i in range(processes):
        sample = fresh_process(__file__, ["--child", name, "--rounds", str(rounds), "--min-ms", str(min_ms)])
        samples.append(sample)
        shown = "; ".join(f"{r['ms_1']:.3f} / {r['ms_2']:.3f} ms" for r in sample.get("rounds", []))
        print(f"  {name} process {i + 1}/{processes}: {shown or sample['error']}", flush=True)
    return samples


def table(name: str, samples: list[dict[str, Any]]) -> list[str]:
    lines = [
        f"### {name}",
        "",
        "| process | round | 1 thread ms | 2 threads ms | speedup | GFLOP/s (2 threads) |",
        "| ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    speedups = []
    for i, sample in enumerate(samples, 1):
        if "error" in sample:
            lines.append(f"| {i} | - | - | - | - | {sample['error']} |")
            continue
        for j, r in enumerate(sample["rounds"], 1):
            speedup = r["ms_1"] / r["ms_2"]
            speedups.append(speedup)
            gflops = sample["flops"] / r["ms_2"] / 1e6
            lines.append(f"| {i} | {j} | {r['ms_1']:.3f} | {r['ms_2']:.3f} | {speedup:.2f}x | {gflops:.0f} |")
    if speedups:
        lines += [
            "",
            f"Speedup over {len(speedups)} rounds: min {min(speedups):.2f}x, "
            f"median {statistics.median(speedups):.2f}x, max {max(speedups):.2f}x.",
        ]
    return [*lines, ""]


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--workloads", nargs="+", default=["bottleneck", "matmul", "pool_chain"], choices=bench.WORKLOADS
    )
    parser.add_argument("--processes", type=int, default=6)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--min-ms", type=float, default=60.0)
    parser.add_argument("--output", type=Path, default=REPO / "results")
    parser.add_argument("--child", choices=bench.WORKLOADS, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.child:
        print(json.dumps(child(args.child, args.rounds, args.min_ms)), flush=True)
        return 0
    started = dt.datetime.now(dt.timezone.utc)
    load = os.getloadavg()[0]
    results = {name: run_processes(name, args.processes, args.rounds, args.min_ms) for name in args.workloads}
    command = "experiments/thread_scaling.py " + " ".join(
        [
            f"--workloads {' '.join(args.workloads)}",
            f"--processes {args.processes}",
            f"--rounds {args.rounds}",
            f"--min-ms {args.min_ms:g}",
        ]
    )
    md = [
        "# Thread scaling of the tuned kernels, process by process",
        "",
        f"`.venv/bin/python {command}`, started {started:%Y-%m-%d %H:%M} UTC, 1-minute load {load:.2f} at start, "
        f"{os.cpu_count()} CPUs. Each process replays `results/<workload>/best.json`, checks the kernel against "
        "numpy, then per round times it with numba on 1 thread and on 2 (medians of back-to-back calls).",
        "",
    ]
    for name, samples in results.items():
        md += table(name, samples)
    payload = {"command": command, "started": started.isoformat(), "load": load, "results": results}
    write_results(args.output, "thread_scaling", md, payload)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
