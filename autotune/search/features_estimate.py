"""Estimates over loop variables taken as uniform in their ranges: a loop's mean trip count, an
expression's mean, how often a guard holds (for :mod:`autotune.search.features`)."""

from __future__ import annotations

from .. import ir
from ..analysis import Interval, eval_interval, sum_form

__all__ = ["mean", "probability", "trip"]


def trip(s: ir.For, bounds: dict[ir.Var, Interval]) -> tuple[float, bool]:
    """``(mean trip count, whether it is a constant)`` of loop ``s``."""
    value = ir.as_int(s.extent)
    if value is not None:
        return float(max(value, 0)), True
    return max(mean(s.extent, bounds), 0.0), False


def mean(e: ir.Expr, bounds: dict[ir.Var, Interval]) -> float:
    """The mean of an integer expression over uniform loop variables (an estimate)."""
    iv = eval_interval(e, bounds)
    if iv.is_point:
        return float(iv.lo)  # type: ignore[arg-type]
    if isinstance(e, ir.Select):
        p = probability(e.cond, bounds)
        return p * mean(e.true_value, bounds) + (1.0 - p) * mean(e.false_value, bounds)
    if isinstance(e, (ir.Add, ir.Sub)):
        a, b = mean(e.a, bounds), mean(e.b, bounds)
        return a + b if isinstance(e, ir.Add) else a - b
    if isinstance(e, ir.Mul) and ir.as_int(e.b) is not None:
        return mean(e.a, bounds) * ir.as_int(e.b)  # type: ignore[operator]
    if iv.lo is not None and iv.hi is not None:
        return (iv.lo + iv.hi) / 2.0
    return float(iv.lo if iv.lo is not None and iv.lo > 0 else 1)


def probability(cond: ir.Expr, bounds: dict[ir.Var, Interval]) -> float:
    """How often ``cond`` holds if every loop variable were uniform in its range (an estimate)."""
    if isinstance(cond, ir.And):
        return probability(cond.a, bounds) * probability(cond.b, bounds)
    if isinstance(cond, ir.Or):
        return min(1.0, probability(cond.a, bounds) + probability(cond.b, bounds))
    if isinstance(cond, ir.Not):
        return 1.0 - probability(cond.a, bounds)
    if not isinstance(cond, ir.CmpOp) or sum_form(cond.a) is None:
        return 1.0
    diff = eval_interval(ir.Sub(cond.a, cond.b), bounds)
    if diff.lo is None or diff.hi is None:
        return 0.5 if isinstance(cond, ir.EQ) else 1.0
    n = diff.hi - diff.lo + 1
    count = {
        ir.LT: -diff.lo,
        ir.LE: 1 - diff.lo,
        ir.GT: diff.hi,
        ir.GE: diff.hi + 1,
        ir.EQ: 1 if diff.lo <= 0 <= diff.hi else 0,
        ir.NE: n - (1 if diff.lo <= 0 <= diff.hi else 0),
    }.get(type(cond), n)
    return min(max(count / n, 0.0), 1.0)
