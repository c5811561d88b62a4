"""Elementwise operators, as stages (``relu``) and as expression functions (``relu_expr``).

The expression functions are what a consumer's ``data_act`` takes: passing
``relu_expr`` fuses the activation into the stage that reads the tensor. ``broadcast_map`` is
one stage of any elementwise expression of several tensors, broadcast as numpy does.
"""

from __future__ import annotations

from collections.abc import Callable

from ... import ir, te
from ._common import f32


def relu_expr(x: ir.Expr) -> ir.Expr:
    """``max(x, 0)``."""
    return ir.max_(x, te.const(0.0, x.dtype))


def relu6_expr(x: ir.Expr) -> ir.Expr:
    """``min(max(x, 0), 6)``."""
    return ir.min_(ir.max_(x, te.const(0.0, x.dtype)), te.const(6.0, x.dtype))


def relu(x: te.Tensor, *, name: str = "relu") -> te.Tensor:
    """out = max(x, 0), any shape."""
    return te.compute(x.shape, lambda *i: relu_expr(x[i]), name=name)


def relu6(x: te.Tensor, *, name: str = "relu6") -> te.Tensor:
    """out = min(max(x, 0), 6), any shape."""
    return te.compute(x.shape, lambda *i: relu6_expr(x[i]), name=name)


def add(a: te.Tensor, b: te.Tensor, *, name: str = "add") -> te.Tensor:
    """out = a + b, both of the same shape (no broadcasting)."""
    if a.shape != b.shape:
        raise ValueError(f"add: shapes differ, {a.name} {a.shape} and {b.name} {b.shape}")
    return te.compute(a.shape, lambda *i: a[i] + b[i], name=name)


def sigmoid_expr(x: ir.Expr) -> ir.Expr:
    """``1 / (1 + exp(-x))``."""
    return te.const(1.0, x.dtype) / (te.const(1.0, x.dtype) + ir.Call(x.dtype, "exp", (-x,)))


def hardswish_expr(x: ir.Expr) -> ir.Expr:
    """``x * min(max(x / 6 + 0.5, 0), 1)`` (ONNX HardSwish: alpha 1/6, beta 0.5)."""
    gate = ir.min_(ir.max_(x * f32(1.0 / 6.0) + 0.5, te.const(0.0, x.dtype)), te.const(1.0, x.dtype))
    return x * gate


def sigmoid(x: te.Tensor, *, name: str = "sigmoid") -> te.Tensor:
    """out = 1 / (1 + exp(-x)), any shape."""
    return te.compute(x.shape, lambda *i: sigmoid_expr(x[i]), name=name)


def hardswish(x: te.Tensor, *, name: str = "hardswish") -> te.Tensor:
    """out = x * min(max(x / 6 + 0.5, 0), 1), any shape."""
    return te.compute(x.shape, lambda *i: hardswish_expr(x[i]), name=name)


def broadcast_shape(op: str, *shapes: tuple[int, ...]) -> tuple[int, ...]:
    """numpy's broadcast of ``shapes`` (trailing axes aligned, an extent 1 stretches)."""
    ndim = max(len(s) for s in shapes)
    out = []
    for axis in range(ndim):
        extents = {s[axis - ndim + len(s)] for s in shapes if axis - ndim + len(s) >= 0} - {1}
        if len(extents) > 1:
            raise ValueError(f"{op}: shapes {', '.join(map(str, shapes))} do not broadcast")
        out.append(extents.pop() if extents else 1)
    return tuple(out)


Operand = te.Tensor | tuple[te.Tensor, tuple[int, ...]]
"""A tensor, or ``(tensor, shape)``: the tensor seen with ``shape``, its own extents in order with
axes of extent 1 added or dropped (numpy's ``reshape`` to unit axes)."""


def _view(op: str, operand: Operand) -> tuple[te.Tensor, tuple[int, ...]]:
    if isinstance(operand, te.Tensor):
        return operand, operand.shape
    tensor, shape = operand
    if [d for d in shape if d != 1] != [d for d in tensor.shape if d != 1]:
        raise ValueError(f"{op}: {tensor.name} {tensor.shape} cannot be seen with shape {shape}")
    return tensor, tuple(shape)


def _view_index(tensor: te.Tensor, shape: tuple[int, ...], index: list[ir.Expr]) -> tuple[ir.Expr, ...]:
    """The index of ``tensor`` at ``index`` of its view with ``shape`` (unit axes read 0)."""
    real = iter([i for i, d in zip(index, shape) if d != 1])
    return tuple(ir.const(0) if d == 1 else next(real) for d in tensor.shape)


def broadcast_map(fn: Callable[..., ir.Expr], *operands: Operand, name: str = "map") -> te.Tensor:
    """out[i] = fn(t0[i], t1[i], ...) with numpy broadcasting: an operand with fewer axes is aligned
    to the last ones, and an axis of extent 1 reads index 0 wherever the output's is larger."""
    views = [_view(name, o) for o in operands]
    shape = broadcast_shape(name, *(s for _, s in views))

    def body(*i: ir.Expr) -> ir.Expr:
        loads = []
        for tensor, view in views:
            lead = len(shape) - len(view)
            index = [ir.const(0) if d == 1 else i[lead + k] for k, d in enumerate(view)]
            loads.append(tensor[_view_index(tensor, view, index)])
        return fn(*loads)

    return te.compute(shape, body, name=name)


def mul(a: te.Tensor, b: te.Tensor, *, name: str = "mul") -> te.Tensor:
    """out = a * b with numpy broadcasting (a per-channel scale ``b[C]`` of NHWC ``a``, say)."""
    return broadcast_map(lambda x, y: x * y, a, b, name=name)
