"""Every dtype the IR accepts through the code generator: reduction identities and integer literals."""

from __future__ import annotations

import numpy as np
import pytest

from autotune import ir, te
from autotune.codegen import build, generate_source
from autotune.errors import CodegenError
from autotune.lowering import lower
from autotune.schedule.recipes import cascade
from autotune.workloads import ops

COMPILED = sorted(set(ir.buffer.DTYPE_BYTES) - {"float16"})
"""The dtypes numba computes with (numba has no float16 on the CPU)."""


def _reductions(dtype: str) -> ir.Func:
    """max, min and sum over the rows of A[4, 5]: three outputs of ``dtype``."""
    a = te.placeholder((4, 5), dtype, name="A")

    def rows(reducer):  # type: ignore[no-untyped-def]
        k = te.reduce_axis((0, 5), "k")
        return te.compute((4,), lambda i: reducer(a[i, k], axis=k), name=reducer.__name__)

    return te.create_func([a], [rows(te.max), rows(te.min), rows(te.sum)])


def _extremes(dtype: str) -> np.ndarray:
    """Rows whose max, min or sum is the dtype's lowest or highest value, or needs a negative identity."""
    if dtype == "bool":
        return np.array([[0] * 5, [1] * 5, [0, 1, 0, 1, 0], [1, 0, 0, 0, 0]], dtype=bool)
    if ir.is_float(dtype):
        return np.array([[-5, -6, -7, -8, -9], [1, 2, 3, 4, 5], [-1, 2, -3, 4, -5], [0.5, 0, 0, 0, 0]], dtype=dtype)
    lo, hi = te.int_limits(dtype)
    return np.array([[lo] * 5, [hi] * 5, [lo, hi, 0, 1, 0], [lo + 1, lo + 2, lo + 1, lo + 3, lo + 1]], dtype=dtype)


@pytest.mark.parametrize("dtype", sorted(ir.buffer.DTYPE_BYTES))
def test_identities_are_the_dtypes_own_limits(dtype: str) -> None:
    lo, hi = (-np.inf, np.inf) if ir.is_float(dtype) else te.int_limits(dtype)
    assert (te.min_value(dtype).value, te.max_value(dtype).value) == (lo, hi)
    assert te.min_value(dtype).dtype == te.max_value(dtype).dtype == dtype
    if not ir.is_float(dtype):
        info = (0, 1) if dtype == "bool" else (np.iinfo(dtype).min, np.iinfo(dtype).max)
        assert (lo, hi) == info


def test_int8_max_identity_is_written_as_int8_min() -> None:
    text = generate_source(lower(_reductions("int8")).func).text
    assert "np.int8(-128)" in text and "np.int8(127)" in text
    assert "2147483" not in text


@pytest.mark.slow
@pytest.mark.parametrize("dtype", COMPILED)
def test_reductions_of_every_dtype_equal_numpy(dtype: str) -> None:
    func = _reductions(dtype)
    lowered = lower(func, verify=True)
    kernel = build(lowered.func, lowered.plan)
    a = _extremes(dtype)
    got = [np.zeros(4, dtype) for _ in range(3)]
    kernel(a, *got)
    # numpy's sum in the dtype wraps as the kernel's does (a bool sum is a logical or)
    want = [a.max(axis=1), a.min(axis=1), a.sum(axis=1, dtype=dtype)]
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


@pytest.mark.slow
@pytest.mark.parametrize("padding", [0, 1])
def test_int8_max_pool_of_negative_windows(padding: int) -> None:
    # the max identity was T.int8(-2147483648), which numba wraps to 0: every all-negative window gave 0
    data = te.placeholder((1, 6, 5, 2), "int8", name="data")
    pool = ops.max_pool2d(data, 3, padding=padding, name="pool")
    func = te.create_func([data], [pool])
    lowered = lower(func, verify=True)
    x = np.random.default_rng(0).integers(-128, 0, size=(1, 6, 5, 2), dtype=np.int8)
    out = np.zeros(pool.shape, np.int8)
    build(lowered.func, lowered.plan)(x, out)
    padded = np.pad(x, ((0, 0), (padding, padding), (padding, padding), (0, 0)), constant_values=-128)
    win = np.lib.stride_tricks.sliding_window_view(padded, (3, 3), axis=(1, 2))
    np.testing.assert_array_equal(out, win.max(axis=(-2, -1)))
    assert (out < 0).all()


@pytest.mark.slow
def test_int8_pool_cascade_with_rolling_buffer() -> None:
    # the seed RFC's example: two 3x3 max pools over int8 rows, the first kept in a rolling window
    data = te.placeholder((1, 9, 5, 2), "int8", name="data")
    p1 = ops.max_pool2d(data, 3, name="pool1")
    p2 = ops.max_pool2d(p1, 3, name="pool2")
    sch = cascade(te.create_func([data], [p2]), "pool2", ["pool1"], tile=2, rolling=["pool1"])
    lowered = lower(sch.func, verify=True)
    x = np.random.default_rng(1).integers(-128, 0, size=(1, 9, 5, 2), dtype=np.int8)
    out = np.zeros(p2.shape, np.int8)
    build(lowered.func, lowered.plan)(x, out)
    win = np.lib.stride_tricks.sliding_window_view(x, (5, 5), axis=(1, 2))
    np.testing.assert_array_equal(out, win.max(axis=(-2, -1)))


def test_float16_is_refused_before_numba() -> None:
    with pytest.raises(CodegenError, match="is float16, which numba cannot"):
        generate_source(lower(_reductions("float16")).func)


@pytest.mark.parametrize(("value", "dtype"), [(-(2**31), "int8"), (256, "uint8"), (-1, "uint8"), (2, "bool")])
def test_a_constant_outside_its_dtype_is_refused(value: int, dtype: str) -> None:
    out = ir.decl_buffer("out", (1,), dtype)
    func = ir.Func("f", (out,), ir.BufferStore(out, ir.IntImm(value, dtype), (ir.const(0),)), num_outputs=1)
    with pytest.raises(CodegenError, match=rf"constant {value} is outside the range of {dtype}"):
        generate_source(func)


def test_integer_constants_of_te_stay_integers() -> None:
    assert te.const(0.0, "int64") == ir.IntImm(0, "int64")
    assert te.const(6.0, "int8") == ir.IntImm(6, "int8")
    with pytest.raises(ValueError, match=r"^te.const: 0.5 is not a value of int8$"):
        te.const(0.5, "int8")


@pytest.mark.slow
@pytest.mark.parametrize("dtype", [d for d in COMPILED if d != "bool"])
def test_activations_of_every_dtype_equal_numpy(dtype: str) -> None:
    # relu compared int64 values with the float constant 0.0: int64's largest value came back as its smallest
    x = te.placeholder((2, 5), dtype, name="X")
    func = te.create_func([x], [ops.relu(x, name="r"), ops.relu6(x, name="r6")])
    lowered = lower(func, verify=True)
    a = _extremes(dtype)[:2, :5]
    got = [np.zeros((2, 5), dtype) for _ in range(2)]
    build(lowered.func, lowered.plan)(a, *got)
    np.testing.assert_array_equal(got[0], np.maximum(a, 0).astype(dtype))
    np.testing.assert_array_equal(got[1], np.clip(a, 0, 6).astype(dtype))
