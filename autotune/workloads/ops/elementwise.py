"""Elementwise operators, as stages (``relu``) and as expression functions (``relu_expr``).

The expression functions are what a consumer's ``data_act`` takes: passing
``relu_expr`` fuses the activation into the stage that reads the tensor.
"""

from __future__ import annotations

from ... import ir, te


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
