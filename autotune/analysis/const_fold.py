"""Constant folding of single IR nodes whose operands are immediates.

Integers follow Python semantics (floor ``//`` and ``%``); floats are computed in
double precision and rounded to the node's dtype (``float32`` stays ``float32``).
Folding never raises: a division by zero, a NaN cast or an unknown op is left as is.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable

from autotune.ir import (
    EQ,
    GE,
    GT,
    LE,
    LT,
    NE,
    Add,
    And,
    BinaryOp,
    Call,
    Div,
    Expr,
    FloatImm,
    FloorDiv,
    FloorMod,
    IntImm,
    Max,
    Min,
    Mul,
    Or,
    Sub,
    is_float,
)

from .linear import is_int_dtype

__all__ = ["fold_binary", "fold_call", "fold_cast", "fold_not", "round_float"]

_Num = int | float

_ARITH: dict[type, Callable[[_Num, _Num], _Num]] = {
    Add: lambda a, b: a + b,
    Sub: lambda a, b: a - b,
    Mul: lambda a, b: a * b,
    FloorDiv: lambda a, b: a // b,
    FloorMod: lambda a, b: a % b,
    Min: min,
    Max: max,
}
_COMPARE: dict[type, Callable[[_Num, _Num], bool]] = {
    EQ: lambda a, b: a == b,
    NE: lambda a, b: a != b,
    LT: lambda a, b: a < b,
    LE: lambda a, b: a <= b,
    GT: lambda a, b: a > b,
    GE: lambda a, b: a >= b,
    And: lambda a, b: bool(a) and bool(b),
    Or: lambda a, b: bool(a) or bool(b),
}
_ROUND_FORMAT = {"float32": "f", "float16": "e"}


def round_float(value: float, dtype: str) -> float:
    """``value`` rounded to the precision of ``dtype`` (float64: unchanged)."""
    fmt = _ROUND_FORMAT.get(dtype)
    if fmt is None or not math.isfinite(value):
        return value
    try:
        return float(struct.unpack(fmt, struct.pack(fmt, value))[0])
    except OverflowError:
        return math.copysign(math.inf, value)


def _bool(value: bool) -> Expr:
    return IntImm(int(value), "bool")


def fold_binary(node: BinaryOp, a: Expr, b: Expr) -> Expr | None:
    """The immediate value of ``node`` with operands ``a`` and ``b``, or None."""
    if not isinstance(a, (IntImm, FloatImm)) or not isinstance(b, (IntImm, FloatImm)):
        return None
    x, y = a.value, b.value
    op = type(node)
    if op in _COMPARE:
        if (isinstance(x, float) and math.isnan(x)) or (isinstance(y, float) and math.isnan(y)):
            return None if op in (And, Or) else _bool(op is NE)
        return _bool(_COMPARE[op](x, y))
    floating = isinstance(a, FloatImm) or isinstance(b, FloatImm)
    if op in (Div, FloorDiv, FloorMod) and y == 0:
        return None
    if op is Div:
        if not floating:
            return None  # integer Div is not in the IR's vocabulary: leave it
        value: _Num = x / y
    elif op in _ARITH:
        value = _ARITH[op](x, y)
    else:
        return None
    if floating:
        dtype = a.dtype if isinstance(a, FloatImm) else b.dtype
        return FloatImm(round_float(float(value), dtype), dtype)
    return IntImm(int(value), node.dtype)


def fold_not(a: Expr) -> Expr | None:
    if isinstance(a, IntImm):
        return _bool(a.value == 0)
    return None


def fold_cast(dtype: str, value: Expr) -> Expr | None:
    """The immediate ``T.Cast(dtype, value)``; float to int truncates toward zero as in C."""
    if not isinstance(value, (IntImm, FloatImm)):
        return None
    v = value.value
    if dtype == "bool":
        return None if isinstance(v, float) and math.isnan(v) else _bool(v != 0)
    if is_float(dtype):
        return FloatImm(round_float(float(v), dtype), dtype)
    if is_int_dtype(dtype):
        if isinstance(v, float) and not math.isfinite(v):
            return None
        return IntImm(int(v), dtype)
    return None


_CALLS: dict[str, Callable[[float], float]] = {
    "floor": lambda v: float(math.floor(v)),
    "ceil": lambda v: float(math.ceil(v)),
    "abs": abs,
}


def fold_call(call: Call, args: tuple[Expr, ...]) -> Expr | None:
    """Fold ``floor``, ``ceil`` and ``abs`` of an immediate (others would round differently)."""
    fn = _CALLS.get(call.op)
    if fn is None or len(args) != 1:
        return None
    (arg,) = args
    if isinstance(arg, IntImm) and call.op == "abs" and is_int_dtype(call.dtype):
        return IntImm(abs(arg.value), call.dtype)
    if isinstance(arg, FloatImm) and math.isfinite(arg.value) and is_float(call.dtype):
        return FloatImm(round_float(fn(arg.value), call.dtype), call.dtype)
    return None
