"""measure: ok kernels are checked and timed, wrong ones are caught and not timed, build errors reported."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest
from measure_funcs import N, axpy, axpy_reference, does_not_compile

from autotune.measure import empty_outputs, measure, reference_outputs
from autotune.memory import Allocation, Pool, plan_memory

pytestmark = pytest.mark.slow


def _inputs() -> list[np.ndarray]:
    return [np.random.default_rng(0).standard_normal(N).astype(np.float32)]


def test_ok_kernel_is_checked_and_timed() -> None:
    result = measure(axpy(), axpy_reference, _inputs(), warmup=1, repeats=5)
    assert result.status == "ok", result.error
    assert result.max_abs_err == 0.0 and result.repeats == 5
    assert 0 < result.min_ms <= result.median_ms and result.iqr_ms >= 0
    assert result.compile_s is not None and result.workspace_bytes == N * 4


def test_skipped_element_is_caught_through_nan_outputs() -> None:
    result = measure(axpy(skip_last=True), axpy_reference, _inputs())
    assert result.status == "wrong" and math.isnan(result.max_abs_err)
    assert result.median_ms is None and result.repeats == 0


def test_wrong_values_are_reported_with_their_error() -> None:
    result = measure(axpy(offset=1.5), axpy_reference, _inputs())
    assert result.status == "wrong" and result.max_abs_err == pytest.approx(0.5)


def test_unchecked_measurement() -> None:
    result = measure(axpy(offset=1.5), axpy_reference, _inputs(), repeats=2, check=False)
    assert result.status == "ok" and result.max_abs_err is None


def test_build_error_becomes_an_error_result() -> None:
    result = measure(does_not_compile(), axpy_reference, _inputs())
    assert result.status == "error"
    assert "numba failed to compile" in result.error and "Traceback" in result.error


def test_planned_workspace() -> None:
    plan = plan_memory([Allocation("T", N * 4, 0, 1)], [Pool("sram", 4096)])
    result = measure(axpy(), axpy_reference, _inputs(), plan=plan, repeats=2)
    assert result.status == "ok" and result.workspace_bytes == plan.total_peak


def test_reference_forms() -> None:
    x = _inputs()
    expected = axpy_reference(*x)
    workload = SimpleNamespace(reference=axpy_reference)
    for form in (axpy_reference, workload, expected, list(expected), lambda a: expected[0]):
        (got,) = reference_outputs(form, x)
        np.testing.assert_array_equal(got, expected[0])


def test_empty_outputs_are_nan() -> None:
    (out,) = empty_outputs(axpy())
    assert out.shape == (N,) and out.dtype == np.float32 and np.isnan(out).all()


def test_workload_through_the_whole_pipeline() -> None:
    from autotune import workloads
    from autotune.lowering import lower

    work = workloads.get("pool_chain", height=12, width=12, channels=4)
    lowered = lower(work.func)
    result = measure(lowered.func, work, work.make_inputs(seed=0), plan=lowered.plan, repeats=3)
    assert result.status == "ok", result.error
    assert result.max_abs_err == 0.0 and result.workspace_bytes == lowered.plan.total_peak
