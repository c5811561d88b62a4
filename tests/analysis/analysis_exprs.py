"""Random integer expressions over a few bounded variables, and a reference evaluator.

The evaluator gives the IR's meaning with Python semantics: ``//`` and ``%`` floor,
float-to-int casts truncate toward zero, comparisons and ``and``/``or``/``not`` are 0/1.
Float sub-expressions use dyadic constants only, so double and float32 agree exactly.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping
from typing import Any

from autotune import ir
from autotune.analysis import Interval

X, Y, Z, W = ir.Var("x"), ir.Var("y"), ir.Var("z"), ir.Var("w")
BOUNDS: dict[ir.Var, Interval] = {
    X: Interval(-8, 8),
    Y: Interval(0, 15),
    Z: Interval(1, 6),
    W: Interval(-3, 3),
}
_DIVISORS = (-5, -4, -3, -2, -1, 1, 2, 3, 4, 5, 8)
_CMPS = (ir.LT, ir.LE, ir.GT, ir.GE, ir.EQ, ir.NE)


def random_int(rng: random.Random, depth: int) -> ir.Expr:
    """A random integer expression of at most ``depth`` levels."""
    if depth <= 0 or rng.random() < 0.2:
        return rng.choice([*BOUNDS, ir.IntImm(rng.randint(-6, 9))])
    a = random_int(rng, depth - 1)
    kind = rng.randrange(11)
    if kind <= 1:
        return ir.Add(a, random_int(rng, depth - 1))
    if kind == 2:
        return ir.Sub(a, random_int(rng, depth - 1))
    if kind == 3:
        other = ir.IntImm(rng.randint(-4, 4)) if rng.random() < 0.7 else random_int(rng, 1)
        return ir.Mul(a, other) if rng.random() < 0.5 else ir.Mul(other, a)
    if kind in (4, 5):
        divisor = ir.IntImm(rng.choice(_DIVISORS)) if rng.random() < 0.85 else Z
        return (ir.FloorDiv if kind == 4 else ir.FloorMod)(a, divisor)
    if kind == 6:
        return (ir.Min if rng.random() < 0.5 else ir.Max)(a, random_int(rng, depth - 1))
    if kind == 7:
        return ir.Select(random_bool(rng, depth - 1), a, random_int(rng, depth - 1))
    if kind == 8:  # float math as in a resize index
        scaled = ir.Add(
            ir.Mul(ir.Cast("float32", a), ir.FloatImm(rng.choice((0.5, 2.0, 1.25)))), ir.FloatImm(0.25)
        )
        return ir.Cast("int32", ir.Call("float32", "floor", (scaled,)))
    if kind == 9:  # a constant float subtree
        value = ir.Mul(ir.FloatImm(rng.choice((1.5, -2.25, 3.0))), ir.FloatImm(rng.choice((0.5, 4.0))))
        return ir.Add(a, ir.Cast("int32", value))
    return ir.Add(ir.Mul(a, ir.IntImm(rng.choice(_DIVISORS))), ir.IntImm(rng.randint(-9, 9)))


def random_bool(rng: random.Random, depth: int) -> ir.Expr:
    """A random condition over integer expressions."""
    if depth <= 0 or rng.random() < 0.15:
        return ir.IntImm(rng.randint(0, 1), "bool")
    kind = rng.randrange(5)
    if kind <= 2:
        return rng.choice(_CMPS)(random_int(rng, depth - 1), random_int(rng, depth - 1))
    if kind == 3:
        return (ir.And if rng.random() < 0.5 else ir.Or)(
            random_bool(rng, depth - 1), random_bool(rng, depth - 1)
        )
    return ir.Not(random_bool(rng, depth - 1))


def random_point(rng: random.Random, bounds: Mapping[ir.Var, Interval] = BOUNDS) -> dict[ir.Var, int]:
    return {v: rng.randint(iv.lo, iv.hi) for v, iv in bounds.items()}  # type: ignore[arg-type]


_BINARY = {
    ir.Add: lambda a, b: a + b,
    ir.Sub: lambda a, b: a - b,
    ir.Mul: lambda a, b: a * b,
    ir.Div: lambda a, b: a / b,
    ir.FloorDiv: lambda a, b: a // b,
    ir.FloorMod: lambda a, b: a % b,
    ir.Min: min,
    ir.Max: max,
    ir.LT: lambda a, b: int(a < b),
    ir.LE: lambda a, b: int(a <= b),
    ir.GT: lambda a, b: int(a > b),
    ir.GE: lambda a, b: int(a >= b),
    ir.EQ: lambda a, b: int(a == b),
    ir.NE: lambda a, b: int(a != b),
    ir.And: lambda a, b: int(bool(a) and bool(b)),
    ir.Or: lambda a, b: int(bool(a) or bool(b)),
}


def evaluate(e: ir.Expr, env: Mapping[ir.Var, Any]) -> Any:
    """The value of ``e`` with the variables of ``env``."""
    if isinstance(e, (ir.IntImm, ir.FloatImm)):
        return e.value
    if isinstance(e, ir.Var):
        return env[e]
    if isinstance(e, ir.BinaryOp):
        return _BINARY[type(e)](evaluate(e.a, env), evaluate(e.b, env))
    if isinstance(e, ir.Not):
        return int(not evaluate(e.a, env))
    if isinstance(e, ir.Select):
        return evaluate(e.true_value, env) if evaluate(e.cond, env) else evaluate(e.false_value, env)
    if isinstance(e, ir.Cast):
        v = evaluate(e.value, env)
        if e.dtype == "bool":
            return int(bool(v))
        return float(v) if ir.is_float(e.dtype) else int(v)
    if isinstance(e, ir.Call) and e.op in ("floor", "ceil"):
        return float(getattr(math, e.op)(evaluate(e.args[0], env)))
    raise TypeError(f"cannot evaluate {type(e).__name__}")
