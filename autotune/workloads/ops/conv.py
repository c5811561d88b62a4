"""Convolutions: NHWC and NCHW 2-d convolution and NHWC depthwise convolution.

Padding is written inline: a read outside the input is a lazy select of 0.
A 1-wide kernel axis gets no reduce loop (a pointwise convolution reduces over
channels only). ``data_act`` applies an activation to every element of ``data``
as it is read, which fuses the producer's activation into this stage.
"""

from __future__ import annotations

from ... import ir, te
from ._common import Activation, IntPair, Window, apply, check_bias, check_ndim, guarded, read


def conv2d_nhwc(
    data: te.Tensor,
    weight: te.Tensor,
    stride: IntPair = 1,
    padding: IntPair = 0,
    *,
    name: str = "conv",
    data_act: Activation | None = None,
    data_bias: te.Tensor | None = None,
    dilation: IntPair = 1,
) -> te.Tensor:
    """data[N,H,W,CI], weight[KH,KW,CI,CO] -> out[N,OH,OW,CO].

    ``out[n,y,x,o] = sum_{rh,rw,rc} pad(data)[n, y*sh+rh*dh-ph, x*sw+rw*dw-pw, rc] * weight[rh,rw,rc,o]``;
    ``data_bias[rc]`` is added to each element read, before ``data_act``.
    """
    op = "conv2d_nhwc"
    check_ndim(op, data, 4, "NHWC")
    check_ndim(op, weight, 4, "[KH,KW,CI,CO]")
    batch, height, width, cin = data.shape
    kh, kw, wcin, cout = weight.shape
    if wcin != cin:
        raise ValueError(f"{op}: data has {cin} channels, weight {weight.name} expects {wcin}")
    check_bias(op, data, data_bias)
    win = Window(op, (height, width), (kh, kw), stride, padding, dilation)
    rc = te.reduce_axis((0, cin), name="rc")

    def body(n: ir.Expr, y: ir.Expr, x: ir.Expr, o: ir.Expr) -> ir.Expr:
        iy, ix, checks = win.at(y, x)
        value = guarded(checks, read(data, (n, iy, ix, rc), data_bias, data_act), 0.0)
        return te.sum(value * weight[win.rh, win.rw, rc, o], axis=[*win.axes, rc])

    return te.compute((batch, *win.out, cout), body, name=name)


def conv2d_nchw(
    data: te.Tensor,
    weight: te.Tensor,
    stride: IntPair = 1,
    padding: IntPair = 0,
    *,
    name: str = "conv",
    data_act: Activation | None = None,
) -> te.Tensor:
    """data[N,CI,H,W], weight[CO,CI,KH,KW] -> out[N,CO,OH,OW].

    ``out[n,o,y,x] = sum_{rc,rh,rw} pad(data)[n, rc, y*sh+rh-ph, x*sw+rw-pw] * weight[o,rc,rh,rw]``.
    """
    op = "conv2d_nchw"
    check_ndim(op, data, 4, "NCHW")
    check_ndim(op, weight, 4, "[CO,CI,KH,KW]")
    batch, cin, height, width = data.shape
    cout, wcin, kh, kw = weight.shape
    if wcin != cin:
        raise ValueError(f"{op}: data has {cin} channels, weight {weight.name} expects {wcin}")
    win = Window(op, (height, width), (kh, kw), stride, padding)
    rc = te.reduce_axis((0, cin), name="rc")

    def body(n: ir.Expr, o: ir.Expr, y: ir.Expr, x: ir.Expr) -> ir.Expr:
        iy, ix, checks = win.at(y, x)
        value = guarded(checks, apply(data_act, data[n, rc, iy, ix]), 0.0)
        return te.sum(value * weight[o, rc, win.rh, win.rw], axis=[rc, *win.axes])

    return te.compute((batch, cout, *win.out), body, name=name)


def depthwise_conv2d_nhwc(
    data: te.Tensor,
    weight: te.Tensor,
    stride: IntPair = 1,
    padding: IntPair = 0,
    *,
    name: str = "depthwise",
    data_act: Activation | None = None,
    data_bias: te.Tensor | None = None,
    dilation: IntPair = 1,
) -> te.Tensor:
    """data[N,H,W,C], weight[KH,KW,C] -> out[N,OH,OW,C] (channel multiplier 1).

    ``out[n,y,x,c] = sum_{rh,rw} pad(data)[n, y*sh+rh*dh-ph, x*sw+rw*dw-pw, c] * weight[rh,rw,c]``;
    ``data_bias[c]`` is added to each element read, before ``data_act``.
    """
    op = "depthwise_conv2d_nhwc"
    check_ndim(op, data, 4, "NHWC")
    check_ndim(op, weight, 3, "[KH,KW,C]")
    batch, height, width, channels = data.shape
    kh, kw, wchannels = weight.shape
    if wchannels != channels:
        raise ValueError(f"{op}: data has {channels} channels, weight {weight.name} has {wchannels}")
    check_bias(op, data, data_bias)
    win = Window(op, (height, width), (kh, kw), stride, padding, dilation)
    if not win.axes:
        raise ValueError(f"{op}: a 1x1 depthwise kernel is an elementwise scale, not a convolution")

    def body(n: ir.Expr, y: ir.Expr, x: ir.Expr, c: ir.Expr) -> ir.Expr:
        iy, ix, checks = win.at(y, x)
        value = guarded(checks, read(data, (n, iy, ix, c), data_bias, data_act), 0.0)
        return te.sum(value * weight[win.rh, win.rw, c], axis=win.axes)

    return te.compute((batch, *win.out, channels), body, name=name)
