"""measure_in_subprocess: a segfault becomes 'crashed', a hang becomes 'timeout'."""

from __future__ import annotations

import numpy as np
import pytest
from measure_funcs import N, axpy, axpy_reference, never_ends, segfaults

from autotune.measure import measure_in_subprocess

pytestmark = pytest.mark.slow


def _inputs() -> list[np.ndarray]:
    return [np.arange(N, dtype=np.float32)]


def test_ok_in_subprocess() -> None:
    result = measure_in_subprocess(axpy(), axpy_reference, _inputs(), repeats=3, timeout=120)
    assert result.status == "ok", result.error
    assert result.max_abs_err == 0.0 and result.repeats == 3


def test_segfault_becomes_crashed() -> None:
    result = measure_in_subprocess(segfaults(), axpy_reference, _inputs(), timeout=120)
    assert result.status == "crashed"
    assert "SIGSEGV" in result.error or "exit code" in result.error


def test_hang_becomes_timeout() -> None:
    result = measure_in_subprocess(never_ends(), axpy_reference, _inputs(), check=False, timeout=5)
    assert result.status == "timeout" and "5 s" in result.error
