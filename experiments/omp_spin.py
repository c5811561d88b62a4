"""Two worker processes taking turns to time a parallel kernel: how much the one timing waits for the
cores that the other's OpenMP threads still spin on, by the spin count those threads keep.

    .venv/bin/python experiments/omp_spin.py [--spincounts default 10000] [--timings 60]
        [--iterations 200000] [--output results]

Two processes (``spawn``), each with numba's OpenMP thread pool (libgomp) and ``GOMP_SPINCOUNT`` set
as given (``default``: not set, libgomp's own), compile the same kernel: a parallel loop of two
iterations, each a chain of ``--iterations`` multiply-adds. They take turns on one lock, as the
executor's workers take turns on the timing lock: holding it, a process runs the kernel twice
untimed and ten times timed, each call by itself, and measures the timing's contention (the share
of its wall time its threads waited for a CPU, :func:`autotune.measure.timing.contention`). After
each timing a libgomp thread spins for a while before it sleeps (``GOMP_SPINCOUNT`` iterations),
so the other process may start its timing beside two spinning threads. Printed and written per
spin count: the median and 90th percentile of the timings' medians and of their contention, and the
share of timings contended over :data:`autotune.measure.timing.CONTENDED`.

Writes ``<output>/omp_spin.md`` and ``.json``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import multiprocessing
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def worker(spincount: str, lock: Any, timings: int, work: int, out: Any) -> None:
    if spincount != "default":
        os.environ["GOMP_SPINCOUNT"] = spincount
    os.environ.setdefault("NUMBA_THREADING_LAYER", "omp")
    import numba

    from autotune.measure.timing import contention, run_delay_ns

    @numba.njit(parallel=True, nogil=True)
    def kernel(a: np.ndarray, n: int) -> None:
        for j in numba.prange(2):
            x = a[j]
            for _ in range(n):
                x = x * 0.999999 + 1e-7
            a[j] = x

    a = np.ones(2)
    kernel(a, work)
    rows = []
    for _ in range(timings):
        with lock:
            kernel(a, work)
            kernel(a, work)
            before, start = run_delay_ns(), time.perf_counter()
            runs = []
            for _ in range(10):
                t = time.perf_counter_ns()
                kernel(a, work)
                runs.append(time.perf_counter_ns() - t)
            took, after = time.perf_counter() - start, run_delay_ns()
        waited = None if before is None or after is None else after - before
        rows.append({"median_us": float(np.median(runs)) / 1e3, "contended": contention(waited, took, 2)})
    out.put(rows)


def one(spincount: str, timings: int, work: int) -> list[dict[str, Any]]:
    ctx = multiprocessing.get_context("spawn")
    lock, out = ctx.Lock(), ctx.Queue()
    procs = [ctx.Process(target=worker, args=(spincount, lock, timings, work, out)) for _ in range(2)]
    for p in procs:
        p.start()
    rows = [r for _ in procs for r in out.get()]
    for p in procs:
        p.join()
    return rows


def main(argv: list[str] | None = None) -> int:
    from autotune.measure.timing import CONTENDED
    from autotune.search.records import machine

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--spincounts", nargs="+", default=["default", "10000"])
    p.add_argument("--timings", type=int, default=60)
    p.add_argument("--iterations", type=int, default=200_000)
    p.add_argument("--output", type=Path, default=REPO / "results")
    args = p.parse_args(argv)
    load = list(os.getloadavg())
    work = args.iterations
    results = {s: one(s, args.timings, work) for s in args.spincounts}
    host = machine()
    lines = [
        "# Two workers taking turns to time a parallel kernel, by libgomp's spin count",
        "",
        f"`.venv/bin/python experiments/omp_spin.py --spincounts {' '.join(args.spincounts)} --timings "
        f"{args.timings} --iterations {args.iterations}`, {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC. "
        f"Host: {host.get('cpu', '?')} (LLVM `{host.get('llvm_cpu', '?')}`), {host.get('cores', '?')} cores; "
        f"load average {', '.join(f'{v:.2f}' for v in load)} at the start.",
        "",
        f"Per spin count, over the {2 * args.timings} timings of both processes (10 timed calls each): the "
        "timings' medians (µs) and their contention (the share of a timing's wall time its threads waited "
        f"for a CPU); contended: the share of timings over {CONTENDED:.0%}.",
        "",
        "| GOMP_SPINCOUNT | median of medians | p90 of medians | median contention | p90 contention | contended |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for s, rows in results.items():
        med = np.array([r["median_us"] for r in rows])
        con = np.array([r["contended"] if r["contended"] is not None else np.nan for r in rows])
        lines.append(
            f"| {s} | {np.median(med):.1f} | {np.percentile(med, 90):.1f} | {np.nanmedian(con):.2f} | "
            f"{np.nanpercentile(con, 90):.2f} | {np.mean(con > CONTENDED):.0%} |"
        )
    text = "\n".join(lines) + "\n"
    args.output.mkdir(parents=True, exist_ok=True)
    (args.output / "omp_spin.md").write_text(text, encoding="utf-8")
    doc = {"host": host, "load_average_start": load, "work_iterations": work, "results": results}
    (args.output / "omp_spin.json").write_text(json.dumps(doc, indent=1), encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
