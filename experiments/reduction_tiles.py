"""Register tiles over reductions of several loops: KxK, depthwise and split convolutions against the 1x1 case.

    .venv/bin/python experiments/reduction_tiles.py [--size 56] [--channels 64] [--rounds 5]
        [--min-ms 100] [--output results]

Every case is a 56x56x64 -> 64 NHWC float32 chain written with the operator library
(``autotune.te`` + ``autotune.workloads.ops``), scheduled the same way: output columns
split by ``cols``, output channels by 16, the nest ``y, o_0, x_0, <reduction loops>,
x_1, o_1`` with ``x_1, o_1`` unrolled (a register tile of ``cols x 16`` accumulators),
``decompose_reduction`` at the first reduction loop, rows in parallel and the nest
from ``o_0`` down compiled with SLP. The cases:

- ``conv1x1``: 1x1 convolution (reduction over ``rc``);
- ``conv1x1_split``: the same with ``rc`` split in two (``rc_0, rc_1``);
- ``conv3x3``: 3x3 convolution, padding 1 written inline (a select inside the reduction);
- ``conv5x5``: 5x5 convolution, padding 2 inline;
- ``depthwise3x3``: 3x3 depthwise convolution, padding 1 inline (reduction over ``rh, rw``);
- ``<case>_hoisted``: the same chain (padding inline) with ``hoist_padding`` first: a padded copy
  of the input computed at root (its rows in parallel), read by the tile with plain loads.

Each case is tried with ``cols`` in 2, 4 and 8; the row of a case is its fastest. Each
kernel is built in a fresh kernel cache (``build s``: lower + generate + numba compile of
the first call) and checked against numpy. PyTorch eager runs the same convolution in
channels_last on 2 threads. Each round times every kernel and PyTorch in turn (the median
of back-to-back calls over ``--min-ms``); a ratio is the median over rounds of the per-round
ratio. Writes ``<output>/reduction_tiles.md`` and ``.json``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_vs_baselines as bench  # sets the thread counts before numpy is imported
import numpy as np
from thread_scaling import _median_ms, write_results

from autotune import ir, te
from autotune.codegen import build
from autotune.lowering import lower
from autotune.measure import compare, empty_outputs
from autotune.schedule import Schedule
from autotune.workloads import ops

REPO = bench.REPO
COLUMNS = (2, 4, 8)
BLOCKS = (16,)
THREADS = [bench.THREADS]
"""Threads of numba's prange and of torch (``--threads``; the ratios of the report are at 2)."""


@dataclass(frozen=True)
class Case:
    name: str
    kernel: int
    depthwise: bool = False
    split: bool = False
    hoisted: bool = False


CASES = (
    Case("conv1x1", 1),
    Case("conv1x1_split", 1, split=True),
    Case("conv3x3", 3),
    Case("conv3x3_hoisted", 3, hoisted=True),
    Case("conv5x5", 5),
    Case("conv5x5_hoisted", 5, hoisted=True),
    Case("depthwise3x3", 3, depthwise=True),
    Case("depthwise3x3_hoisted", 3, depthwise=True, hoisted=True),
)


def chain(case: Case, size: int, channels: int) -> tuple[ir.Func, list[np.ndarray], np.ndarray, int]:
    """The case's function, seeded inputs, the numpy reference output and its flop count."""
    k, pad = case.kernel, case.kernel // 2
    data = te.placeholder((1, size, size, channels), "float32", name="data")
    shape = (k, k, channels) if case.depthwise else (k, k, channels, channels)
    weight = te.placeholder(shape, "float32", name="weight")
    if case.depthwise:
        out = ops.depthwise_conv2d_nhwc(data, weight, padding=pad, name="conv")
    else:
        out = ops.conv2d_nhwc(data, weight, padding=pad, name="conv")
    func = te.create_func([data, weight], [out], name=case.name)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, size, size, channels)).astype(np.float32)
    w = (rng.standard_normal(shape) / np.sqrt(k * k * (1 if case.depthwise else channels))).astype(np.float32)
    xp = np.pad(x, ((0, 0), (pad, pad), (pad, pad), (0, 0)))
    ref = np.zeros((1, size, size, channels), np.float32)
    for dy in range(k):
        for dx in range(k):
            window = xp[:, dy : dy + size, dx : dx + size, :]
            ref += window * w[dy, dx] if case.depthwise else window @ w[dy, dx]
    macs = size * size * channels * k * k * (1 if case.depthwise else channels)
    return func, [x, w], ref, 2 * macs


def schedule(func: ir.Func, case: Case, cols: int, block: int) -> Schedule:
    """The register-tiled schedule of the module docstring."""
    sch = Schedule(func)
    if case.hoisted:
        sch = sch.hoist_padding("conv", 1)  # reads: conv (the accumulator), data, weight
        sch = sch.parallel(sch.get_loops(sch.last[0])[1])
    _, y, x, o, *reductions = sch.get_loops("conv")
    sch = sch.split(x, [None, cols])
    x_0, x_1 = sch.last
    sch = sch.split(o, [None, block])
    o_0, o_1 = sch.last
    if case.split:
        sch = sch.split(reductions[-1], [2, None])
        reductions = [*reductions[:-1], *sch.last]
    sch = sch.reorder(y, o_0, x_0, *reductions, x_1, o_1).unroll(x_1).unroll(o_1)
    sch = sch.decompose_reduction("conv", reductions[0])
    return sch.parallel(y).set_vectorizer("slp", loop=o_0)


@dataclass
class Kernel:
    case: Case
    cols: int
    block: int
    flops: int
    run: Callable[[], object]
    build_s: float
    ms: list[float] = field(default_factory=list)


def make_kernel(case: Case, cols: int, block: int, size: int, channels: int, cache: Path) -> Kernel:
    func, inputs, ref, flops = chain(case, size, channels)
    start = time.perf_counter()
    lowered = lower(schedule(func, case, cols, block).func)
    kernel = build(lowered.func, lowered.plan, cache_dir=cache)
    outputs = empty_outputs(lowered.func)
    args = (*inputs, *outputs)
    kernel(*args)
    build_s = time.perf_counter() - start
    ok, err = compare(outputs, (ref,))
    if not ok:
        raise SystemExit(f"{case.name} {cols}x{block}: differs from numpy (max abs err {err:.3g})")
    dispatcher, full = kernel.dispatcher, (*args, *kernel.storage)
    return Kernel(case, cols, block, flops, lambda: dispatcher(*full), build_s)


def torch_run(case: Case, size: int, channels: int) -> Callable[[], object] | None:
    try:
        import torch
    except ImportError:
        return None
    torch.set_num_threads(THREADS[0])
    _, (x, w), ref, _ = chain(case, size, channels)
    pad = case.kernel // 2
    xt = torch.from_numpy(x).permute(0, 3, 1, 2).contiguous(memory_format=torch.channels_last)
    if case.depthwise:
        wt = torch.from_numpy(w).permute(2, 0, 1).unsqueeze(1).contiguous(memory_format=torch.channels_last)
        groups = channels
    else:
        wt = torch.from_numpy(w).permute(3, 2, 0, 1).contiguous(memory_format=torch.channels_last)
        groups = 1

    def run() -> Any:
        return torch.nn.functional.conv2d(xt, wt, padding=pad, groups=groups)

    got = run().permute(0, 2, 3, 1).contiguous().numpy()
    ok, err = compare((got,), (ref,))
    if not ok:
        raise SystemExit(f"torch {case.name}: differs from numpy (max abs err {err:.3g})")
    return run


def measure(
    cases: Sequence[Case], tiles: Sequence[tuple[int, int]], size: int, channels: int, rounds: int, min_ms: float
) -> dict[str, Any]:
    from autotune.codegen import configure_numba_env

    configure_numba_env()  # 512-bit vectors on AVX-512: before numba reads its configuration
    import numba

    numba.set_num_threads(THREADS[0])
    kernels: list[Kernel] = []
    with tempfile.TemporaryDirectory(prefix="reduction_tiles_") as tmp:
        for case in cases:
            for cols, block in tiles:
                kernel = make_kernel(case, cols, block, size, channels, Path(tmp))
                print(f"  built {case.name} {cols}x{block} in {kernel.build_s:.1f} s", flush=True)
                kernels.append(kernel)
        torch_runs = {c.name: torch_run(c, size, channels) for c in cases}
        torch_ms: dict[str, list[float]] = {name: [] for name, run in torch_runs.items() if run is not None}
        for r in range(rounds):
            for k in kernels:
                k.ms.append(_median_ms(k.run, min_ms))
            for name in torch_ms:
                torch_ms[name].append(_median_ms(torch_runs[name], min_ms))  # type: ignore[arg-type]
            print(f"  round {r + 1}/{rounds} done", flush=True)
    rows = []
    for case in cases:
        mine = [k for k in kernels if k.case == case]
        best = min(mine, key=lambda k: statistics.median(k.ms))
        ms = statistics.median(best.ms)
        row: dict[str, Any] = {
            "case": case.name,
            "tile": f"{best.cols}x{best.block}",
            "ms": ms,
            "gflops": best.flops / ms / 1e6,
            "build_s": best.build_s,
            "build_s_all": {f"{k.cols}x{k.block}": round(k.build_s, 2) for k in mine},
            "ms_all": {f"{k.cols}x{k.block}": round(statistics.median(k.ms), 4) for k in mine},
            "_ms": best.ms,
        }
        if case.name in torch_ms:
            row["torch_ms"] = statistics.median(torch_ms[case.name])
            row["vs_torch"] = statistics.median(a / b for a, b in zip(best.ms, torch_ms[case.name]))
        rows.append(row)
    base = rows[0]
    for row in rows:
        row["gflops_vs_1x1"] = statistics.median(
            (base["_ms"][i] / row["_ms"][i]) * (row_flops(row, kernels) / row_flops(base, kernels))
            for i in range(rounds)
        )
        row["build_vs_1x1"] = row["build_s"] / base["build_s"]
    for row in rows:
        del row["_ms"]
    return {"rows": rows, "machine": bench._machine(), "rounds": rounds, "min_ms": min_ms, "threads": THREADS[0], "size": size, "channels": channels}


def row_flops(row: dict[str, Any], kernels: list[Kernel]) -> int:
    return next(k.flops for k in kernels if k.case.name == row["case"])


def report(result: dict[str, Any], argv: Sequence[str]) -> list[str]:
    rows = result["rows"]
    md = [
        "# Register tiles over reductions of several loops",
        "",
        f"`.venv/bin/python experiments/reduction_tiles.py {' '.join(argv)}`, "
        f"{dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC. {result['machine']}.",
        "",
        f"Each case: {result['size']}x{result['size']}x{result['channels']} NHWC float32 (see the script's docstring for the schedule); "
        f"{result['rounds']} rounds, in each the median of back-to-back calls over {result['min_ms']:g} ms. "
        "`vs 1x1`: the case's GFLOP/s over conv1x1's, median of the per-round ratios; `vs torch`: the case's "
        f"time over PyTorch eager channels_last's ({result['threads']} threads), median of the per-round ratios; `build s`: lower + "
        "build + first call in a fresh kernel cache.",
        "",
        "| case | tile | ms | GFLOP/s | vs 1x1 | torch ms | vs torch | build s | build vs 1x1 | ms by tile | build s by tile |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |",
    ]
    for r in rows:
        md.append(
            f"| {r['case']} | {r['tile']} | {r['ms']:.3f} | {r['gflops']:.1f} | {r['gflops_vs_1x1']:.2f} | "
            f"{r.get('torch_ms', float('nan')):.3f} | {r.get('vs_torch', float('nan')):.2f} | {r['build_s']:.1f} | "
            f"{r['build_vs_1x1']:.2f} | {r['ms_all']} | {r['build_s_all']} |"
        )
    md += ["", "Targets: every KxK and split case at >= 0.8x conv1x1's GFLOP/s and builds in <= 1.5x its time; "
           "conv3x3 within 1.2x of PyTorch.", ""]
    for r in rows[1:]:
        speed = "met" if r["gflops_vs_1x1"] >= 0.8 else "missed"
        built = "met" if r["build_vs_1x1"] <= 1.5 else "missed"
        md.append(f"- {r['case']}: speed {r['gflops_vs_1x1']:.2f}x of 1x1 ({speed}); build {r['build_vs_1x1']:.2f}x ({built})")
    for r in rows:  # each way of padding the 3x3 convolution: inline and as a copy (hoist_padding)
        if r["case"].startswith("conv3x3") and "vs_torch" in r:
            verdict = "met" if r["vs_torch"] <= 1.2 else "missed"
            md.append(f"- {r['case']} vs PyTorch: {r['vs_torch']:.2f}x its time ({verdict})")
    return md


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", type=int, default=56)
    parser.add_argument("--channels", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--min-ms", type=float, default=100.0)
    parser.add_argument("--cols", type=int, nargs="+", default=list(COLUMNS))
    parser.add_argument("--blocks", type=int, nargs="+", default=list(BLOCKS))
    parser.add_argument("--cases", nargs="+", choices=[c.name for c in CASES], default=[c.name for c in CASES])
    parser.add_argument("--threads", type=int, default=bench.THREADS, choices=(1, 2))
    parser.add_argument("--output", type=Path, default=REPO / "results")
    args = parser.parse_args(argv)
    THREADS[0] = args.threads
    cases = [c for c in CASES if c.name in args.cases or c.name == "conv1x1"]  # conv1x1: the base of the ratios
    tiles = [(c, b) for c in args.cols for b in args.blocks]
    result = measure(cases, tiles, args.size, args.channels, args.rounds, args.min_ms)
    write_results(args.output, "reduction_tiles", report(result, argv), result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
