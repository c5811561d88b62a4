"""Resizing NCHW and NHWC data with float index math (nearest neighbour, bilinear).

The source index of an output position is computed in float32 and floored, so
region inference cannot bound it: the consumer needs ``annotate_buffer_access``
to tile it. The scale ``in_dim / out_dim`` is rounded to float32 once, so the
numpy reference uses the very same constant.
"""

from __future__ import annotations

from ... import ir, te
from ._common import IntPair, check_ndim, f32, pair

METHODS = ("nearest", "bilinear")


def _scale(in_dim: int, out_dim: int) -> float:
    return f32(in_dim / out_dim)


def clamp(index: ir.Expr, size: int) -> ir.Expr:
    """``min(max(index, 0), size - 1)``."""
    return ir.min_(ir.max_(index, 0), size - 1)


def nearest_index(out: ir.Expr, in_dim: int, out_dim: int) -> ir.Expr:
    """``clamp(cast(int32, floor(cast(float32, out) * scale + 0.5)), 0, in_dim - 1)``."""
    pos = te.cast("float32", out) * _scale(in_dim, out_dim) + 0.5
    return clamp(te.cast("int32", te.floor(pos)), in_dim)


def linear_source(out: ir.Expr, in_dim: int, out_dim: int) -> tuple[ir.Expr, ir.Expr, ir.Expr]:
    """Half-pixel bilinear source: the two clamped neighbour indices and the weight of the second.

    ``pos = (out + 0.5) * scale - 0.5``; neighbours ``floor(pos)`` and ``floor(pos) + 1``;
    weight ``pos - floor(pos)``.
    """
    pos = (te.cast("float32", out) + 0.5) * _scale(in_dim, out_dim) - 0.5
    lo = te.floor(pos)
    lo_index = te.cast("int32", lo)
    return clamp(lo_index, in_dim), clamp(lo_index + 1, in_dim), pos - lo


def resize2d_nchw(
    data: te.Tensor, out_hw: IntPair, method: str = "nearest", *, name: str = "resize"
) -> te.Tensor:
    """data[N,C,H,W] -> out[N,C,OH,OW], resampled with ``scale = in_dim / out_dim`` per axis.

    nearest:  ``out[n,c,y,x] = data[n, c, clamp(floor(y*sh + 0.5)), clamp(floor(x*sw + 0.5))]``.
    bilinear: ``out = (1-wy)*((1-wx)*d[y0,x0] + wx*d[y0,x1]) + wy*((1-wx)*d[y1,x0] + wx*d[y1,x1])``
    with half-pixel source positions (see :func:`linear_source`).
    """
    op = "resize2d_nchw"
    check_ndim(op, data, 4, "NCHW")
    if method not in METHODS:
        raise ValueError(f"{op}: method must be one of {', '.join(METHODS)}, got {method!r}")
    batch, channels, height, width = data.shape
    oh, ow = pair(out_hw, f"{op}: out_hw")
    if min(oh, ow) < 1:
        raise ValueError(f"{op}: output size must be positive, got {(oh, ow)}")

    def nearest(n: ir.Expr, c: ir.Expr, y: ir.Expr, x: ir.Expr) -> ir.Expr:
        return data[n, c, nearest_index(y, height, oh), nearest_index(x, width, ow)]

    def bilinear(n: ir.Expr, c: ir.Expr, y: ir.Expr, x: ir.Expr) -> ir.Expr:
        y0, y1, wy = linear_source(y, height, oh)
        x0, x1, wx = linear_source(x, width, ow)
        top = (1.0 - wx) * data[n, c, y0, x0] + wx * data[n, c, y0, x1]
        bottom = (1.0 - wx) * data[n, c, y1, x0] + wx * data[n, c, y1, x1]
        return (1.0 - wy) * top + wy * bottom

    return te.compute((batch, channels, oh, ow), nearest if method == "nearest" else bilinear, name=name)


COORDINATES = ("half_pixel", "asymmetric", "align_corners")
ROUNDINGS = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")


def source_position(out: ir.Expr, in_dim: int, out_dim: int, coordinates: str) -> ir.Expr:
    """The float32 source position of output index ``out`` (ONNX Resize's coordinate modes):
    half_pixel ``(out + 0.5) * in/out - 0.5``, asymmetric ``out * in/out``, align_corners
    ``out * (in-1)/(out-1)`` (0 for a 1-wide output)."""
    o = te.cast("float32", out)
    if coordinates == "half_pixel":
        return (o + 0.5) * _scale(in_dim, out_dim) - 0.5
    if coordinates == "asymmetric":
        return o * _scale(in_dim, out_dim)
    return o * (f32((in_dim - 1) / (out_dim - 1)) if out_dim > 1 else 0.0)


def rounded_index(pos: ir.Expr, in_dim: int, rounding: str) -> ir.Expr:
    """``pos`` rounded to an index as ONNX's ``nearest_mode`` says, clamped to ``[0, in_dim)``."""
    if rounding == "floor":
        value = te.floor(pos)
    elif rounding == "ceil":
        value = ir.Call(pos.dtype, "ceil", (pos,))
    elif rounding == "round_prefer_ceil":
        value = te.floor(pos + 0.5)
    else:
        value = ir.Call(pos.dtype, "ceil", (pos - 0.5,))
    return clamp(te.cast("int32", value), in_dim)


def resize2d_nhwc(
    data: te.Tensor,
    out_hw: IntPair,
    method: str = "nearest",
    *,
    coordinates: str = "half_pixel",
    rounding: str = "round_prefer_floor",
    name: str = "resize",
) -> te.Tensor:
    """data[N,H,W,C] -> out[N,OH,OW,C], with ONNX Resize's coordinate modes (:func:`source_position`).

    nearest: ``out[n,y,x,c] = data[n, round(pos(y)), round(pos(x)), c]`` (``rounding``: ONNX's
    ``nearest_mode``); bilinear: the four clamped neighbours of ``(pos(y), pos(x))`` weighted by
    the fractions, as in :func:`resize2d_nchw`.
    """
    op = "resize2d_nhwc"
    check_ndim(op, data, 4, "NHWC")
    if method not in METHODS:
        raise ValueError(f"{op}: method must be one of {', '.join(METHODS)}, got {method!r}")
    if coordinates not in COORDINATES:
        raise ValueError(f"{op}: coordinates must be one of {', '.join(COORDINATES)}, got {coordinates!r}")
    if rounding not in ROUNDINGS:
        raise ValueError(f"{op}: rounding must be one of {', '.join(ROUNDINGS)}, got {rounding!r}")
    batch, height, width, channels = data.shape
    oh, ow = pair(out_hw, f"{op}: out_hw")
    if min(oh, ow) < 1:
        raise ValueError(f"{op}: output size must be positive, got {(oh, ow)}")

    def nearest(n: ir.Expr, y: ir.Expr, x: ir.Expr, c: ir.Expr) -> ir.Expr:
        iy = rounded_index(source_position(y, height, oh, coordinates), height, rounding)
        ix = rounded_index(source_position(x, width, ow, coordinates), width, rounding)
        return data[n, iy, ix, c]

    def neighbours(out: ir.Expr, in_dim: int, out_dim: int) -> tuple[ir.Expr, ir.Expr, ir.Expr]:
        pos = source_position(out, in_dim, out_dim, coordinates)
        lo = te.floor(pos)
        lo_index = te.cast("int32", lo)
        return clamp(lo_index, in_dim), clamp(lo_index + 1, in_dim), pos - lo

    def bilinear(n: ir.Expr, y: ir.Expr, x: ir.Expr, c: ir.Expr) -> ir.Expr:
        y0, y1, wy = neighbours(y, height, oh)
        x0, x1, wx = neighbours(x, width, ow)
        top = (1.0 - wx) * data[n, y0, x0, c] + wx * data[n, y0, x1, c]
        bottom = (1.0 - wx) * data[n, y1, x0, c] + wx * data[n, y1, x1, c]
        return (1.0 - wy) * top + wy * bottom

    return te.compute((batch, oh, ow, channels), nearest if method == "nearest" else bilinear, name=name)
