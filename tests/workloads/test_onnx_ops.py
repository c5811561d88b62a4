"""The operators added for ONNX models: their TE lowering (golden text) computes what their numpy
reference computes (sigmoid, hardswish, broadcast mul and map, NHWC resize with ONNX's modes,
dilated convolutions, a producer's bias fused into the read)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from workloads_interp import Interpreter

from autotune import ir, te
from autotune.workloads import ops
from autotune.workloads import reference as ref


class Interp(Interpreter):
    """The tests' interpreter, with the ``exp`` and ``ceil`` intrinsics (sigmoid, resize rounding)."""

    def expr(self, e: ir.Expr, env: Any) -> Any:
        if isinstance(e, ir.Call) and e.op in ("exp", "ceil"):
            value = float(self.expr(e.args[0], env))
            return np.float32(math.exp(value) if e.op == "exp" else math.ceil(value))
        return super().expr(e, env)


def interpret(func: ir.Func, *inputs: np.ndarray) -> np.ndarray:
    interp = Interp({buf: np.asarray(a, dtype=buf.dtype) for buf, a in zip(func.inputs, inputs)})
    interp.stmt(func.body, {})
    return interp.arrays[func.outputs[0]]


Case = tuple[list[te.Tensor], te.Tensor, Callable[..., np.ndarray]]


def ph(name: str, *shape: int) -> te.Tensor:
    return te.placeholder(shape, "float32", name=name)


def sigmoid() -> Case:
    x = ph("data", 2, 3)
    return [x], ops.sigmoid(x), ref.sigmoid


def hardswish() -> Case:
    x = ph("data", 2, 5)
    return [x], ops.hardswish(x), ref.hardswish


def mul_broadcast() -> Case:
    a, b = ph("a", 1, 3, 4, 2), ph("b", 1, 1, 1, 2)
    return [a, b], ops.mul(a, b), ref.mul


def broadcast_map_view() -> Case:
    """``a[N,H,W,C] + g[N,C]`` seen as ``[N,1,1,C]`` (a squeeze-excite scale held as a matrix)."""
    a, g = ph("a", 1, 2, 3, 4), ph("g", 1, 4)
    out = ops.broadcast_map(lambda x, s: x * ops.sigmoid_expr(s), a, (g, (1, 1, 1, 4)), name="scale")
    return [a, g], out, lambda x, s: ref.mul(x, ref.sigmoid(s)[:, None, None, :])


def conv2d_nhwc_dilated_bias() -> Case:
    x, w, b = ph("data", 1, 7, 6, 2), ph("w", 3, 3, 2, 3), ph("b", 2)
    out = ops.conv2d_nhwc(x, w, 1, 2, dilation=2, data_bias=b, data_act=ops.relu_expr)

    def reference(d: np.ndarray, k: np.ndarray, c: np.ndarray) -> np.ndarray:
        dilated = np.zeros((5, 5, 2, 3), np.float32)
        dilated[::2, ::2] = k
        return ref.conv2d_nhwc(ref.relu(d + c), dilated, 1, 2)

    return [x, w, b], out, reference


def depthwise_conv2d_nhwc_bias() -> Case:
    x, w, b = ph("data", 1, 5, 5, 3), ph("w", 3, 3, 3), ph("b", 3)
    out = ops.depthwise_conv2d_nhwc(x, w, 2, 1, data_bias=b)
    return [x, w, b], out, lambda d, k, c: ref.depthwise_conv2d_nhwc(d + c, k, 2, 1)


def resize2d_nhwc_nearest_floor() -> Case:
    x = ph("data", 1, 3, 4, 2)
    out = ops.resize2d_nhwc(x, (6, 8), coordinates="asymmetric", rounding="floor")
    return [x], out, lambda a: ref.resize2d_nhwc(a, (6, 8), "nearest", "asymmetric", "floor")


def resize2d_nhwc_nearest_half_pixel() -> Case:
    x = ph("data", 1, 5, 4, 1)
    out = ops.resize2d_nhwc(x, (3, 7))
    return [x], out, lambda a: ref.resize2d_nhwc(a, (3, 7))


def resize2d_nhwc_bilinear_align_corners() -> Case:
    x = ph("data", 1, 3, 4, 2)
    out = ops.resize2d_nhwc(x, (5, 6), "bilinear", coordinates="align_corners")
    return [x], out, lambda a: ref.resize2d_nhwc(a, (5, 6), "bilinear", "align_corners")


CASES: dict[str, Callable[[], Case]] = {
    f.__name__: f
    for f in (
        sigmoid,
        hardswish,
        mul_broadcast,
        broadcast_map_view,
        conv2d_nhwc_dilated_bias,
        depthwise_conv2d_nhwc_bias,
        resize2d_nhwc_nearest_floor,
        resize2d_nhwc_nearest_half_pixel,
        resize2d_nhwc_bilinear_align_corners,
    )
}


def build(name: str) -> tuple[ir.Func, Callable[..., np.ndarray], list[np.ndarray]]:
    inputs, out, reference = CASES[name]()
    func = te.create_func(inputs=inputs, outputs=[out], name=name)
    rng = np.random.default_rng(7)
    arrays = [(rng.uniform(-4, 4, t.shape)).astype(np.float32) for t in inputs]
    return func, reference, arrays


@pytest.mark.parametrize("name", sorted(CASES))
def test_lowering_matches_reference(name: str) -> None:
    func, reference, arrays = build(name)
    got = interpret(func, *arrays)
    want = reference(*arrays)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", sorted(CASES))
def test_lowering_golden(name: str, golden: Any) -> None:
    func, _, _ = build(name)
    golden(f"workloads/op_{name}", str(func))


def test_references_match_onnx_formulas() -> None:
    """The numpy references against the ONNX definitions written out (HardSwish, Resize positions)."""
    x = np.linspace(-5, 5, 41, dtype=np.float32)
    np.testing.assert_allclose(ref.hardswish(x), x * np.clip(x / 6 + 0.5, 0, 1), rtol=1e-6, atol=1e-7)
    data = np.arange(4, dtype=np.float32).reshape(1, 1, 4, 1)
    up = ref.resize2d_nhwc(data, (1, 8), "nearest", "half_pixel", "round_prefer_floor")
    assert up[0, 0, :, 0].tolist() == [0, 0, 1, 1, 2, 2, 3, 3]


def test_operator_argument_errors() -> None:
    a = ph("a", 1, 2, 3, 4)
    with pytest.raises(ValueError, match=r"mul: shapes \(1, 2, 3, 4\), \(3, 3\) do not broadcast"):
        ops.mul(a, ph("b", 3, 3))
    with pytest.raises(ValueError, match=r"scale: g \(1, 4\) cannot be seen with shape \(1, 1, 3\)"):
        ops.broadcast_map(lambda x, y: x * y, a, (ph("g", 1, 4), (1, 1, 3)), name="scale")
    with pytest.raises(ValueError, match=r"conv2d_nhwc: data_bias b must have shape \(4,\), got \(3,\)"):
        ops.conv2d_nhwc(a, ph("w", 1, 1, 4, 2), data_bias=ph("b", 3))
    with pytest.raises(ValueError, match=r"conv2d_nhwc: dilation must be at least 1, got \(0, 0\)"):
        ops.conv2d_nhwc(a, ph("w", 1, 1, 4, 2), dilation=0)
    with pytest.raises(ValueError, match="resize2d_nhwc: rounding must be one of"):
        ops.resize2d_nhwc(a, (4, 6), rounding="up")
