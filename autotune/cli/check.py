"""``autotune workloads``, ``show`` and ``check``: the built-in chains, their IR and kernels, a checked timing.

``check`` lowers the default schedule (or one replayed from ``--trace``), plans
memory in the pools, compiles, runs on seeded inputs, compares with the numpy
reference and times the kernel.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from .. import ir, workloads
from ..codegen import generate_source
from ..config import WorkloadConfig, load_onnx_workload, load_workload
from ..errors import AutotuneError, ConfigError, PoolOverflowError
from ..lowering import DEFAULT_POOLS, Lowered, lower
from ..measure import MeasureResult, measure
from ..memory import Pool, draw, format_size, get_planner, parse_pools
from ..schedule import Schedule, load_trace
from ..search.target import Target
from .common import EXIT_OK, EXIT_USAGE, EXIT_WRONG

DEFAULT_WARMUP, DEFAULT_REPEATS = 2, 10
TIME_BUDGET_MS = 3000.0
"""Without ``--repeats``, a workload's timed runs take about this long at most (but at least one run)."""


# ---------------------------------------------------------------- arguments


def parse_param(text: str) -> tuple[str, int | float]:
    """``"height=20"`` -> ``("height", 20)``; a value with a dot is a float (``"scale=0.5"``)."""
    key, sep, value = (part.strip() for part in text.partition("="))
    if not sep or not key.isidentifier():
        raise ConfigError(f"--param: expected KEY=VALUE such as height=20, got {text!r}")
    try:
        return key, float(value) if "." in value else int(value)
    except ValueError:
        raise ConfigError(f"--param {key}: expected a number, got {value!r}") from None


def parse_params(texts: Sequence[str]) -> dict[str, int | float]:
    """Every ``--param KEY=VALUE`` as a dict; a key given twice is an error."""
    params: dict[str, int | float] = {}
    for text in texts:
        key, value = parse_param(text)
        if key in params:
            raise ConfigError(f"--param {key}: given twice")
        params[key] = value
    return params


def is_workload_file(text: str) -> bool:
    """Whether a WORKLOAD argument is ``file.py:function`` rather than a built-in name."""
    return ":" in text or text.endswith(".py") or "/" in text


def load_workload_arg(
    text: str, params: dict[str, int | float], cut: tuple[str | None, str | None] = (None, None)
) -> workloads.Workload:
    """The workload a WORKLOAD argument names: a built-in chain, ``file.py:function`` (relative
    to the current directory) whose function returns a Workload or a Chain (a chain's reference is
    checked against its outputs' shapes and dtypes), or ``model.onnx`` cut from ``cut[0]`` to ``cut[1]``
    (``--from``/``--to``, see :func:`autotune.config.load_onnx_workload`)."""
    if text.endswith(".onnx"):
        return load_onnx_workload(text, cut[0], cut[1], params)
    if any(cut):
        raise ConfigError(f"workload {text!r}: --from and --to cut an ONNX model (MODEL.onnx)")
    if not is_workload_file(text):
        return workloads.get(text, **params)
    file, sep, function = text.rpartition(":")
    if not sep or not file or not function.isidentifier():
        raise ConfigError(f"workload {text!r}: expected a built-in name or FILE.py:FUNCTION")
    path = Path(file).expanduser().resolve()
    if not path.is_file():
        raise ConfigError(f"workload {text!r}: no file {path}")
    return load_workload(WorkloadConfig(None, f"{path}:{function}", tuple(params.items())))


def _pools(args: argparse.Namespace) -> tuple[Pool, ...]:
    return DEFAULT_POOLS if args.pools is None else parse_pools(args.pools)


def target_note(path: str, host: Target | None = None) -> str | None:
    """What differs between the target a ``best.json`` was tuned on and this host, or None (a plain
    trace, a record without a target, or the same target)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        tuned = Target.from_json(data["target"]) if isinstance(data, dict) and "target" in data else None
    except (OSError, ValueError, TypeError, RecursionError):
        return None  # not a best.json with a target: load_trace says what is wrong with the file
    if tuned is None:
        return None
    changed = tuned.differences(host or Target.host())
    if not changed:
        return None
    return f"note: {path} was tuned on another target ({'; '.join(changed)}): re-tune it for this machine"


def _func(args: argparse.Namespace, wl: workloads.Workload) -> ir.Func:
    """The workload's function, scheduled by the steps of ``--trace`` when given (with a note on
    stderr when the trace's ``best.json`` was tuned on another target)."""
    if args.trace is None:
        return wl.func
    note = target_note(args.trace)
    if note is not None:
        print(note, file=sys.stderr)
    return Schedule.replay(wl.func, load_trace(args.trace)).func


def _lower(args: argparse.Namespace, func: ir.Func) -> Lowered:
    get_planner(args.planner)  # an unknown name is an error even when nothing needs planning
    return lower(func, pools=_pools(args), planner=args.planner, seed=args.seed)


# ---------------------------------------------------------------- formatting


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]], right: Sequence[bool]) -> str:
    """Rows under headers, columns padded; the last column is never padded."""
    widths = [max(len(str(c)) for c in col) for col in zip(headers, *rows)]
    lines = []
    for row in (headers, *rows):
        cells = [cell.rjust(w) if r else cell.ljust(w) for cell, w, r in zip(row, widths, right)]
        if not right[-1]:
            cells[-1] = row[-1]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)


def _short_size(n: int) -> str:
    """``512 B``, ``97.5 KiB``, ``4.0 MiB``."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def _short_count(n: float) -> str:
    """``950``, ``19.2M``, ``2.15G``: three significant digits with a metric suffix."""
    for suffix, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if n >= scale:
            return f"{n / scale:.3g}{suffix}"
    return f"{n:.3g}"


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _err(value: float | None) -> str:
    return "-" if value is None else f"{value:.2g}"


def _gflops(wl: workloads.Workload, result: MeasureResult) -> str:
    return "-" if not result.median_ms else f"{wl.flops / result.median_ms / 1e6:.2f}"


def _title(wl: workloads.Workload) -> str:
    return f"{wl.name}({', '.join(f'{k}={v}' for k, v in wl.params.items())})"


def _stages(func: ir.Func) -> list[str]:
    return [b.name for b in ir.collect(func.body, ir.Block) if b.name != "root"]


# ---------------------------------------------------------------- workloads, show


def cmd_workloads(args: argparse.Namespace) -> int:
    """Print a table of the built-in chains."""
    rows = []
    for name in workloads.names():
        wl = workloads.get(name)
        params = " ".join(f"{k}={v}" for k, v in wl.params.items())
        stages = str(len(_stages(wl.func)))
        rows.append(
            [name, params, stages, _short_count(wl.flops), _short_size(wl.intermediate_bytes), wl.description]
        )
    headers = ["name", "parameters (defaults)", "stages", "FLOPs", "intermediates", "description"]
    print(_table(headers, rows, [False, False, True, True, True, False]))
    return EXIT_OK


def cmd_show(args: argparse.Namespace) -> int:
    """Print the IR, the lowered IR or the kernel source of one workload."""
    wl = load_workload_arg(args.workload, parse_params(args.param), (args.start, args.end))
    func = _func(args, wl)
    if args.lowered or args.source:
        lowered = _lower(args, func)
        text = generate_source(lowered.func).text if args.source else str(lowered.func)
    else:
        text = str(func)
    print(text.rstrip("\n"))
    return EXIT_OK


# ---------------------------------------------------------------- check


def _auto_runs(one_run_ms: float, warmup: int | None) -> tuple[int, int]:
    """``(warmup, repeats)`` so that the timed runs take at most about ``TIME_BUDGET_MS``.

    A kernel slower than that budget gets ``(0, 1)``: its one probe run is the measurement.
    """
    affordable = int(TIME_BUDGET_MS // max(one_run_ms, 1e-6))
    if affordable >= DEFAULT_WARMUP + DEFAULT_REPEATS:
        return (DEFAULT_WARMUP if warmup is None else warmup), DEFAULT_REPEATS
    # a slow kernel: the check run and the probe run have warmed the caches already
    return (0 if warmup is None else warmup), max(1, min(DEFAULT_REPEATS, affordable))


def check_lowered(
    wl: workloads.Workload, lowered: Lowered, seed: int, warmup: int | None, repeats: int | None
) -> MeasureResult:
    """Compile, check and time ``lowered`` on the workload's inputs for ``seed``.

    With ``repeats`` None, one timed run (after the checked run) first measures
    the kernel and the repeats are chosen by :func:`_auto_runs`; the result keeps
    that first measurement's error and compile time. A kernel slower than
    ``TIME_BUDGET_MS`` is reported from that one run.
    """
    inputs = wl.make_inputs(seed)
    if repeats is not None:
        warm = DEFAULT_WARMUP if warmup is None else warmup
        return measure(lowered.func, wl, inputs, plan=lowered.plan, warmup=warm, repeats=repeats, enough_s=None)
    probe = measure(lowered.func, wl, inputs, plan=lowered.plan, warmup=0, repeats=1)
    if not probe.ok or probe.median_ms is None:
        return probe
    warm, runs = _auto_runs(probe.median_ms, warmup)
    if (warm, runs) == (0, 1):
        return probe
    timed = measure(lowered.func, wl, inputs, plan=lowered.plan, warmup=warm, repeats=runs, check=False)
    if not timed.ok:
        return timed
    return replace(timed, max_abs_err=probe.max_abs_err, compile_s=probe.compile_s)


def _status_exit(result: MeasureResult) -> int:
    return EXIT_OK if result.ok else EXIT_WRONG


def _report_failure(wl: workloads.Workload, result: MeasureResult) -> None:
    if result.status == "error":
        print(
            f"autotune: {wl.name}: the kernel could not be built:\n{result.error.rstrip()}", file=sys.stderr
        )


def _print_check(wl: workloads.Workload, lowered: Lowered, result: MeasureResult, show_plan: bool) -> None:
    runs = f"{result.repeats} run{'s' * (result.repeats != 1)}"
    lines = [
        ("max abs error", _err(result.max_abs_err)),
        ("workspace peak", format_size(lowered.plan.total_peak)),
        ("latency", "-"),
        ("compile", "-" if result.compile_s is None else f"{result.compile_s:.2f} s"),
    ]
    if result.ok:
        lines[2] = (
            "latency",
            f"median {_ms(result.median_ms)} ms, min {_ms(result.min_ms)} ms, IQR {_ms(result.iqr_ms)} ms "
            f"({runs}, {_gflops(wl, result)} GFLOP/s)",
        )
    print(f"{_title(wl)}: {result.status}")
    for label, value in lines:
        print(f"  {label:<16}{value}")
    if show_plan:
        print(lowered.plan.summary())


def _check_one(args: argparse.Namespace) -> int:
    wl = load_workload_arg(args.workload, parse_params(args.param), (args.start, args.end))
    lowered = _lower(args, _func(args, wl))
    result = check_lowered(wl, lowered, args.seed, args.warmup, args.repeats)
    _print_check(wl, lowered, result, show_plan=args.pools is not None)
    _report_failure(wl, result)
    if args.draw is not None:
        print(f"memory plan picture: {draw(lowered.plan, args.draw)}")
    return _status_exit(result)


_ALL_HEADERS = (
    "workload", "status", "max err", "workspace", "median ms", "min ms", "IQR ms", "runs", "GFLOP/s", "compile s",
)  # fmt: skip


def _all_row(wl: workloads.Workload, lowered: Lowered, result: MeasureResult) -> list[str]:
    compile_s = "-" if result.compile_s is None else f"{result.compile_s:.2f}"
    return [
        wl.name, result.status, _err(result.max_abs_err), _short_size(lowered.plan.total_peak),
        _ms(result.median_ms), _ms(result.min_ms), _ms(result.iqr_ms),
        str(result.repeats) if result.ok else "-", _gflops(wl, result), compile_s,
    ]  # fmt: skip


def _check_all(args: argparse.Namespace) -> int:
    """Check every built-in workload at its default size; one table, a row printed as each finishes.

    A workload that cannot be lowered (pools too small: status ``infeasible``)
    is reported on stderr and the others are still checked; the exit status is then 2.
    """
    if args.param or args.trace is not None or args.draw is not None:
        raise ConfigError("check --all takes no --param, --trace or --draw (they belong to one workload)")
    _pools(args)  # bad flags give one error, not one per workload
    get_planner(args.planner)
    widths = [max(len(n) for n in workloads.names()), 10, 8, 10, 10, 9, 8, 4, 8, 9]
    right = [False, False, *[True] * 8]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(c.rjust(w) if r else c.ljust(w) for c, w, r in zip(cells, widths, right)).rstrip()

    print(line(_ALL_HEADERS), flush=True)
    status = EXIT_OK
    for name in workloads.names():
        wl = workloads.get(name)
        try:
            lowered = _lower(args, wl.func)
        except AutotuneError as exc:
            print(f"autotune: error: {name}: {exc}", file=sys.stderr)
            kind = "infeasible" if isinstance(exc, PoolOverflowError) else "error"
            print(line([name, kind, *["-"] * (len(widths) - 2)]), flush=True)
            status = EXIT_USAGE
            continue
        result = check_lowered(wl, lowered, args.seed, args.warmup, args.repeats)
        _report_failure(wl, result)
        print(line(_all_row(wl, lowered, result)), flush=True)
        status = max(status, _status_exit(result))
    return status


def cmd_check(args: argparse.Namespace) -> int:
    """``check WORKLOAD`` or ``check --all``."""
    if args.all == (args.workload is not None):
        raise ConfigError("check: give one WORKLOAD or --all")
    for flag in ("repeats", "warmup"):
        value = getattr(args, flag)
        if value is not None and value < (1 if flag == "repeats" else 0):
            raise ConfigError(
                f"--{flag}: expected an integer >= {1 if flag == 'repeats' else 0}, got {value}"
            )
    return _check_all(args) if args.all else _check_one(args)


def _add_workload_args(p: argparse.ArgumentParser, optional: bool = False) -> None:
    p.add_argument(
        "workload",
        nargs="?" if optional else None,
        metavar="WORKLOAD",
        help="a name from `autotune workloads`, FILE.py:FUNCTION returning a Chain or a Workload, "
        "or MODEL.onnx (with --from/--to)",
    )
    p.add_argument(
        "--from", dest="start", metavar="TENSOR", help="MODEL.onnx: the cut's input tensor or first node"
    )
    p.add_argument(
        "--to", dest="end", metavar="TENSOR", help="MODEL.onnx: the cut's output tensor or last node"
    )
    p.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a workload parameter (repeatable)",
    )
    p.add_argument(
        "--trace", metavar="FILE", help="replay this schedule trace (a trace, or best.json holding one)"
    )
    p.add_argument(
        "--pools",
        metavar="SPEC",
        help="memory pools, e.g. dtcm=64KiB,sram=2MiB (default: one unbounded workspace)",
    )
    p.add_argument("--planner", default="greedy_by_size", help="memory planner (default: %(default)s)")
    p.add_argument(
        "--seed", type=int, default=0, help="seed of the inputs and the planner (default: %(default)s)"
    )
