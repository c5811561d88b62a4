"""Integer intervals and the interval of an expression.

An :class:`Interval` is the inclusive set ``[lo, hi]`` of integers; ``None`` is an
unbounded side. Division and modulo follow Python's floor semantics, for positive
and negative divisors alike. :func:`eval_interval` bounds an expression given
intervals of its variables: affine parts are summed exactly (``x - x`` is ``[0, 0]``),
everything else is bounded node by node; what is not an integer is unbounded.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

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
    Cast,
    CmpOp,
    Expr,
    FloatImm,
    FloorDiv,
    FloorMod,
    IntImm,
    Max,
    Min,
    Mul,
    Not,
    Or,
    Select,
    Sub,
    Var,
)

from .linear import Linear, is_int_dtype, sum_form

__all__ = ["Interval", "decide_compare", "eval_interval", "interval_of_sum", "loop_interval"]

_Num = float | int  # an int, or ±math.inf for an unbounded side


def _lo(v: int | None) -> _Num:
    return -math.inf if v is None else v


def _hi(v: int | None) -> _Num:
    return math.inf if v is None else v


def _side(v: _Num) -> int | None:
    return None if isinstance(v, float) and not math.isfinite(v) else int(v)


def _mul(a: _Num, b: _Num) -> _Num:
    return 0 if a == 0 or b == 0 else a * b


def _fdiv(a: _Num, c: int) -> _Num:
    """Floor division of a bound by a non-zero int, keeping infinities."""
    if isinstance(a, float):
        return a if c > 0 else -a
    return a // c


def _iv(x: Interval | int) -> Interval:
    return Interval(x, x) if isinstance(x, int) else x


@dataclass(frozen=True, slots=True)
class Interval:
    """The integers ``lo..hi`` inclusive; ``None`` is an unbounded side.

    Arithmetic takes another interval or an int (a point): ``Interval(-5, 5).floordiv(-2)``.
    """

    lo: int | None = None
    hi: int | None = None

    @staticmethod
    def point(v: int) -> Interval:
        return Interval(v, v)

    @staticmethod
    def everything() -> Interval:
        return Interval(None, None)

    @staticmethod
    def _of(lo: _Num, hi: _Num) -> Interval:
        return Interval(_side(lo), _side(hi))

    # ---- queries -----------------------------------------------------------
    @property
    def is_point(self) -> bool:
        return self.lo is not None and self.lo == self.hi

    @property
    def is_bounded(self) -> bool:
        return self.lo is not None and self.hi is not None

    @property
    def is_empty(self) -> bool:
        return self.lo is not None and self.hi is not None and self.lo > self.hi

    def contains(self, v: int) -> bool:
        return _lo(self.lo) <= v <= _hi(self.hi)

    def excludes_zero(self) -> bool:
        return not self.contains(0)

    # ---- arithmetic --------------------------------------------------------
    def __add__(self, other: Interval | int) -> Interval:
        other = _iv(other)
        return Interval._of(_lo(self.lo) + _lo(other.lo), _hi(self.hi) + _hi(other.hi))

    def __neg__(self) -> Interval:
        return Interval._of(-_hi(self.hi), -_lo(self.lo))

    def __sub__(self, other: Interval | int) -> Interval:
        other = _iv(other)
        return self + (-other)

    def __mul__(self, other: Interval | int) -> Interval:
        other = _iv(other)
        corners = [_mul(a, b) for a in (_lo(self.lo), _hi(self.hi)) for b in (_lo(other.lo), _hi(other.hi))]
        return Interval._of(min(corners), max(corners))

    def scale(self, k: int) -> Interval:
        return self * Interval.point(k)

    def floordiv(self, other: Interval | int) -> Interval:
        other = _iv(other)
        """``{a // b}`` over both intervals (unbounded when ``other`` may be 0 or is unbounded)."""
        if other.is_point and other.lo != 0:
            c = other.lo
            assert c is not None
            ends = (_fdiv(_lo(self.lo), c), _fdiv(_hi(self.hi), c))
            return Interval._of(min(ends), max(ends))
        if not other.is_bounded or other.contains(0):
            return Interval.everything()
        if _hi(other.hi) < 0:  # a // b == (-a) // (-b)
            return (-self).floordiv(-other)
        assert other.lo is not None and other.hi is not None
        lows = [_fdiv(_lo(self.lo), b) for b in (other.lo, other.hi)]
        highs = [_fdiv(_hi(self.hi), b) for b in (other.lo, other.hi)]
        return Interval._of(min(lows), max(highs))

    def floormod(self, other: Interval | int) -> Interval:
        other = _iv(other)
        """``{a % b}`` over both intervals, with the sign of ``b`` as in Python."""
        if other.is_point and other.lo != 0:
            c = other.lo
            assert c is not None
            if self.is_bounded and _fdiv(_lo(self.lo), c) == _fdiv(_hi(self.hi), c):
                assert self.lo is not None and self.hi is not None
                return Interval(self.lo % c, self.hi % c)
        if not other.is_bounded or other.contains(0):
            return Interval.everything()
        assert other.lo is not None and other.hi is not None
        if other.lo > 0:
            top = other.hi - 1
            return Interval(0, top if _lo(self.lo) < 0 else int(min(top, _hi(self.hi))))
        bottom = other.lo + 1
        return Interval(bottom if _hi(self.hi) > 0 else int(max(bottom, _lo(self.lo))), 0)

    def min(self, other: Interval | int) -> Interval:
        other = _iv(other)
        return Interval._of(min(_lo(self.lo), _lo(other.lo)), min(_hi(self.hi), _hi(other.hi)))

    def max(self, other: Interval | int) -> Interval:
        other = _iv(other)
        return Interval._of(max(_lo(self.lo), _lo(other.lo)), max(_hi(self.hi), _hi(other.hi)))

    def union(self, other: Interval) -> Interval:
        """The smallest interval holding both."""
        if self.is_empty:
            return other
        if other.is_empty:
            return self
        return Interval._of(min(_lo(self.lo), _lo(other.lo)), max(_hi(self.hi), _hi(other.hi)))

    def intersect(self, other: Interval) -> Interval:
        """The common part (possibly empty: ``lo > hi``)."""
        return Interval._of(max(_lo(self.lo), _lo(other.lo)), min(_hi(self.hi), _hi(other.hi)))

    def __str__(self) -> str:
        return f"[{'-inf' if self.lo is None else self.lo}, {'inf' if self.hi is None else self.hi}]"


_EVERYTHING = Interval.everything()
_BOOL = Interval(0, 1)
_TRUE = Interval.point(1)
_FALSE = Interval.point(0)

Bounds = Mapping[Var, Interval]


def eval_interval(expr: Expr, bounds: Bounds | None = None) -> Interval:
    """An interval holding every value of ``expr`` when each variable lies in ``bounds``.

    Variables missing from ``bounds`` are unbounded; a comparison is within ``[0, 1]``
    (a point when it is decided); a non-integer expression is unbounded.
    """
    bounds = bounds if bounds is not None else {}
    form = sum_form(expr)
    if form is not None:
        return interval_of_sum(form, bounds)
    return _node_interval(expr, bounds)


def loop_interval(start: Expr, extent: Expr, bounds: Bounds | None = None) -> Interval:
    """The values of a loop variable running ``start, ..., start + extent - 1``, over ``bounds``."""
    bounds = bounds if bounds is not None else {}
    first = eval_interval(start, bounds)
    last = eval_interval(Sub(Add(start, extent), IntImm(1, start.dtype)), bounds)
    return Interval(first.lo, last.hi)


def interval_of_sum(form: Linear, bounds: Bounds) -> Interval:
    """The interval of a :class:`Linear` form; each term is bounded on its own."""
    acc = Interval.point(form.const)
    for term, k in form.coeffs:
        if isinstance(term, Var):
            part = bounds.get(term, _EVERYTHING)
        else:
            part = _node_interval(term, bounds)
        acc = acc + part.scale(k)
        if acc.lo is None and acc.hi is None:
            break
    return acc


def decide_compare(op: type[CmpOp], diff: Interval) -> bool | None:
    """Whether ``a <op> b`` holds for every ``a - b`` in ``diff`` (True/False), or None if unknown."""
    lo, hi = _lo(diff.lo), _hi(diff.hi)
    if op is LT:
        return True if hi < 0 else (False if lo >= 0 else None)
    if op is LE:
        return True if hi <= 0 else (False if lo > 0 else None)
    if op is GT:
        return True if lo > 0 else (False if hi <= 0 else None)
    if op is GE:
        return True if lo >= 0 else (False if hi < 0 else None)
    if op is EQ:
        return True if lo == hi == 0 else (False if lo > 0 or hi < 0 else None)
    if op is NE:
        return False if lo == hi == 0 else (True if lo > 0 or hi < 0 else None)
    return None


def _truth(iv: Interval) -> Interval:
    if iv.excludes_zero():
        return _TRUE
    return _FALSE if iv == _FALSE else _BOOL


def _node_interval(e: Expr, bounds: Bounds) -> Interval:
    if isinstance(e, IntImm):
        return Interval.point(e.value)
    if isinstance(e, CmpOp):
        return _cmp_interval(e, bounds)
    if isinstance(e, Not):
        inner = _truth(eval_interval(e.a, bounds))
        return _BOOL if inner == _BOOL else (_FALSE if inner == _TRUE else _TRUE)
    if isinstance(e, Select):
        cond = _truth(eval_interval(e.cond, bounds))
        if cond == _TRUE:
            return eval_interval(e.true_value, bounds)
        if cond == _FALSE:
            return eval_interval(e.false_value, bounds)
        return eval_interval(e.true_value, bounds).union(eval_interval(e.false_value, bounds))
    if e.dtype == "bool":  # boolean variables, loads and casts
        return _bool_interval(e, bounds)
    if not is_int_dtype(e.dtype):
        return _EVERYTHING
    if isinstance(e, Var):
        return bounds.get(e, _EVERYTHING)
    if isinstance(e, Cast):
        if isinstance(e.value, FloatImm) and math.isfinite(e.value.value):
            return Interval.point(int(e.value.value))
        source = e.value.dtype
        return eval_interval(e.value, bounds) if is_int_dtype(source) or source == "bool" else _EVERYTHING
    return _arith_interval(e, bounds)


_ARITH: dict[type, Callable[[Interval, Interval], Interval]] = {
    Add: Interval.__add__,
    Sub: Interval.__sub__,
    Mul: Interval.__mul__,
    FloorDiv: Interval.floordiv,
    FloorMod: Interval.floormod,
    Min: Interval.min,
    Max: Interval.max,
}


def _arith_interval(e: Expr, bounds: Bounds) -> Interval:
    fn = _ARITH.get(type(e))
    if fn is None or not isinstance(e, BinaryOp):
        return _EVERYTHING
    return fn(eval_interval(e.a, bounds), eval_interval(e.b, bounds))


def _bool_interval(e: Expr, bounds: Bounds) -> Interval:
    if isinstance(e, Cast):
        value = e.value
        if isinstance(value, FloatImm):
            return _TRUE if value.value != 0 else _FALSE
        return (
            _truth(eval_interval(value, bounds))
            if is_int_dtype(value.dtype) or value.dtype == "bool"
            else _BOOL
        )
    if isinstance(e, Var) and e in bounds:
        return bounds[e].intersect(_BOOL)
    return _BOOL


def _cmp_interval(e: CmpOp, bounds: Bounds) -> Interval:
    if isinstance(e, (And, Or)):
        a, b = _truth(eval_interval(e.a, bounds)), _truth(eval_interval(e.b, bounds))
        if isinstance(e, And):
            return _FALSE if _FALSE in (a, b) else (_TRUE if a == b == _TRUE else _BOOL)
        return _TRUE if _TRUE in (a, b) else (_FALSE if a == b == _FALSE else _BOOL)
    sa, sb = sum_form(e.a), sum_form(e.b)
    if sa is not None and sb is not None:
        decided = decide_compare(type(e), interval_of_sum(sa - sb, bounds))
    elif (
        isinstance(e.a, (IntImm, FloatImm))
        and isinstance(e.b, (IntImm, FloatImm))
        and not (math.isnan(e.a.value) or math.isnan(e.b.value))
    ):
        diff = e.a.value - e.b.value
        decided = decide_compare(type(e), Interval.point(0 if diff == 0 else (1 if diff > 0 else -1)))
    else:
        decided = None
    return _BOOL if decided is None else (_TRUE if decided else _FALSE)
