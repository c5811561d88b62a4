"""Every operator: its TE lowering (golden text) computes what its numpy reference computes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from workloads_interp import run

from autotune import ir, te
from autotune.workloads import ops
from autotune.workloads import reference as ref

Case = tuple[list[te.Tensor], te.Tensor, Callable[..., np.ndarray], float]


def ph(name: str, *shape: int) -> te.Tensor:
    return te.placeholder(shape, "float32", name=name)


def conv2d_nhwc() -> Case:
    # H: 3 outputs at stride 2 read rows -1..5 of 6 (only the top is padding); W reads -1..5 of 5.
    x, w = ph("data", 1, 6, 5, 2), ph("w", 3, 3, 2, 3)
    return [x, w], ops.conv2d_nhwc(x, w, 2, 1), lambda a, b: ref.conv2d_nhwc(a, b, 2, 1), 1.0


def conv2d_nhwc_pointwise_relu6() -> Case:
    x, w = ph("data", 1, 3, 4, 5), ph("w", 1, 1, 5, 2)
    out = ops.conv2d_nhwc(x, w, data_act=ops.relu6_expr)
    return [x, w], out, lambda a, b: ref.conv2d_nhwc(ref.relu6(a), b), 8.0


def conv2d_nchw() -> Case:
    x, w = ph("data", 1, 2, 5, 4), ph("w", 3, 2, 3, 3)
    return [x, w], ops.conv2d_nchw(x, w, 1, 1), lambda a, b: ref.conv2d_nchw(a, b, 1, 1), 1.0


def depthwise_conv2d_nhwc_relu() -> Case:
    x, w = ph("data", 1, 5, 4, 3), ph("w", 3, 3, 3)
    out = ops.depthwise_conv2d_nhwc(x, w, 1, 1, data_act=ops.relu_expr)
    return [x, w], out, lambda a, b: ref.depthwise_conv2d_nhwc(ref.relu(a), b, 1, 1), 1.0


def max_pool2d() -> Case:
    x = ph("data", 1, 5, 6, 2)
    return [x], ops.max_pool2d(x, 3, 2, 1), lambda a: ref.max_pool2d(a, 3, 2, 1), 1.0


def max_pool2d_unpadded() -> Case:
    x = ph("data", 1, 5, 4, 2)
    return [x], ops.max_pool2d(x, (3, 2)), lambda a: ref.max_pool2d(a, (3, 2)), 1.0


def avg_pool2d() -> Case:
    x = ph("data", 1, 5, 5, 2)
    return [x], ops.avg_pool2d(x, 2, 1, 1), lambda a: ref.avg_pool2d(a, 2, 1, 1), 1.0


def global_avg_pool_nhwc() -> Case:
    x = ph("data", 2, 3, 4, 2)
    return [x], ops.global_avg_pool_nhwc(x), ref.global_avg_pool_nhwc, 1.0


def resize2d_nchw_nearest() -> Case:
    x = ph("data", 1, 2, 8, 6)
    return [x], ops.resize2d_nchw(x, (4, 3)), lambda a: ref.resize2d_nchw(a, (4, 3)), 1.0


def resize2d_nchw_nearest_up() -> Case:
    x = ph("data", 1, 1, 3, 5)
    return [x], ops.resize2d_nchw(x, (5, 7)), lambda a: ref.resize2d_nchw(a, (5, 7)), 1.0


def resize2d_nchw_bilinear() -> Case:
    x = ph("data", 1, 2, 5, 4)
    out = ops.resize2d_nchw(x, (3, 7), "bilinear")
    return [x], out, lambda a: ref.resize2d_nchw(a, (3, 7), "bilinear"), 1.0


def matmul() -> Case:
    a, b = ph("A", 3, 4), ph("B", 4, 5)
    return [a, b], ops.matmul(a, b), ref.matmul, 1.0


def dense_bias() -> Case:
    x, w, b = ph("data", 2, 6), ph("w", 4, 6), ph("b", 4)
    return [x, w, b], ops.dense(x, w, b), ref.dense, 1.0


def relu() -> Case:
    x = ph("data", 2, 3)
    return [x], ops.relu(x), ref.relu, 1.0


def relu6() -> Case:
    x = ph("data", 2, 3, 2)
    return [x], ops.relu6(x), ref.relu6, 10.0


def add() -> Case:
    a, b = ph("a", 2, 3), ph("b", 2, 3)
    return [a, b], ops.add(a, b), ref.add, 1.0


CASES: dict[str, Callable[[], Case]] = {
    f.__name__: f
    for f in (
        conv2d_nhwc,
        conv2d_nhwc_pointwise_relu6,
        conv2d_nchw,
        depthwise_conv2d_nhwc_relu,
        max_pool2d,
        max_pool2d_unpadded,
        avg_pool2d,
        global_avg_pool_nhwc,
        resize2d_nchw_nearest,
        resize2d_nchw_nearest_up,
        resize2d_nchw_bilinear,
        matmul,
        dense_bias,
        relu,
        relu6,
        add,
    )
}


def build(name: str) -> tuple[ir.Func, Callable[..., np.ndarray], list[np.ndarray]]:
    inputs, out, reference, scale = CASES[name]()
    func = te.create_func(inputs=inputs, outputs=[out], name=name)
    rng = np.random.default_rng(7)
    arrays = [(rng.uniform(-1, 1, t.shape) * scale).astype(np.float32) for t in inputs]
    return func, reference, arrays


@pytest.mark.parametrize("name", sorted(CASES))
def test_lowering_matches_reference(name: str) -> None:
    func, reference, arrays = build(name)
    (got,) = run(func, *arrays)
    want = reference(*arrays)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", sorted(CASES))
def test_lowering_golden(name: str, golden: Any) -> None:
    func, _, _ = build(name)
    golden(f"workloads/op_{name}", str(func))


def block(func: ir.Func, name: str) -> ir.Block:
    return next(b for b in ir.collect(func.body, ir.Block) if b.name == name)


def test_padding_guards_only_the_sides_a_window_crosses() -> None:
    func, _, _ = build("conv2d_nhwc")
    text = str(block(func, "conv").body)
    assert (
        "T.Select(v_y * 2 + v_rh - 1 >= 0 and v_x * 2 + v_rw - 1 >= 0 and v_x * 2 + v_rw - 1 < 5, data["
        in text
    )
    assert "v_y * 2 + v_rh - 1 < 6" not in text


def test_unpadded_windows_read_unguarded() -> None:
    func, _, _ = build("max_pool2d_unpadded")
    assert "T.Select" not in str(func)


def test_pointwise_conv_reduces_over_channels_only() -> None:
    func, _, _ = build("conv2d_nhwc_pointwise_relu6")
    b = block(func, "conv")
    assert [iv.var.name for iv in b.iter_vars if iv.kind == "reduce"] == ["v_rc"]
    assert "w[0, 0, v_rc, v_o]" in str(b.body)


def test_dense_bias_is_a_second_stage() -> None:
    func, _, _ = build("dense_bias")
    assert sorted(b.name for b in ir.collect(func.body, ir.Block)) == ["dense", "dense_bias", "root"]


def err(fn: Callable[[], object]) -> str:
    with pytest.raises(ValueError) as info:
        fn()
    return str(info.value)


def test_operator_argument_errors() -> None:
    x4, x3 = ph("data", 1, 4, 4, 3), ph("x3", 4, 4, 3)
    assert (
        err(lambda: ops.conv2d_nhwc(x4, ph("w", 3, 3, 2, 1)))
        == "conv2d_nhwc: data has 3 channels, weight w expects 2"
    )
    assert (
        err(lambda: ops.conv2d_nchw(x4, ph("w", 1, 3, 3, 3)))
        == "conv2d_nchw: data has 4 channels, weight w expects 3"
    )
    assert (
        err(lambda: ops.conv2d_nhwc(x3, ph("w", 3, 3, 3, 1)))
        == "conv2d_nhwc: x3 must be NHWC, got shape (4, 4, 3)"
    )
    assert err(lambda: ops.depthwise_conv2d_nhwc(x4, ph("w", 3, 3, 4))) == (
        "depthwise_conv2d_nhwc: data has 3 channels, weight w has 4"
    )
    assert err(lambda: ops.depthwise_conv2d_nhwc(x4, ph("w", 1, 1, 3))).startswith(
        "depthwise_conv2d_nhwc: a 1x1"
    )
    assert (
        err(lambda: ops.max_pool2d(x4, 5))
        == "max_pool2d: a 5-wide window does not fit an input of 4 padded by 0"
    )
    assert err(lambda: ops.max_pool2d(x4, 1)) == "max_pool2d: a 1x1 window is the identity, not a pool"
    assert err(lambda: ops.avg_pool2d(x4, 2, 0)) == "avg_pool2d: stride must be at least 1, got 0"
    assert (
        err(lambda: ops.avg_pool2d(x4, 2, 1, -1)) == "avg_pool2d: padding must be non-negative ints, got -1"
    )
    assert (
        err(lambda: ops.avg_pool2d(x4, (2, 2, 2)))
        == "avg_pool2d: kernel must be an int or a pair of ints, got (2, 2, 2)"
    )
    assert err(lambda: ops.resize2d_nchw(x4, 2, "cubic")) == (
        "resize2d_nchw: method must be one of nearest, bilinear, got 'cubic'"
    )
    assert err(lambda: ops.matmul(ph("a", 2, 3), ph("b", 2, 3))) == "matmul: a has 3 columns, b has 2 rows"
    assert err(lambda: ops.dense(ph("d", 2, 3), ph("w", 4, 3), ph("bias", 3))) == (
        "dense: bias bias must have shape (4,), got (3,)"
    )
    assert err(lambda: ops.add(ph("a", 2, 3), ph("b", 3, 2))) == "add: shapes differ, a (2, 3) and b (3, 2)"


def test_an_integer_window_pads_with_an_integer_zero():
    """The padding of an int8 convolution is the int8 0, not a float32 0.0 that would send the
    window through float32."""
    data = te.placeholder((1, 4, 4, 2), "int8", name="data")
    weight = te.placeholder((3, 3, 2, 2), "int8", name="weight")
    conv = ops.conv2d_nhwc(data, weight, padding=1, name="conv")
    func = te.create_func([data, weight], [conv], name="conv_int8")
    (select,) = ir.collect(func.body, ir.Select)
    assert select.false_value == ir.IntImm(0, "int8") and select.dtype == "int8"
