"""A serial kernel as a plain function or as a one-iteration parallel loop, on a quiet and a busy machine.

    .venv/bin/python experiments/serial_dispatch.py [--config examples/small.yaml] [--seeds 0 1 2]
        [--calls 300] [--output results]

For each seed, a random serial schedule (knob ``parallel: none``) of the config's workload whose
body the code generator writes as a function of its own (``<kernel>_body``, noalias) is lowered
and generated as the project generates it now: a plain function that calls the body
(``parallel=False``, ``range(1)``, :func:`autotune.codegen.generate_source`). The same text with
``numba.prange(1)`` and ``parallel=True`` is the one-iteration parallel loop that every serial
kernel was before. Both are compiled, checked against the workload's numpy reference, and called
``--calls`` times each, in turn, with 0, 1 and 2 other processes spinning (``while True: pass``)
beside them; each call is timed by itself. Printed and written: the median and the 90th
percentile per variant and load, and their ratios.

Writes ``<output>/serial_dispatch.md`` and ``.json``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from autotune.codegen import build, generate_source  # noqa: E402
from autotune.config import load_config, load_workload  # noqa: E402
from autotune.errors import ScheduleError  # noqa: E402
from autotune.measure.task import reference_outputs  # noqa: E402
from autotune.search import candidates as cand  # noqa: E402
from autotune.search.records import machine  # noqa: E402
from autotune.search.space import load_space  # noqa: E402

LOADS = (0, 1, 2)


def serial_source(config: Path, seed: int) -> tuple[Any, Any]:
    """A random serial schedule whose generated kernel calls its body: its lowered function and workload."""
    cfg = load_config(config)
    wl = load_workload(cfg.workload)
    space = load_space(cfg.search.space, wl, cfg.memory.pools)
    rng = np.random.default_rng(seed)
    for _ in range(500):
        knobs = cand.random_assignment(space, rng)
        if "parallel" in knobs:
            knobs["parallel"] = "none"
        try:
            sch = space.apply(wl.func, knobs)
        except ScheduleError:
            continue
        low = cand.lower_candidate(sch.func, cfg.memory.pools, cfg.memory.planner, seed, None)
        if low.lowered is None:
            continue
        src = generate_source(low.lowered.func)
        if src.bodies and not src.parallel:
            return low.lowered, wl
    raise SystemExit(f"{config}: no serial schedule with its body outlined in 500 draws (seed {seed})")


def load(text: str, directory: Path, name: str) -> Any:
    path = directory / f"{name}.py"
    path.write_text(text, encoding="utf-8")
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def timed(fn: Any, args: tuple[np.ndarray, ...], calls: int) -> np.ndarray:
    out = np.empty(calls)
    for k in range(calls):
        start = time.perf_counter_ns()
        fn(*args)
        out[k] = time.perf_counter_ns() - start
    return out / 1e3  # µs


def one_seed(config: Path, seed: int, calls: int, directory: Path) -> dict[str, Any]:
    lowered, wl = serial_source(config, seed)
    kernel = build(lowered.func, lowered.plan, str(directory))
    text = Path(kernel.path).read_text(encoding="utf-8")
    before = text.replace("for once in range(1):", "for once in numba.prange(1):").replace(
        "parallel=False)\ndef", "parallel=True)\ndef"
    )
    assert before != text
    old = load(before, Path(kernel.path).parent, f"prange1_{seed}_{Path(kernel.path).stem}")
    inputs = wl.make_inputs(seed)
    refs = reference_outputs(wl, inputs)
    fns = {"plain": kernel.dispatcher, "prange1": getattr(old, kernel.kernel_source.name)}
    args: dict[str, tuple[np.ndarray, ...]] = {}
    errors: dict[str, float] = {}
    for variant, fn in fns.items():
        outs = [np.full_like(r, np.nan) for r in refs]
        args[variant] = (*inputs, *outs, *kernel.storage)
        fn(*args[variant])
        errors[variant] = max(float(np.max(np.abs(o - r))) for o, r in zip(outs, refs))
    rows = []
    for load_n in LOADS:
        spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(load_n)]
        try:
            time.sleep(0.3)
            samples: dict[str, list[np.ndarray]] = {v: [] for v in fns}
            for _ in range(3):  # in turn, three blocks each
                for v, fn in fns.items():
                    samples[v].append(timed(fn, args[v], calls // 3))
        finally:
            for p in spinners:
                p.kill()
                p.wait()
        for v in fns:
            s = np.concatenate(samples[v])
            rows.append(
                {"load": load_n, "variant": v, "median_us": float(np.median(s)), "p90_us": float(np.percentile(s, 90))}
            )
    return {"seed": seed, "kernel": kernel.kernel_source.name, "max_abs_err": errors, "rows": rows}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", type=Path, default=REPO / "examples" / "small.yaml")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--calls", type=int, default=300)
    p.add_argument("--output", type=Path, default=REPO / "results")
    args = p.parse_args(argv)
    start_load = list(os.getloadavg())
    with tempfile.TemporaryDirectory() as tmp:
        runs = [one_seed(args.config, s, args.calls, Path(tmp)) for s in args.seeds]
    host = machine()
    isa = host.get("isa", [])
    vectors = "AVX-512" if "avx512f" in isa else "AVX2" if "avx2" in isa else "neither AVX2 nor AVX-512"
    lines = [
        "# A serial kernel: plain function or one-iteration parallel loop",
        "",
        f"`.venv/bin/python experiments/serial_dispatch.py --config {os.path.relpath(args.config, REPO)} "
        f"--seeds {' '.join(map(str, args.seeds))} --calls {args.calls}`, "
        f"{dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC. Host: {host.get('cpu', '?')} "
        f"(LLVM `{host.get('llvm_cpu', '?')}`), {vectors}, {host.get('cores', '?')} cores; load average "
        f"{', '.join(f'{v:.2f}' for v in start_load)} at the start.",
        "",
        "Per call, µs (each call timed by itself; the variants in turn). `plain`: the kernel as generated "
        "(`parallel=False`, its noalias body called once); `prange1`: the same text as a one-iteration "
        "parallel loop (`parallel=True`, `numba.prange(1)`). Spinners: other processes running "
        "`while True: pass` meanwhile.",
        "",
        "| seed | spinners | plain: median | plain: p90 | prange1: median | prange1: p90 | prange1 / plain (median) |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for run in runs:
        by = {(r["load"], r["variant"]): r for r in run["rows"]}
        for n in LOADS:
            a, b = by[(n, "plain")], by[(n, "prange1")]
            lines.append(
                f"| {run['seed']} | {n} | {a['median_us']:.2f} | {a['p90_us']:.2f} | {b['median_us']:.2f} | "
                f"{b['p90_us']:.2f} | {b['median_us'] / a['median_us']:.2f} |"
            )
    errs = ", ".join(f"seed {r['seed']}: {max(r['max_abs_err'].values()):.2g}" for r in runs)
    lines += ["", f"Largest difference from the numpy reference: {errs}.", ""]
    text = "\n".join(lines)
    args.output.mkdir(parents=True, exist_ok=True)
    (args.output / "serial_dispatch.md").write_text(text, encoding="utf-8")
    doc = {"host": host, "load_average_start": start_load, "runs": runs}
    (args.output / "serial_dispatch.json").write_text(json.dumps(doc, indent=1), encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
