"""What a scalar math call costs in a kernel: the roofline estimate's ``SCALAR_CALLS``.

    .venv/bin/python experiments/scalar_calls.py [--elements 65536] [--repeats 200] [--output DIR]

Times, on this host, a loop that stores ``f(a[i])`` for each intrinsic of
:data:`autotune.search.features_roofline.SCALAR_CALLS`, and one that stores ``a[i] * 1.5 + 0.5``,
compiled with the kernels' fast-math flags (:data:`autotune.codegen.source.FASTMATH_FLAGS`); prints
the best time per element of each, in ns and in cycles at the estimate's
:data:`~autotune.search.features_roofline.CYCLES_PER_NS`, and writes ``DIR/scalar_calls.md`` and
``.json`` (``DIR`` defaults to ``results``).
"""

from __future__ import annotations

import argparse
import datetime as dt
import math
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numba
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sample_efficiency import host_line
from thread_scaling import write_results

from autotune.codegen.source import FASTMATH_FLAGS
from autotune.search.features_roofline import CYCLES_PER_NS, SCALAR_CALLS
from autotune.search.records import machine

FUNCTIONS: dict[str, Callable[[float], float]] = {"exp": math.exp, "log": math.log, "tanh": math.tanh}


def kernel(fn: Callable[[float], float] | None) -> Callable[[np.ndarray, np.ndarray], None]:
    flags = set(FASTMATH_FLAGS)
    if fn is None:

        @numba.njit(fastmath=flags)
        def affine(a: np.ndarray, o: np.ndarray) -> None:
            for i in range(a.size):
                o[i] = a[i] * np.float32(1.5) + np.float32(0.5)

        return affine

    @numba.njit(fastmath=flags)
    def call(a: np.ndarray, o: np.ndarray) -> None:
        for i in range(a.size):
            o[i] = fn(a[i])

    return call


def best_ns(run: Callable[[np.ndarray, np.ndarray], None], a: np.ndarray, repeats: int) -> float:
    out = np.empty_like(a)
    run(a, out)  # compile
    best = math.inf
    for _ in range(repeats):
        start = time.perf_counter_ns()
        run(a, out)
        best = min(best, time.perf_counter_ns() - start)
    return best / a.size


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--elements", type=int, default=1 << 16)
    p.add_argument("--repeats", type=int, default=200)
    p.add_argument("--output", type=Path, default=Path("results"))
    args = p.parse_args(argv)
    load_start = list(os.getloadavg())
    rng = np.random.default_rng(0)
    a = (rng.random(args.elements, dtype=np.float32) + np.float32(0.25)).astype(np.float32)  # log needs > 0
    rows = []
    for name in [*sorted(SCALAR_CALLS), "a * 1.5 + 0.5"]:
        ns = best_ns(kernel(FUNCTIONS.get(name)), a, args.repeats)
        estimate = SCALAR_CALLS.get(name, "-")
        rows.append({"function": name, "ns": ns, "cycles": ns * CYCLES_PER_NS, "estimate": estimate})
        print(f"{name}: {ns:.3f} ns, {ns * CYCLES_PER_NS:.2f} cycles per element", flush=True)
    load = {"start": load_start, "end": list(os.getloadavg())}
    date = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        "# What a scalar math call costs in a kernel",
        "",
        f"Command: `.venv/bin/python experiments/scalar_calls.py {' '.join(argv or sys.argv[1:])}`  ",
        f"Date: {date}  ",
        f"{host_line(machine(), load)}  ",
        f"Best of {args.repeats} runs over {args.elements} float32 elements, fast-math flags "
        f"{', '.join(FASTMATH_FLAGS)}; cycles at {CYCLES_PER_NS} per ns; the estimate's cycles per call "
        "(`SCALAR_CALLS`) beside them.",
        "",
        "| loop body | ns per element | cycles per element | the estimate's cycles |",
        "| --- | ---: | ---: | ---: |",
        *(f"| `{r['function']}` | {r['ns']:.3f} | {r['cycles']:.2f} | {r['estimate']} |" for r in rows),
    ]
    result = {
        "elements": args.elements,
        "repeats": args.repeats,
        "rows": rows,
        "machine": machine(),
        "load_average": load,
    }
    write_results(args.output, "scalar_calls", lines, result)


if __name__ == "__main__":
    main()
