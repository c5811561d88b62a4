"""Measure one lowered function: build, run once, check against numpy, time.

>>> result = measure(lowered, workload, workload.make_inputs(seed=0), plan=plan)
>>> result.status, result.median_ms
('ok', 0.41)
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Union

import numpy as np

from .. import ir
from ..codegen import Kernel, build
from ..errors import CodegenError
from ..memory import MemoryPlan
from ..workloads.arrays import aligned_full
from .check import compare
from .result import MeasureResult
from .timing import (
    CHECK_RUN_OVER,
    ENOUGH_S,
    MIN_SAMPLE_S,
    check_optional_positive,
    cpu_lock,
    over_at_once,
    time_candidate,
    timing_section,
)

__all__ = ["Reference", "empty_outputs", "measure", "reference_outputs"]

Reference = Union[Callable[..., Any], Sequence[np.ndarray], Any]  # noqa: UP007 (runtime alias on 3.10)
"""A workload (an object with ``.reference(*inputs)``), a callable ``reference(*inputs)``
returning the outputs (a tuple or one array), or the reference outputs themselves."""


def reference_outputs(
    workload_or_reference: Reference, inputs: Sequence[np.ndarray]
) -> tuple[np.ndarray, ...]:
    """The expected outputs for ``inputs`` as a tuple of arrays."""
    ref = getattr(workload_or_reference, "reference", workload_or_reference)
    out = ref(*inputs) if callable(ref) else ref
    if isinstance(out, np.ndarray):
        out = (out,)
    return tuple(np.asarray(o) for o in out)


def empty_outputs(func: ir.Func) -> tuple[np.ndarray, ...]:
    """Output arrays of ``func`` filled with NaN (integers: their minimum), so skipped elements show;
    each with a 64-byte aligned base, like the inputs and pools."""
    outs = []
    for buf in func.outputs:
        dtype = np.dtype(buf.dtype)
        fill = (
            np.nan if np.issubdtype(dtype, np.floating) else np.iinfo(dtype).min if dtype.kind in "iu" else 0
        )
        outs.append(aligned_full(buf.const_shape(), fill, dtype))
    return tuple(outs)


def _error(exc: BaseException, **fields: Any) -> MeasureResult:
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return MeasureResult.failure("error", f"{exc}\n\n{text}", **fields)


def measure(
    func_lowered: ir.Func,
    workload_or_reference: Reference,
    inputs: Sequence[np.ndarray],
    plan: MemoryPlan | None = None,
    warmup: int = 2,
    repeats: int = 10,
    check: bool = True,
    cache_dir: str | None = None,
    lock_timing: bool = True,
    cutoff_ms: float | None = None,
    retime_noise: float | None = None,
    time_budget_s: float | None = None,
    enough_s: float | None = ENOUGH_S,
    min_sample_s: float | None = MIN_SAMPLE_S,
) -> MeasureResult:
    """Build ``func_lowered``, run it once on ``inputs``, compare with the reference, time it.

    A build or compile failure (:class:`CodegenError`) gives status ``error``
    with the reason; outputs that differ from the reference give ``wrong`` (not
    timed); otherwise ``ok`` with the median, min and IQR of ``repeats`` runs
    after ``warmup``. With ``check=False`` the reference is not consulted.
    With ``cutoff_ms``, a kernel whose first timed runs are slower than it is timed no further and
    gets status ``cutoff`` (it has been checked all the same); one whose checking run alone shows
    it over (:func:`~autotune.measure.timing.over_at_once`) gets it with that run as its one
    timing, and is neither warmed up nor timed. With ``retime_noise``, an ``ok``
    timing whose :func:`~autotune.measure.timing.noise` exceeds it, or whose threads waited for
    a CPU more than :data:`~autotune.measure.timing.CONTENDED` of the time, is timed again at
    once, under the same locks (:func:`~autotune.measure.timing.time_candidate`), and the result,
    marked ``retimed``, has the figures of the better of the two timings; every timed result
    carries its ``contended`` share; with ``time_budget_s``
    (the seconds the warm-up and timed runs may take) only when both timings fit in it.
    Timed runs that add up to ``enough_s`` end the warm-up and the timing early
    (:data:`~autotune.measure.timing.ENOUGH_S`; None: exactly ``warmup`` and ``repeats``), and a
    kernel quicker than ``min_sample_s`` is timed in batches of calls that last about that long
    (:data:`~autotune.measure.timing.MIN_SAMPLE_S`; None: one call per timed run).
    ``lock_timing`` takes the machine's locks (:mod:`autotune.measure.timing`):
    the cpu lock shared while building, compiling, running once and checking;
    then, for the warm-up and timed runs only, the timing lock and, when the
    kernel has a parallel loop, the cpu lock exclusive. ``lock_timing=False``
    takes neither lock. Crashes and timeouts need a separate process: see
    :func:`measure_in_subprocess`.
    """
    check_optional_positive("measure", "cutoff_ms", cutoff_ms)
    check_optional_positive("measure", "retime_noise", retime_noise)
    with cpu_lock("shared", lock_timing):
        prepared = _prepare(func_lowered, workload_or_reference, inputs, plan, check, cache_dir)
    if isinstance(prepared, MeasureResult):
        return prepared
    if over_at_once(prepared.first_ms, cutoff_ms, enough_s):
        reason = (
            f"its checking run took {prepared.first_ms:.4g} ms, over {CHECK_RUN_OVER:g} times the cutoff "
            f"{cutoff_ms:g} ms; not timed"
        )
        once = (prepared.max_abs_err, prepared.first_ms, prepared.first_ms, 0.0, 1)
        return MeasureResult("cutoff", *once, error=reason, **prepared.fields)
    run = _runner(prepared.kernel, prepared.args)
    threads = _threads() if prepared.kernel.parallel else 1
    with timing_section(prepared.kernel.parallel, lock_timing):
        timing = time_candidate(
            run, warmup, repeats, cutoff_ms, retime_noise, time_budget_s, threads, enough_s, min_sample_s
        )
    figures = (prepared.max_abs_err, timing.median_ms, timing.min_ms, timing.iqr_ms, timing.runs)
    if timing.stopped:
        runs = f"{timing.runs} timed runs" if timing.runs > 1 else "timed run"
        reason = f"fastest of the first {runs} {timing.min_ms:.4g} ms over the cutoff {cutoff_ms:g} ms; timed no further"
        return MeasureResult("cutoff", *figures, error=reason, contended=timing.contended, **prepared.fields)
    return MeasureResult(
        "ok", *figures, retimed=timing.retimed, contended=timing.contended, **prepared.fields
    )


def _threads() -> int:
    """The threads a kernel's parallel loop runs on (numba's thread count)."""
    import numba

    return int(numba.get_num_threads())


@dataclass(frozen=True)
class _Prepared:
    """A built, compiled and checked kernel, ready to time, and how long its checking run took."""

    kernel: Kernel
    args: tuple[np.ndarray, ...]
    max_abs_err: float | None
    fields: dict[str, Any]
    first_ms: float


def _prepare(
    func_lowered: ir.Func,
    workload_or_reference: Reference,
    inputs: Sequence[np.ndarray],
    plan: MemoryPlan | None,
    check: bool,
    cache_dir: str | None,
) -> _Prepared | MeasureResult:
    """Everything before timing: build, compile, run once and check.

    Returns the ``error`` or ``wrong`` result, or what timing needs.
    """
    try:
        kernel = build(func_lowered, plan, cache_dir)
    except CodegenError as exc:
        return _error(exc)
    outputs = empty_outputs(func_lowered)
    args = (*inputs, *outputs)
    try:
        compile_s = kernel.compile(*args)
    except CodegenError as exc:
        return _error(exc, workspace_bytes=kernel.workspace_bytes)
    fields: dict[str, Any] = {"compile_s": compile_s, "workspace_bytes": kernel.workspace_bytes}
    start = time.perf_counter_ns()
    kernel(*args)
    first_ms = (time.perf_counter_ns() - start) / 1e6
    err: float | None = None
    if check:
        ok, err = compare(outputs, reference_outputs(workload_or_reference, inputs))
        if not ok:
            return MeasureResult("wrong", max_abs_err=err, **fields)
    return _Prepared(kernel, args, err, fields, first_ms)


def _runner(kernel: Kernel, args: tuple[np.ndarray, ...]) -> Callable[[], None]:
    """The kernel with its arguments bound and checked once (no per-call checks while timing)."""
    kernel.check_args(args)
    dispatcher, full = kernel.dispatcher, (*args, *kernel.storage)

    def run() -> None:
        dispatcher(*full)

    return run
