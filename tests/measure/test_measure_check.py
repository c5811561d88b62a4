"""tolerance and compare: dtype tolerances scaled by the reference, NaN never passes."""

from __future__ import annotations

import math

import numpy as np

from autotune.measure import compare, tolerance


def test_tolerances_per_dtype() -> None:
    assert tolerance("float32") == (1e-4, 1e-4)
    rtol64, atol64 = tolerance(np.float64)
    assert rtol64 < 1e-4 and atol64 < 1e-4
    assert tolerance("int32") == (0.0, 0.0) and tolerance("uint8") == (0.0, 0.0)


def test_equal_and_close_outputs_pass() -> None:
    ref = np.linspace(-1, 1, 50, dtype=np.float32)
    assert compare([ref.copy()], [ref]) == (True, 0.0)
    ok, err = compare([ref + np.float32(5e-5)], [ref])
    assert ok and 0 < err < 1e-4


def test_outputs_beyond_tolerance_fail() -> None:
    ref = np.zeros(10, np.float32)
    out = ref.copy()
    out[3] = 1e-3
    ok, err = compare([out], [ref])
    assert not ok and math.isclose(err, 1e-3, rel_tol=1e-3)


def test_atol_scales_with_the_reference_magnitude() -> None:
    ref = np.array([1000.0, 0.0], np.float32)
    out = np.array([1000.0, 0.05], np.float32)  # 0.05 <= 1e-4 * 1000
    assert compare([out], [ref])[0]
    out[1] = 0.2
    assert not compare([out], [ref])[0]


def test_nan_never_passes() -> None:
    ref = np.ones(4, np.float32)
    out = ref.copy()
    out[2] = np.nan
    ok, err = compare([out], [ref])
    assert not ok and math.isnan(err)
    ok, err = compare([ref], [out])
    assert not ok and math.isnan(err)
    both = np.full(4, np.nan, np.float32)
    assert not compare([both], [both.copy()])[0]


def test_matching_infinities_pass() -> None:
    ref = np.array([-np.inf, 1.0, np.inf], np.float32)
    assert compare([ref.copy()], [ref]) == (True, 0.0)
    out = ref.copy()
    out[0] = np.inf
    assert not compare([out], [ref])[0]


def test_integers_compare_exactly() -> None:
    ref = np.arange(5, dtype=np.int32)
    assert compare([ref.copy()], [ref]) == (True, 0.0)
    out = ref.copy()
    out[1] += 1
    assert compare([out], [ref]) == (False, 1.0)


def test_shape_and_count_mismatches_fail() -> None:
    ref = np.zeros((2, 3), np.float32)
    assert compare([np.zeros((3, 2), np.float32)], [ref]) == (False, math.inf)
    assert compare([ref], [ref, ref]) == (False, math.inf)
    ok, err = compare([ref, ref + 1], [ref, ref])
    assert not ok and err == 1.0
