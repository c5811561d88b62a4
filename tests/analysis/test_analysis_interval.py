"""Integer intervals: arithmetic with floor semantics, and intervals of expressions."""

from __future__ import annotations

import itertools

import pytest

from autotune import ir
from autotune.analysis import Interval, eval_interval

x, y, b = ir.Var("x"), ir.Var("y"), ir.Var("b", "bool")
f = ir.Var("f", "float32")
I = ir.IntImm
SMALL = [Interval(lo, hi) for lo in range(-7, 8, 2) for hi in range(lo, lo + 9, 3)]


def _values(iv: Interval) -> range:
    assert iv.lo is not None and iv.hi is not None
    return range(iv.lo, iv.hi + 1)


def _box(values: list[int]) -> Interval:
    return Interval(min(values), max(values))


@pytest.mark.parametrize("c", [-5, -4, -3, -2, -1, 1, 2, 3, 4, 7])
def test_floordiv_and_floormod_by_a_constant_are_exact(c: int) -> None:
    for a in SMALL:
        assert a.floordiv(Interval.point(c)) == _box([v // c for v in _values(a)]), (a, c)
        assert a.floormod(Interval.point(c)) == _box([v % c for v in _values(a)]), (a, c)


def test_floordiv_and_floormod_by_an_interval_hold_every_value() -> None:
    divisors = [Interval(1, 3), Interval(2, 5), Interval(-4, -1), Interval(-3, -2)]
    for a, d in itertools.product(SMALL, divisors):
        q, r = a.floordiv(d), a.floormod(d)
        for u, v in itertools.product(_values(a), _values(d)):
            assert q.contains(u // v) and r.contains(u % v), (a, d, u, v, q, r)


def test_floordiv_examples_crossing_zero() -> None:
    assert Interval(-5, 5).floordiv(Interval.point(2)) == Interval(-3, 2)
    assert Interval(-5, 5).floordiv(Interval.point(-2)) == Interval(-3, 2)
    assert Interval(-1, 1).floordiv(Interval.point(-4)) == Interval(-1, 0)
    assert Interval(-5, 5).floormod(Interval.point(3)) == Interval(0, 2)
    assert Interval(-5, 5).floormod(Interval.point(-3)) == Interval(-2, 0)
    assert Interval(-2, 0).floormod(Interval.point(-3)) == Interval(-2, 0)
    assert Interval(4, 5).floormod(Interval.point(4)) == Interval(0, 1)


def test_division_by_an_interval_holding_zero_or_unbounded_is_unbounded() -> None:
    assert Interval(0, 10).floordiv(Interval(-1, 1)) == Interval.everything()
    assert Interval(0, 10).floormod(Interval(0, 3)) == Interval.everything()
    assert Interval(0, 10).floordiv(Interval(1, None)) == Interval.everything()
    assert Interval(None, 10).floordiv(Interval.point(4)) == Interval(None, 2)
    assert Interval(None, None).floormod(Interval.point(4)) == Interval(0, 3)
    assert Interval(0, None).floormod(Interval(1, 8)) == Interval(0, 7)
    assert Interval(0, 3).floormod(Interval(1, 8)) == Interval(0, 3)


def test_arithmetic_min_max_union_intersect() -> None:
    a, c = Interval(-2, 3), Interval(1, 5)
    assert a + c == Interval(-1, 8)
    assert a - c == Interval(-7, 2)
    assert a * c == Interval(-10, 15)
    assert a * Interval(None, -1) == Interval(None, None)
    assert Interval(0, 0) * Interval(None, None) == Interval(0, 0)
    assert Interval(1, 2) * Interval(3, None) == Interval(3, None)
    assert a.min(c) == Interval(-2, 3)
    assert a.max(c) == Interval(1, 5)
    assert a.min(Interval(None, 0)) == Interval(None, 0)
    assert a.union(c) == Interval(-2, 5)
    assert a.intersect(c) == Interval(1, 3)
    assert Interval(0, 1).intersect(Interval(3, 4)).is_empty
    assert Interval(0, 1).union(Interval(5, 4)) == Interval(0, 1)
    assert str(Interval(None, 3)) == "[-inf, 3]"


def test_eval_interval_of_expressions() -> None:
    bounds = {x: Interval(0, 9), y: Interval(-3, 3)}
    cases: list[tuple[ir.Expr, Interval]] = [
        (x * 4 + y - 1, Interval(-4, 38)),
        (x - x, Interval(0, 0)),
        (x // 4, Interval(0, 2)),
        (x // -4, Interval(-3, 0)),
        (y % 4, Interval(0, 3)),
        (y % -4, Interval(-3, 0)),
        ((x * 4 + 3) // 4, Interval(0, 9)),
        (ir.min_(x, y), Interval(-3, 3)),
        (ir.max_(x, 5), Interval(5, 9)),
        (ir.select(x < y, I(1), I(7)), Interval(1, 7)),
        (ir.select(x < 10, I(1), I(7)), Interval(1, 1)),
        (x < 10, Interval(1, 1)),
        (x < y, Interval(0, 1)),
        (ir.And(x < 10, y > 5), Interval(0, 0)),
        (ir.Or(x < 10, y > 5), Interval(1, 1)),
        (ir.Not(x < 10), Interval(0, 0)),
        (I(7), Interval(7, 7)),
        (x * y, Interval(-27, 27)),
        (ir.Var("unknown") + 1, Interval.everything()),
        (ir.Cast("int32", ir.floor(ir.Cast("float32", x) * 2.0)), Interval.everything()),
        (ir.Cast("int32", ir.FloatImm(-2.5)), Interval(-2, -2)),
        (f + 1.0, Interval.everything()),
        (ir.Cast("bool", x + 1), Interval(1, 1)),
        (b, Interval(0, 1)),
        (ir.LT(ir.FloatImm(1.0), ir.FloatImm(2.0)), Interval(1, 1)),
    ]
    for expr, expected in cases:
        assert eval_interval(expr, bounds) == expected, str(expr)
