"""Helpers shared by the operators: window index math, inline padding, argument checks."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import reduce

import numpy as np

from ... import ir, te
from ...ir.expr import ExprLike

IntPair = int | Sequence[int]
Activation = Callable[[ir.Expr], ir.Expr]
"""An elementwise function on expressions (``relu_expr``), fused where a tensor is read."""


def f32(value: float) -> float:
    """``value`` rounded to float32, so a float32 constant means exactly what it prints."""
    return float(np.float32(value))


def pair(value: IntPair, what: str) -> tuple[int, int]:
    """``3`` -> ``(3, 3)``; a pair of non-negative ints is returned as a tuple."""
    if isinstance(value, int):
        a, b = value, value
    else:
        try:
            a, b = value
        except (TypeError, ValueError):
            raise ValueError(f"{what} must be an int or a pair of ints, got {value!r}") from None
    if not (isinstance(a, int) and isinstance(b, int)) or a < 0 or b < 0:
        raise ValueError(f"{what} must be non-negative ints, got {value!r}")
    return a, b


def out_size(op: str, size: int, kernel: int, stride: int, pad: int) -> int:
    """Output extent of a window of ``kernel`` moved by ``stride`` over ``size`` padded by ``pad``."""
    if stride < 1:
        raise ValueError(f"{op}: stride must be at least 1, got {stride}")
    extent = (size + 2 * pad - kernel) // stride + 1
    if extent < 1:
        raise ValueError(f"{op}: a {kernel}-wide window does not fit an input of {size} padded by {pad}")
    return extent


def check_ndim(op: str, t: te.Tensor, ndim: int, layout: str) -> None:
    if t.ndim != ndim:
        raise ValueError(f"{op}: {t.name} must be {layout}, got shape {t.shape}")


def kernel_axis(extent: int, name: str) -> ir.Expr:
    """A reduce axis over ``[0, extent)``, or the constant 0 for a 1-wide kernel (no loop)."""
    return te.reduce_axis((0, extent), name=name) if extent > 1 else ir.const(0)


def reduce_axes(*axes: ir.Expr) -> list[te.ReduceAxis]:
    """The axes that are real reduce axes (``kernel_axis`` may return constants)."""
    return [a for a in axes if isinstance(a, te.ReduceAxis)]


def window_index(out: ir.Expr, stride: int, offset: ir.Expr, pad: int) -> ir.Expr:
    """``out * stride + offset - pad``, leaving out the terms that are no-ops."""
    index = out * stride if stride != 1 else out
    if not (isinstance(offset, ir.IntImm) and offset.value == 0):
        index = index + offset
    return index - pad if pad else index


def bound_checks(index: ir.Expr, size: int, lo: int, hi: int) -> list[ir.Expr]:
    """The conditions keeping ``index`` (which spans ``[lo, hi]``) inside ``[0, size)``.

    A side that cannot be crossed gets no condition, so unpadded windows read unguarded.
    """
    checks = []
    if lo < 0:
        checks.append(index >= 0)
    if hi >= size:
        checks.append(index < size)
    return checks


def window_checks(index: ir.Expr, size: int, out: int, kernel: int, stride: int, pad: int) -> list[ir.Expr]:
    """``bound_checks`` for ``index = o * stride + r - pad`` with ``o < out`` and ``r < kernel``."""
    return bound_checks(index, size, -pad, (out - 1) * stride + kernel - 1 - pad)


def all_of(conds: Sequence[ir.Expr]) -> ir.Expr:
    """The conjunction of ``conds`` (at least one)."""
    return reduce(ir.And, conds)


def guarded(conds: Sequence[ir.Expr], value: ir.Expr, pad_value: ExprLike) -> ir.Expr:
    """``value`` where every condition holds, else ``pad_value`` (a lazy select); no select if none."""
    if not conds:
        return value
    return te.if_then_else(all_of(conds), value, pad_value)


def apply(act: Activation | None, value: ir.Expr) -> ir.Expr:
    return value if act is None else act(value)


def read(
    data: te.Tensor, index: tuple[ir.Expr, ...], bias: te.Tensor | None, act: Activation | None
) -> ir.Expr:
    """``act(data[index] + bias[index[-1]])``: a producer's per-channel bias (its channel the last
    axis) and activation applied where the consumer reads it; no term for a missing part."""
    value = data[index]
    if bias is not None:
        value = value + bias[index[-1]]
    return apply(act, value)


def check_bias(op: str, data: te.Tensor, bias: te.Tensor | None) -> None:
    """A ``data_bias`` must have one value per channel of ``data`` (its last axis)."""
    if bias is not None and bias.shape != (data.shape[-1],):
        raise ValueError(f"{op}: data_bias {bias.name} must have shape ({data.shape[-1]},), got {bias.shape}")


class Window:
    """A ``kh x kw`` window moved over two spatial axes: output size, reduce axes, input indices."""

    def __init__(
        self,
        op: str,
        size: tuple[int, int],
        kernel: IntPair,
        stride: IntPair,
        padding: IntPair,
        dilation: IntPair = 1,
    ) -> None:
        self.op = op
        self.size = size
        self.kernel = pair(kernel, f"{op}: kernel")
        self.stride = pair(stride, f"{op}: stride")
        self.pad = pair(padding, f"{op}: padding")
        self.dilation = pair(dilation, f"{op}: dilation")
        if min(self.kernel) < 1:
            raise ValueError(f"{op}: kernel must be at least 1, got {self.kernel}")
        if min(self.dilation) < 1:
            raise ValueError(f"{op}: dilation must be at least 1, got {self.dilation}")
        # the rows and columns a dilated kernel spans
        self.span = ((self.kernel[0] - 1) * self.dilation[0] + 1, (self.kernel[1] - 1) * self.dilation[1] + 1)
        self.out = (
            out_size(op, size[0], self.span[0], self.stride[0], self.pad[0]),
            out_size(op, size[1], self.span[1], self.stride[1], self.pad[1]),
        )
        self.rh = kernel_axis(self.kernel[0], "rh")
        self.rw = kernel_axis(self.kernel[1], "rw")

    @property
    def axes(self) -> list[te.ReduceAxis]:
        return reduce_axes(self.rh, self.rw)

    @property
    def area(self) -> int:
        return self.kernel[0] * self.kernel[1]

    def at(self, y: ir.Expr, x: ir.Expr) -> tuple[ir.Expr, ir.Expr, list[ir.Expr]]:
        """The input row and column read for output ``(y, x)``, and the in-bounds conditions."""
        dy, dx = self.dilation
        iy = window_index(
            y, self.stride[0], self.rh * dy if dy > 1 and self.kernel[0] > 1 else self.rh, self.pad[0]
        )
        ix = window_index(
            x, self.stride[1], self.rw * dx if dx > 1 and self.kernel[1] > 1 else self.rw, self.pad[1]
        )
        checks = window_checks(iy, self.size[0], self.out[0], self.span[0], self.stride[0], self.pad[0])
        checks += window_checks(ix, self.size[1], self.out[1], self.span[1], self.stride[1], self.pad[1])
        return iy, ix, checks
