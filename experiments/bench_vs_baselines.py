"""Benchmark autotune's tuned kernels against numpy, the untuned default schedule and PyTorch.

    .venv/bin/python experiments/bench_vs_baselines.py [--workloads pool_chain bottleneck matmul]
        [--rounds 5] [--repeats 20] [--min-ms 100] [--warmup-ms 20] [--budget-ms 5000]
        [--settle-ms 250] [--output results]
        [--best WORKLOAD=PATH ...] [--small --output DIR]

Workloads (the built-in chains at these sizes): pool_chain (1x132x132x64 NHWC, two 3x3
stride-1 max pools), bottleneck (1x112x112, 16 -> 96 -> 16: expand 1x1 + relu6,
depthwise 3x3 pad 1 + relu6, project 1x1), matmul (1024^3). Systems, everything on
2 threads (BLAS, numba's prange, torch):

- ``numpy``: the workload's numpy reference (``Workload.reference``);
- ``autotune-default``: the chain with no schedule steps, lowered and built;
- ``autotune``: the trace of ``results/<workload>/best.json`` (from
  ``autotune run experiments/configs/<workload>.yaml``) replayed, lowered with its pools,
  planner and seed, built; skipped with a message when the file is missing;
- ``torch-eager`` (NCHW), ``torch-eager-channels_last`` and ``torch.compile`` (of the
  channels_last function) when ``import torch`` works; matmul has no channels_last row.

Every system is checked against the numpy reference (``autotune.measure.compare``)
before it is timed; a wrong one is reported and not timed. Timing is one process:
each round times every system once (its own median of at least ``--repeats`` runs and
``--min-ms`` after ``--warmup-ms`` of warm-up runs; a system slower than ``--budget-ms``
per timing gets fewer runs), the order
rotated by one each round. A latency is the median over rounds; a ratio
autotune / system is the median over rounds of the per-round ratio.
Writes ``<output>/bench.md``, ``bench.json`` and ``bench.parquet``. ``--small`` uses
tiny shapes for a smoke test and needs ``--output``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import platform
import shlex
import sys
import time
import tracemalloc
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
THREADS = 2
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ[_var] = str(THREADS)  # before numpy and numba are imported
# torch.compile's C++ backend probes the vector ISA by building and loading a test library; on this
# shared machine the probe fails now and then, and inductor then emits scalar code (a weak baseline)
# or vector code built without the ISA flags (a C++ compile error). The host's AVX-512 is not in doubt.
os.environ.setdefault("TORCHINDUCTOR_VEC_ISA_OK", "1")
os.environ.setdefault("NUMBA_CACHE_DIR", str(REPO / ".cache" / "numba"))
os.environ.setdefault("AUTOTUNE_CACHE_DIR", str(REPO / ".cache" / "autotune"))

import numpy as np  # noqa: E402

from autotune import workloads  # noqa: E402
from autotune.codegen import build  # noqa: E402
from autotune.codegen.target import host_has_avx512, vector_width  # noqa: E402
from autotune.errors import AutotuneError, PoolOverflowError  # noqa: E402
from autotune.lowering import DEFAULT_POOLS, Lowered, lower  # noqa: E402
from autotune.measure import compare, empty_outputs, reference_outputs, time_kernel  # noqa: E402
from autotune.memory import Pool  # noqa: E402
from autotune.schedule import Schedule, load_trace  # noqa: E402

WORKLOADS = ("pool_chain", "bottleneck", "matmul")
SYSTEMS = (
    "autotune",
    "autotune-default",
    "numpy",
    "torch-eager",
    "torch-eager-channels_last",
    "torch.compile",
)
FULL = {
    "pool_chain": {"height": 132, "width": 132, "channels": 64},
    "bottleneck": {"height": 112, "width": 112, "cin": 16, "expand": 96},
    "matmul": {"m": 1024, "n": 1024, "k": 1024},
}
SMALL = {
    "pool_chain": {"height": 12, "width": 12, "channels": 4},
    "bottleneck": {"height": 8, "width": 8, "cin": 4, "expand": 8},
    "matmul": {"m": 64, "n": 64, "k": 64},
}
POOL_VS_COMPILE, POOL_WORKSPACE = 0.35, 110_000  # bytes (110 kB, decimal)
NECK_VS_CHANNELS_LAST, NECK_WORKSPACE_FRACTION = 0.65, 20
MATMUL_VS_NUMPY = 2.0
BUSY_LOAD = 1.0  # 1-minute load average above which the report warns that timings are unreliable


@dataclass
class System:
    """One way of computing a workload: a bound runner (None if it failed) and its timings."""

    name: str
    run: Callable[[], object] | None
    workspace: int | None
    error: str = ""
    note: str = ""
    probe_ms: float = 0.0
    warmup: int = 1
    repeats: int = 1
    medians: list[float] = field(default_factory=list)
    mins: list[float] = field(default_factory=list)


def _checked(
    name: str,
    run: Callable[[], Any],
    outputs: Callable[[Any], Sequence[np.ndarray]],
    refs: tuple[np.ndarray, ...],
    workspace: int,
) -> System:
    """Run once, compare ``outputs(result)`` with the reference (a wrong system is not timed),
    and time one more run: the probe that sets how many runs a timing can afford."""
    ok, err = compare(outputs(run()), refs)
    if not ok:
        print(f"FAILED: {name} differs from the numpy reference (max abs err {err:.3g})", file=sys.stderr)
        return System(name, None, workspace, f"WRONG: max abs err {err:.3g} vs the numpy reference")
    start = time.perf_counter()
    run()
    return System(name, run, workspace, probe_ms=(time.perf_counter() - start) * 1e3)


def numba_system(
    name: str, lowered: Lowered, inputs: tuple[np.ndarray, ...], refs: tuple[np.ndarray, ...]
) -> System:
    """Build ``lowered`` (as ``experiments/schedules.py`` does), check it, bind a runner for timing."""
    try:
        kernel = build(lowered.func, lowered.plan)
        outputs = empty_outputs(lowered.func)
        args = (*inputs, *outputs)
        kernel.compile(*args)
        kernel.check_args(args)
    except AutotuneError as exc:
        print(f"FAILED: {name} could not be built: {exc}", file=sys.stderr)
        return System(name, None, lowered.plan.total_peak, f"build failed: {exc}")
    dispatcher, full = kernel.dispatcher, (*args, *kernel.storage)

    def run() -> None:
        dispatcher(*full)

    system = _checked(name, run, lambda _: outputs, refs, lowered.plan.total_peak)
    parallel = kernel.kernel_source.parallel
    system.note = f"{'parallel (2 threads)' if parallel else 'serial (1 thread)'} numba kernel"
    return system


def read_best(path: Path, wl: workloads.Workload) -> tuple[dict[str, Any] | None, str]:
    """The best.json at ``path`` if it is for this workload at these parameters, else why not."""
    command = f".venv/bin/autotune run experiments/configs/{wl.name}.yaml"
    if not path.exists():
        return None, f"{path} is missing: `{command}` writes it"
    data = json.loads(path.read_text(encoding="utf-8"))
    name, args = data["workload"]["name"], data["workload"]["args"]
    if name != wl.name or workloads.get(name, **args).params != wl.params:
        return None, f"{path} is for {name}({args}), not {wl.name}({wl.params})"
    return data, ""


def autotune_systems(
    wl: workloads.Workload, inputs: tuple[np.ndarray, ...], refs: tuple[np.ndarray, ...], best_path: Path
) -> tuple[list[System], str]:
    """The default schedule and, if ``best_path`` fits this workload, the tuned one; and why
    there is no tuned one ("" when there is)."""
    best, why = read_best(best_path, wl)
    pools = tuple(Pool(p["name"], p["size"]) for p in best["pools"]) if best else DEFAULT_POOLS
    planner, seed = (best["planner"], best["seed"]) if best else ("greedy_by_size", 0)
    try:
        default = lower(wl.func, pools=pools, planner=planner, seed=seed)
    except PoolOverflowError:  # the untiled chain rarely fits a config's pools: one unbounded pool
        default = lower(wl.func, pools=DEFAULT_POOLS, planner=planner, seed=seed)
    out = [numba_system("autotune-default", default, inputs, refs)]
    if best is None:
        print(f"  skipping the autotune row of {wl.name}: {why}", flush=True)
        return out, why
    try:
        sch = Schedule.replay(wl.func, load_trace(str(best_path)))
        lowered = lower(sch.func, pools=pools, planner=planner, seed=seed)
    except AutotuneError as exc:
        print(f"FAILED: autotune ({best_path}) cannot be lowered: {exc}", file=sys.stderr)
        return [*out, System("autotune", None, None, f"build failed: replay/lowering: {exc}")], ""
    return [numba_system("autotune", lowered, inputs, refs), *out], ""


def numpy_system(
    wl: workloads.Workload, inputs: tuple[np.ndarray, ...], refs: tuple[np.ndarray, ...]
) -> System:
    return _checked("numpy", partial(wl.reference, *inputs), tuple, refs, wl.intermediate_bytes)


def numpy_allocated_peak(wl: workloads.Workload, inputs: tuple[np.ndarray, ...]) -> int:
    """Peak bytes numpy allocates during one call of the reference (tracemalloc; includes the output)."""
    tracemalloc.start()
    try:
        wl.reference(*inputs)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


# ---------------------------------------------------------------- PyTorch


def torch_workload(
    torch: Any, name: str, inputs: tuple[np.ndarray, ...]
) -> tuple[Callable[..., Any], tuple[Any, ...]]:
    """The workload as a torch function and its arguments; 4-d ones are NCHW views (``permute``)
    of the NHWC arrays, weights converted from the chain's layouts."""
    F = torch.nn.functional
    t = [torch.from_numpy(a) for a in inputs]
    if name == "matmul":
        return torch.mm, (t[0], t[1])
    if name == "pool_chain":
        return (lambda x: F.max_pool2d(F.max_pool2d(x, 3, stride=1), 3, stride=1)), (
            t[0].permute(0, 3, 1, 2),
        )

    def neck(x: Any, we: Any, wd: Any, wp: Any) -> Any:
        y = F.conv2d(x, we).clamp_(0, 6)
        y = F.conv2d(y, wd, padding=1, groups=wd.shape[0]).clamp_(0, 6)
        return F.conv2d(y, wp)

    return neck, (
        t[0].permute(0, 3, 1, 2),  # data [1,H,W,cin] -> [1,cin,H,W]
        t[1].permute(3, 2, 0, 1),  # w_expand [1,1,cin,E] -> [E,cin,1,1]
        t[2].permute(2, 0, 1).unsqueeze(1),  # w_depthwise [3,3,E] -> [E,1,3,3]
        t[3].permute(3, 2, 0, 1),  # w_project [1,1,E,cin] -> [cin,E,1,1]
    )


def torch_systems(
    wl: workloads.Workload, inputs: tuple[np.ndarray, ...], refs: tuple[np.ndarray, ...]
) -> list[System]:
    """Eager NCHW, eager channels_last and torch.compile of the channels_last function; [] without torch."""
    try:
        import torch
    except ImportError:
        print("  torch is not importable: no torch rows", flush=True)
        return []
    torch.set_num_threads(THREADS)
    fn, args = torch_workload(torch, wl.name, inputs)
    nchw = args[0].dim() == 4
    layouts = {"torch-eager": tuple(a.contiguous() for a in args)}
    if nchw:
        last = torch.channels_last
        layouts["torch-eager-channels_last"] = tuple(a.contiguous(memory_format=last) for a in args)

    def to_numpy(out: Any) -> tuple[np.ndarray]:
        return ((out.permute(0, 2, 3, 1) if nchw else out).contiguous().numpy(),)

    compiled_args = layouts.get("torch-eager-channels_last", layouts["torch-eager"])
    out: list[System] = []
    for name, arrays in [*layouts.items(), ("torch.compile", compiled_args)]:
        call = fn
        if name == "torch.compile":
            try:
                call = torch.compile(fn)
                for _ in range(3):  # the first call compiles
                    call(*arrays)
            except Exception as exc:  # inductor fails in many ways (no compiler, ...): record, go on
                text = f"{type(exc).__name__}: {exc}".strip()
                print(f"  torch.compile failed on {wl.name}: {text.splitlines()[0]}", file=sys.stderr)
                out.append(System(name, None, None, f"torch.compile failed: {text}"))
                continue
        out.append(_checked(name, partial(call, *arrays), to_numpy, refs, wl.intermediate_bytes))
        if name == "torch.compile":
            out[-1].note = f"inductor C++ code for vector ISA {_inductor_isa()}"
    return out


def _inductor_isa() -> str:
    """The vector ISA inductor compiled for (a private module: 'unknown' if it moved)."""
    try:
        from torch._inductor.cpu_vec_isa import pick_vec_isa

        isa = pick_vec_isa()
    except (ImportError, AttributeError):
        return "unknown"
    return type(isa).__name__ + ("" if isa else " (none: scalar code)")


# ---------------------------------------------------------------- timing and summary


def runs_for(probe_ms: float, repeats: int, budget_ms: float, min_ms: float, warmup_ms: float) -> tuple[int, int]:
    """(warm-up runs, timed runs) of one timing for a system whose probe run took ``probe_ms``.

    The warm-up lasts about ``warmup_ms`` (at least one run) and the timed runs at least ``repeats``
    runs and about ``min_ms``, both cut to fit ``budget_ms`` (at least one timed run; no warm-up for
    a system slower than the budget). After the pause before a timing the cores have clocked down and
    the worker threads sleep: 20 runs of a 0.14 ms kernel measured 0.21 ms, 200 runs 0.14 ms.
    """
    per_run = max(probe_ms, 1e-6)
    fit = int(budget_ms // per_run)
    timed = max(1, min(max(repeats, math.ceil(min_ms / per_run)), fit))
    warmup = 0 if probe_ms > budget_ms else max(1, min(math.ceil(warmup_ms / per_run), fit))
    return warmup, timed


def time_rounds(
    systems: list[System],
    rounds: int,
    repeats: int,
    budget_ms: float,
    settle_s: float,
    min_ms: float = 0.0,
    warmup_ms: float = 0.0,
) -> None:
    """Each round times every live system once, in an order rotated by one per round, after a pause
    of ``settle_s``: OpenBLAS and OpenMP worker threads busy-wait for a while after a call (OpenBLAS
    about 0.1 s), and on 2 cores they would slow whichever system runs next. How many runs each
    timing takes: :func:`runs_for`."""
    live = [s for s in systems if s.run is not None]
    for s in live:
        s.warmup, s.repeats = runs_for(s.probe_ms, repeats, budget_ms, min_ms, warmup_ms)
    for r in range(rounds):
        k = r % max(len(live), 1)
        for s in live[k:] + live[:k]:
            assert s.run is not None
            time.sleep(settle_s)
            median, low, _ = time_kernel(s.run, warmup=s.warmup, repeats=s.repeats)
            s.medians.append(median)
            s.mins.append(low)
        print(
            f"  round {r + 1}/{rounds}: " + ", ".join(f"{s.name} {s.medians[-1]:.3f} ms" for s in live),
            flush=True,
        )


def _paired(a: System | None, b: System, of_mins: bool = False) -> float | None:
    """Median over rounds of a's timing / b's timing in the same round (of medians, or of minima)."""
    if a is None or not a.medians or not b.medians:
        return None
    x, y = (a.mins, b.mins) if of_mins else (a.medians, b.medians)
    return float(np.median([p / q for p, q in zip(x, y)]))


def summarize(wl: workloads.Workload, systems: list[System]) -> list[dict[str, Any]]:
    """One row per system, in ``SYSTEMS`` order: latency, ratios, workspace, GFLOP/s."""
    by = {s.name: s for s in systems}
    rows = []
    for s in sorted(systems, key=lambda s: SYSTEMS.index(s.name)):
        ms = float(np.median(s.medians)) if s.medians else None
        rows.append({
            "workload": wl.name, "system": s.name, "median_ms": ms, "workspace_bytes": s.workspace,
            "gflops": wl.flops / ms / 1e6 if ms else None, "runs": f"{s.warmup}+{s.repeats}" if ms else "-",
            "vs_autotune": _paired(by.get("autotune"), s), "vs_default": _paired(by.get("autotune-default"), s),
            "vs_autotune_of_mins": _paired(by.get("autotune"), s, of_mins=True),
            "min_ms": min(s.mins) if s.mins else None, "per_round_ms": list(s.medians),
            "per_round_min_ms": list(s.mins), "error": s.error, "note": s.note, "flops": wl.flops,
        })  # fmt: skip
    return rows


def _f(value: float | None, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| system | median ms | min ms | autotune / system | (of minima) | autotune-default / system "
        "| workspace bytes | GFLOP/s | runs |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        ws = "-" if r["workspace_bytes"] is None else f"{r['workspace_bytes']:,}"
        lines.append(
            f"| {r['system']} | {_f(r['median_ms'], '.3f')} | {_f(r['min_ms'], '.3f')} "
            f"| {_f(r['vs_autotune'], '.3f')} | {_f(r['vs_autotune_of_mins'], '.3f')} | {_f(r['vs_default'], '.3f')} | {ws} | {_f(r['gflops'], '.2f')} | {r['runs']} |"
        )
    failed = [f"- {r['system']}: {r['error']}" for r in rows if r["error"]]
    notes = [f"- {r['system']}: {r['note']}" for r in rows if r["note"]]
    if failed:
        lines += ["", "Not timed:", "", *failed]
    return "\n".join(lines + (["", *notes] if notes else []))


def _verdict(label: str, ok: bool | None, detail: str) -> str:
    return f"- {label}: {'NOT CHECKED' if ok is None else 'MET' if ok else 'MISSED'} ({detail})"


def targets(rows: list[dict[str, Any]], missing: dict[str, str]) -> list[str]:
    """One line per target: MET / MISSED with the figures, NOT CHECKED when a row is missing."""
    at = {(r["workload"], r["system"]): r for r in rows}
    out = []
    specs = [
        ("pool_chain", "torch.compile", POOL_VS_COMPILE),
        ("bottleneck", "torch-eager-channels_last", NECK_VS_CHANNELS_LAST),
        ("matmul", "numpy", MATMUL_VS_NUMPY),
    ]
    for wl, other, bound in specs:
        auto, base = at.get((wl, "autotune")), at.get((wl, other))
        if auto is None or auto["median_ms"] is None or base is None or base["vs_autotune"] is None:
            why = (
                missing.get(wl)
                or ("" if any(w == wl for w, _ in at) else "not benchmarked in this run (--workloads)")
                or (auto or {}).get("error")
                or (base or {}).get("error")
                or "a row is missing"
            )
            out.append(_verdict(f"{wl} autotune <= {bound}x {other}", None, why))
            continue
        ratio, by_min = base["vs_autotune"], base["vs_autotune_of_mins"]
        detail = (
            f"{ratio:.3f}x: {auto['median_ms']:.3f} ms vs {base['median_ms']:.3f} ms; "
            f"by minima {by_min:.3f}x: {auto['min_ms']:.3f} ms vs {base['min_ms']:.3f} ms"
        )
        if (ratio <= bound) != (by_min <= bound):
            detail += "; medians and minima disagree: the machine was busy, rerun when it is quiet"
        out.append(_verdict(f"{wl} autotune <= {bound}x {other}", ratio <= bound, detail))
        if wl == "pool_chain":
            ws = auto["workspace_bytes"]
            out.append(
                _verdict(
                    f"pool_chain autotune workspace <= {POOL_WORKSPACE:,} bytes (110 kB, decimal)",
                    ws <= POOL_WORKSPACE,
                    f"{ws:,} bytes",
                )
            )
        if wl == "bottleneck":
            ws, dws = auto["workspace_bytes"], at[(wl, "autotune-default")]["workspace_bytes"]
            out.append(
                _verdict(
                    f"bottleneck autotune workspace <= 1/{NECK_WORKSPACE_FRACTION} of autotune-default's",
                    ws * NECK_WORKSPACE_FRACTION <= dws,
                    f"{ws:,} vs {dws:,} bytes: 1/{dws / max(ws, 1):.1f}",
                )
            )
    return out


# ---------------------------------------------------------------- report


def _machine() -> str:
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    import llvmlite.binding as llvm  # the CPU LLVM compiles for: the tuned kernels are only comparable on one kind

    model += f" (LLVM cpu {llvm.get_host_cpu_name()}, {'with' if host_has_avx512() else 'no'} AVX-512)"
    try:
        import torch

        torch_text = f"torch {torch.__version__}"
    except ImportError:
        torch_text = "no torch"
    return (
        f"{model}, {os.cpu_count()} CPUs, numba {vector_width()}-bit vectors, {THREADS} threads everywhere; "
        f"python {platform.python_version()}, numpy {np.__version__}, {torch_text}"
    )


HOW = [
    "- Latency: each round times every system once (order rotated by one per round): warm-up runs for about "
    "`--warmup-ms`, then the median of the timed runs, at least `--repeats` of them and about `--min-ms` in all "
    "(`runs` = warm-up + timed; fewer only for systems slower than `--budget-ms` per timing). Short kernels "
    "need the many runs: after the pause the cores clock down and thread pools sleep, and 20 runs of the "
    "0.14 ms pool_chain kernel measured 0.21 ms. The latency is the median over rounds; `min ms` is the fastest single "
    "run seen (what a system can do when nothing else runs: on 2 shared cores a 2-thread system loses the most "
    "to other processes, since each parallel region waits for its slowest thread); `X / system` is the median over "
    "rounds of the per-round ratio X's median / system's median, so a ratio compares timings taken moments apart; "
    "`(of minima)` is the same with each round's fastest run. The targets are judged on the ratio of medians.",
    "- Threads: numba with NUMBA_NUM_THREADS=2 (only kernels with a parallel loop use them), "
    "OPENBLAS/OMP/MKL_NUM_THREADS=2 set before numpy is imported, `torch.set_num_threads(2)`. Each timing "
    "starts after a pause (`--settle-ms`): OpenBLAS's worker threads busy-wait about 0.1 s after a call, and "
    "measured on this machine a torch conv right after a numpy matmul took +3 to +30 ms instead of 0.4 ms.",
    "- Workspace of autotune rows: `lowered.plan.total_peak`, the planned peak of the kernel's intermediate "
    "allocations. autotune-default is lowered with the best.json's pools when they fit, else (and without a "
    "best.json) with one unbounded pool.",
    "- Workspace of numpy and torch rows: `Workload.intermediate_bytes`, the bytes of the chain's stage outputs "
    "that are not its output, which these libraries materialize whole: pool_chain pool1 (H-2)x(W-2)xC float32; "
    "bottleneck expand and depthwise, 2 x HxWxE float32 (torch's relu6 is in place); matmul 0. It is a lower "
    "bound: numpy's reference also makes padded, window and dtype copies (its tracemalloc peak is given "
    "under each workload), and torch may keep scratch buffers of its own.",
    "- PyTorch: the same math in `torch.nn.functional` (pool_chain: two `max_pool2d(3, stride=1)`; bottleneck: "
    "conv 1x1, `clamp_(0, 6)`, depthwise conv 3x3 pad 1 groups=E, `clamp_(0, 6)`, conv 1x1; matmul: `torch.mm`) "
    "on the same seeded arrays: NHWC data and HWIO-style weights are permuted to NCHW / OIHW, then made "
    "contiguous (torch-eager) or `torch.channels_last` (torch-eager-channels_last, torch.compile). "
    "torch.compile (default mode, inductor) runs 3 times before the check. Its vector-ISA probe is flaky on this "
    "shared machine (scalar code, or a C++ compile error), so the script sets TORCHINDUCTOR_VEC_ISA_OK=1 unless "
    "it is already set; the note under each table names the ISA inductor used. For pool_chain inductor still "
    "writes pool1 to a buffer (seen with TORCH_LOGS=output_code), so its workspace is counted like eager's.",
    "- GFLOP/s: `Workload.flops` (autotune.workloads.flops conventions: a multiply-add is 2, a max 1, relu6 2 "
    "per element) / latency.",
    "- Correctness: every system's output was compared with the numpy reference "
    "(`autotune.measure.compare`, float32 rtol 1e-4, atol 1e-4 x max(1, max|ref|)) before timing.",
]


def report(
    args: argparse.Namespace,
    argv: Sequence[str],
    sections: list[str],
    rows: list[dict[str, Any]],
    missing: dict[str, str],
    load_start: float,
    started: float,
) -> str:
    command = shlex.join([".venv/bin/python", "experiments/bench_vs_baselines.py", *argv])
    load_end = os.getloadavg()[0]
    busy = max(load_start, load_end) > BUSY_LOAD
    warning = [
        f"**The machine was busy (load average above {BUSY_LOAD:g} on {os.cpu_count()} CPUs): 2-thread "
        "timings lose whole scheduler ticks (4 ms) when a thread is descheduled; compare `min ms` and the "
        "ratios of minima, and rerun on a quiet machine before trusting a verdict.**",
        "",
    ]
    date = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    text = "\n".join([
        "# autotune vs numpy, its default schedule and PyTorch",
        "",
        f"Command: `cd {REPO} && {command}`  ",
        f"Date: {date}; {time.time() - started:.0f} s.  ",
        f"Machine: {_machine()}.  ",
        f"Load average (1 min): {load_start:.2f} at start, {load_end:.2f} at end.  ",
        f"Timing: {args.rounds} rounds, at least {args.repeats} runs and {args.min_ms:g} ms per timing after "
        f"{args.warmup_ms:g} ms of warm-up, budget {args.budget_ms:g} ms per timing, "
        f"{args.settle_ms:g} ms pause before each timing.",
        "",
        *(warning if busy else []),
        *sections,
        "## Targets",
        "",
        *targets(rows, missing),
        "",
        "## How the figures are made",
        "",
        *HOW,
        "",
    ])  # fmt: skip
    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)
    (out / "bench.md").write_text(text, encoding="utf-8")
    keep = [r for r in rows if r["median_ms"] is not None]
    keys = ("workload", "system", "median_ms", "workspace_bytes")
    (out / "bench.json").write_text(
        json.dumps([{k: r[k] for k in keys} for r in keep], indent=1) + "\n", encoding="utf-8"
    )
    write_parquet(out / "bench.parquet", keep)
    return text


def write_parquet(path: Path, rows: list[dict[str, Any]]) -> None:
    """One row per workload x system x round."""
    import pandas as pd

    columns = ["workload", "system", "round", "median_ms", "workspace_bytes", "gflops", "min_ms"]
    records = [
        (r["workload"], r["system"], i, ms, r["workspace_bytes"], r["flops"] / ms / 1e6, low)
        for r in rows
        for i, (ms, low) in enumerate(zip(r["per_round_ms"], r["per_round_min_ms"]))
    ]
    pd.DataFrame(records, columns=columns).to_parquet(path, index=False)


def run_workload(name: str, args: argparse.Namespace) -> tuple[str, list[dict[str, Any]], str]:
    """Build, check and time every system of one workload: its md section, its rows, and why
    the autotune row is missing ("" when it is there)."""
    wl = workloads.get(name, **(SMALL if args.small else FULL)[name])
    title = f"{wl.name}({', '.join(f'{k}={v}' for k, v in wl.params.items())})"
    print(f"{title}: building and checking", flush=True)
    inputs = wl.make_inputs(0)
    refs = reference_outputs(wl, inputs)
    systems, missing = autotune_systems(
        wl, inputs, refs, args.best.get(name, REPO / "results" / name / "best.json")
    )
    systems += [numpy_system(wl, inputs, refs), *torch_systems(wl, inputs, refs)]
    print(f"{title}: timing {', '.join(s.name for s in systems if s.run is not None)}", flush=True)
    time_rounds(
        systems, args.rounds, args.repeats, args.budget_ms, args.settle_ms / 1e3, args.min_ms, args.warmup_ms
    )
    rows = summarize(wl, systems)
    section = [
        f"## {title}",
        "",
        f"{wl.description}. {wl.flops:,} flop; inputs seeded 0. The numpy reference allocates "
        f"{numpy_allocated_peak(wl, inputs):,} bytes at its peak during one call (tracemalloc, output included).",
        "",
        table(rows),
        "",
    ]
    if missing:
        section[4:4] = [f"No autotune row: {missing}.", ""]
    return "\n".join(section), rows, missing


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--workloads", nargs="+", choices=WORKLOADS, default=list(WORKLOADS))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument(
        "--budget-ms",
        type=float,
        default=5000.0,
        help="timed runs per timing are cut to fit about this many ms (at least 1 run)",
    )
    parser.add_argument(
        "--settle-ms", type=float, default=250.0, help="pause before each timing (idle thread pools go quiet)"
    )
    parser.add_argument(
        "--min-ms", type=float, default=100.0, help="each timing runs at least --repeats runs and about this long"
    )
    parser.add_argument(
        "--warmup-ms", type=float, default=20.0, help="warm-up runs before each timing last about this long"
    )
    parser.add_argument(
        "--output", default=None, help="directory for bench.md/.json/.parquet (default: results)"
    )
    parser.add_argument(
        "--best",
        action="append",
        default=[],
        metavar="WORKLOAD=PATH",
        help="best.json of a workload (default: results/<workload>/best.json)",
    )
    parser.add_argument("--small", action="store_true", help="tiny shapes, for a smoke test (needs --output)")
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.repeats < 1:
        parser.error("--rounds and --repeats must be at least 1")
    if args.output is None:
        if args.small:
            parser.error("--small needs --output: its figures must not replace results/bench.*")
        args.output = str(REPO / "results")
    best: dict[str, Path] = {}
    for item in args.best:
        name, sep, path = item.partition("=")
        if not sep or name not in WORKLOADS:
            parser.error(
                f"--best {item!r}: expected WORKLOAD=PATH with WORKLOAD one of {', '.join(WORKLOADS)}"
            )
        best[name] = Path(path)
    args.best = best
    return args


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    started, load_start = time.time(), os.getloadavg()[0]
    sections, rows, missing = [], [], {}
    for name in args.workloads:
        section, wl_rows, why = run_workload(name, args)
        sections.append(section)
        rows += wl_rows
        if why:
            missing[name] = why
    print(report(args, argv, sections, rows, missing, load_start, started))
    wrong = [
        f"{r['workload']}/{r['system']}" for r in rows if r["error"].startswith(("WRONG", "build failed"))
    ]
    if wrong:
        print(f"FAILED rows: {', '.join(wrong)}", file=sys.stderr)
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
