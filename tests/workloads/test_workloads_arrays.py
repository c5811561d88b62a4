"""Aligned host arrays: every array autotune hands a kernel starts on a 64-byte boundary."""

from __future__ import annotations

import numpy as np
import pytest

from autotune import workloads
from autotune.measure import empty_outputs
from autotune.workloads.arrays import ALIGNMENT, aligned_array, aligned_empty, aligned_full


def _addr(a: np.ndarray) -> int:
    return int(a.ctypes.data)


def test_aligned_empty() -> None:
    for n in (1, 63, 64, 1000, 3 << 20):
        a = aligned_empty(n)
        assert a.dtype == np.uint8 and a.size == n and _addr(a) % ALIGNMENT == 0
        assert (a == 0xFF).all()  # NaN bytes: reading unwritten storage shows up as NaN


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32"])
def test_aligned_full(dtype: str) -> None:
    a = aligned_full((3, 5, 7), 2, dtype)
    assert a.shape == (3, 5, 7) and a.dtype == np.dtype(dtype) and a.flags.c_contiguous
    assert _addr(a) % ALIGNMENT == 0 and (a == 2).all()


def test_aligned_array_copies_values() -> None:
    src = np.arange(1000, dtype=np.float32).reshape(10, 100)[:, 1:]  # a strided view
    a = aligned_array(src)
    assert _addr(a) % ALIGNMENT == 0 and a.flags.c_contiguous and a.dtype == src.dtype
    np.testing.assert_array_equal(a, src)
    a[0, 0] = -1
    assert src[0, 0] == 1  # a copy, not a view


def test_workload_inputs_and_outputs_are_aligned() -> None:
    # numpy's own allocation of these sizes sits 16 bytes past a 64-byte boundary
    wl = workloads.get("pool_chain", height=20, width=20, channels=8)
    inputs = wl.make_inputs(0)
    outputs = empty_outputs(wl.func)
    assert all(_addr(a) % ALIGNMENT == 0 for a in (*inputs, *outputs))
    again = wl.make_inputs(0)
    np.testing.assert_array_equal(inputs[0], again[0])  # still seeded
    assert all(np.isnan(o).all() for o in outputs)
