"""Pooling over NHWC data: max and average windows, and the global average.

A reduction is the whole body of a stage, so averages multiply each element by
``1 / area`` (rounded to float32) inside the sum instead of dividing the sum afterwards.
"""

from __future__ import annotations

from ... import ir, te
from ._common import Activation, IntPair, Window, check_bias, check_ndim, f32, guarded, read


def _pool(
    op: str, data: te.Tensor, kernel: IntPair, stride: IntPair, padding: IntPair
) -> tuple[Window, tuple[int, int, int, int]]:
    check_ndim(op, data, 4, "NHWC")
    batch, height, width, channels = data.shape
    win = Window(op, (height, width), kernel, stride, padding)
    if not win.axes:
        raise ValueError(f"{op}: a 1x1 window is the identity, not a pool")
    return win, (batch, *win.out, channels)


def max_pool2d(
    data: te.Tensor,
    kernel: IntPair,
    stride: IntPair = 1,
    padding: IntPair = 0,
    *,
    name: str = "pool",
    data_act: Activation | None = None,
    data_bias: te.Tensor | None = None,
) -> te.Tensor:
    """data[N,H,W,C] -> out[N,OH,OW,C], ``out[n,y,x,c] = max_{rh,rw} data[n, y*sh+rh-ph, x*sw+rw-pw, c]``.

    Padded positions read as -inf, so they never win.
    """
    win, shape = _pool("max_pool2d", data, kernel, stride, padding)
    check_bias("max_pool2d", data, data_bias)

    def body(n: ir.Expr, y: ir.Expr, x: ir.Expr, c: ir.Expr) -> ir.Expr:
        iy, ix, checks = win.at(y, x)
        value = guarded(checks, read(data, (n, iy, ix, c), data_bias, data_act), te.min_value(data.dtype))
        return te.max(value, axis=win.axes)

    return te.compute(shape, body, name=name)


def avg_pool2d(
    data: te.Tensor,
    kernel: IntPair,
    stride: IntPair = 1,
    padding: IntPair = 0,
    *,
    name: str = "pool",
    data_act: Activation | None = None,
    data_bias: te.Tensor | None = None,
) -> te.Tensor:
    """data[N,H,W,C] -> out[N,OH,OW,C], ``out[n,y,x,c] = sum_{rh,rw} pad(data)[...] / (KH*KW)``.

    Padded positions read as 0 and count in the area (``count_include_pad``).
    """
    win, shape = _pool("avg_pool2d", data, kernel, stride, padding)
    check_bias("avg_pool2d", data, data_bias)
    scale = f32(1.0 / win.area)

    def body(n: ir.Expr, y: ir.Expr, x: ir.Expr, c: ir.Expr) -> ir.Expr:
        iy, ix, checks = win.at(y, x)
        value = guarded(checks, read(data, (n, iy, ix, c), data_bias, data_act), 0.0)
        return te.sum(value * scale, axis=win.axes)

    return te.compute(shape, body, name=name)


def global_avg_pool_nhwc(
    data: te.Tensor,
    *,
    name: str = "gap",
    data_act: Activation | None = None,
    data_bias: te.Tensor | None = None,
) -> te.Tensor:
    """data[N,H,W,C] -> out[N,C], ``out[n,c] = sum_{rh,rw} data[n,rh,rw,c] / (H*W)``."""
    check_ndim("global_avg_pool_nhwc", data, 4, "NHWC")
    check_bias("global_avg_pool_nhwc", data, data_bias)
    batch, height, width, channels = data.shape
    rh = te.reduce_axis((0, height), name="rh")
    rw = te.reduce_axis((0, width), name="rw")
    scale = f32(1.0 / (height * width))

    def body(n: ir.Expr, c: ir.Expr) -> ir.Expr:
        return te.sum(read(data, (n, rh, rw, c), data_bias, data_act) * scale, axis=[rh, rw])

    return te.compute((batch, channels), body, name=name)
