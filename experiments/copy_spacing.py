"""Does spacing the threads' private copies apart make the 2-thread kernels faster?

    .venv/bin/python experiments/copy_spacing.py [--workloads pool_chain bottleneck]
        [--strides-kib 0 16 32 64 128] [--processes 4] [--rounds 2] [--calls 1000] [--output results]

A buffer computed under a parallel loop gets one copy per iteration of that
loop (``autotune.lowering.compact``), and the memory plan puts the copies side
by side: in ``results/pool_chain/best_kernel.py`` thread 0 works in
``pool1_data[0:3456]`` and thread 1 in ``pool1_data[3456:6912]``. Both kernels
with such copies (pool_chain, bottleneck) run 2 threads at 1.3x the 1-thread
speed in some processes and at 1.9x in others (``experiments/thread_scaling.py``);
matmul, whose threads share no written buffer, does not.

This script takes ``results/<workload>/best_kernel.py`` as generated, and for each
stride in ``--strides-kib`` (0: the generated one) rewrites the copy stride of
every private storage array (the ``<parallel var> * <stride>`` term of its
indices) so that copy ``i`` starts at ``i * max(stride, generated)`` elements,
and allocates the storage that large. The variants are compiled in one process
(uncached, the outlined nests with their own vectoriser, as ``autotune.codegen``
builds them) and timed in turn, ``--rounds`` times, in ``--processes`` fresh
processes one after the other: median of ``--calls`` back-to-back calls on
2 threads, on the workload's seeded inputs; every variant's output is checked
against the generated kernel's. It changes nothing but addresses. (Each
storage array is its own 64-byte aligned array here; ``autotune.codegen``'s
``Kernel`` passes views into one array per memory pool.)

Writes ``<output>/copy_spacing.md`` and ``<output>/copy_spacing.json``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib.util
import json
import os
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_vs_baselines as bench  # sets the thread counts and cache directories
import numpy as np
from thread_scaling import fresh_process, write_results

from autotune import workloads
from autotune.measure import empty_outputs
from autotune.workloads.arrays import aligned_full

REPO = bench.REPO
STORAGE = re.compile(r"^    # (\w+): (\w+)\[(\d+)\] \(allocation ", re.M)
PARALLEL = re.compile(r"for (\w+) in numba\.prange\((\d+)\):")


def variant_source(source: str, stride_elems: int) -> tuple[str, dict[str, tuple[str, int]]]:
    """``source`` with every private storage copy ``stride_elems`` apart (never closer than generated);
    and per storage array its dtype and the element count to allocate."""
    loop = PARALLEL.search(source)
    if loop is None:
        raise SystemExit("the kernel has no numba.prange loop: no private copies to space")
    var, copies = loop.group(1), int(loop.group(2))
    sizes: dict[str, tuple[str, int]] = {}
    for name, dtype, count in STORAGE.findall(source):
        term = re.compile(rf"(\b{name}\[np\.uintp\(){var} \* (\d+)\b")
        found = {int(m[1]) for m in term.findall(source)}
        if not found:  # not a private copy: shared by the threads, left alone
            sizes[name] = (dtype, int(count))
            continue
        (generated,) = found
        stride = max(stride_elems, generated)
        source = term.sub(rf"\g<1>{var} * {stride}", source)
        sizes[name] = (dtype, stride * (copies - 1) + int(count) - generated * (copies - 1))
    return source, sizes


def child(name: str, strides_kib: list[int], rounds: int, calls: int) -> dict[str, Any]:
    from autotune.codegen import configure_numba_env

    configure_numba_env()  # 512-bit vectors on AVX-512: before numba reads its configuration

    from autotune.codegen.build import _vectorizer  # the vectoriser switch codegen's build uses

    source = (
        (REPO / "results" / name / "best_kernel.py")
        .read_text(encoding="utf-8")
        .replace("cache=True", "cache=False")
    )
    wl = workloads.get(name, **bench.FULL[name])
    inputs = wl.make_inputs(0)
    mode = re.search(r"^# outlined: .*\(vectorizer: (\w+)\)", source, re.M)
    vectorizer = mode.group(1) if mode else "loop"  # the header codegen writes for outlined nests
    kernels = {}
    with tempfile.TemporaryDirectory() as tmp:
        for kib in strides_kib:
            text, sizes = variant_source(source, kib * 1024 // 4)
            path = Path(tmp) / f"{name}_{kib}.py"
            path.write_text(text, encoding="utf-8")
            spec = importlib.util.spec_from_file_location(path.stem, path)
            assert spec is not None and spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            with _vectorizer(vectorizer):
                spec.loader.exec_module(module)
            outputs = empty_outputs(wl.func)
            storage = tuple(aligned_full((n,), 0, dtype) for dtype, n in sizes.values())
            kernels[kib] = (getattr(module, name), (*inputs, *outputs, *storage), outputs)
        first = None
        for kib, (fn, args, outputs) in kernels.items():
            fn(*args)
            if first is None:
                first = [o.copy() for o in outputs]
            elif not all(np.array_equal(a, b, equal_nan=True) for a, b in zip(first, outputs)):
                return {"workload": name, "error": f"stride {kib} KiB changed the output"}
        out = []
        for _ in range(rounds):
            row = {}
            for kib, (fn, args, _) in kernels.items():
                fn(*args)
                times = []
                for _ in range(calls):
                    t0 = time.perf_counter()
                    fn(*args)
                    times.append(time.perf_counter() - t0)
                row[str(kib)] = statistics.median(times) * 1e3
            out.append(row)
    return {"workload": name, "rounds": out}


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--workloads", nargs="+", default=["pool_chain", "bottleneck"], choices=bench.WORKLOADS
    )
    parser.add_argument("--strides-kib", nargs="+", type=int, default=[0, 16, 32, 64, 128])
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--output", type=Path, default=REPO / "results")
    parser.add_argument("--child", choices=bench.WORKLOADS, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.child:
        print(json.dumps(child(args.child, args.strides_kib, args.rounds, args.calls)), flush=True)
        return 0
    started = dt.datetime.now(dt.timezone.utc)
    load = os.getloadavg()[0]
    flags = [
        f"--strides-kib {' '.join(map(str, args.strides_kib))}",
        f"--rounds {args.rounds}",
        f"--calls {args.calls}",
    ]
    results: dict[str, list[dict[str, Any]]] = {}
    for name in args.workloads:
        results[name] = []
        for i in range(args.processes):
            sample = fresh_process(__file__, ["--child", name, *" ".join(flags).split()])
            results[name].append(sample)
            print(
                f"  {name} process {i + 1}/{args.processes}: {sample.get('rounds', sample.get('error'))}",
                flush=True,
            )
    command = (
        f"experiments/copy_spacing.py --workloads {' '.join(args.workloads)} --processes {args.processes} "
        + " ".join(flags)
    )
    md = [
        "# Private copies spaced apart: 2-thread latency (ms) by copy stride",
        "",
        f"`.venv/bin/python {command}`, started {started:%Y-%m-%d %H:%M} UTC, 1-minute load {load:.2f} at start. "
        "Stride 0 is the generated kernel (copies side by side); a stride of S KiB puts copy i at i * S KiB "
        "(never closer than generated). Each cell is the median of back-to-back calls on 2 threads; one row per "
        "round, the variants timed in turn within a round.",
        "",
    ]
    for name, samples in results.items():
        heads = [f"{k} KiB" if k else "generated" for k in args.strides_kib]
        md += [
            f"### {name}",
            "",
            "| process | round | " + " | ".join(heads) + " |",
            "| ---: | ---: |" + " ---: |" * len(heads),
        ]
        fastest = dict.fromkeys(map(str, args.strides_kib), 0)
        for i, sample in enumerate(samples, 1):
            if "error" in sample:
                md.append(f"| {i} | - | {sample['error']} |")
                continue
            for j, row in enumerate(sample["rounds"], 1):
                md.append(
                    f"| {i} | {j} | " + " | ".join(f"{row[str(k)]:.3f}" for k in args.strides_kib) + " |"
                )
                fastest[min(row, key=row.__getitem__)] += 1
        rows = [r for s in samples for r in s.get("rounds", [])]
        if rows:
            medians = {k: statistics.median(r[str(k)] for r in rows) for k in args.strides_kib}
            md += [
                "",
                "Median over rounds: "
                + ", ".join(f"{h} {medians[k]:.3f} ms" for h, k in zip(heads, args.strides_kib))
                + ".",
                "Fastest in a round: "
                + ", ".join(f"{h} {fastest[str(k)]}x" for h, k in zip(heads, args.strides_kib))
                + ".",
            ]
        md.append("")
    payload = {"command": command, "started": started.isoformat(), "load": load, "results": results}
    write_results(args.output, "copy_spacing", md, payload)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
