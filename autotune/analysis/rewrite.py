"""The rewrite rules of :meth:`Analyzer.simplify <autotune.analysis.arith.Analyzer.simplify>`.

Children are simplified first, then one rule per node class applies:

- immediates fold (``3 // -2`` is ``-2``; floats round to their dtype);
- an integer ``+``, ``-`` or ``*`` becomes the canonical :class:`~autotune.analysis.linear.Linear`
  form over its atoms, so ``(i*4 + j) - i*4`` is ``j`` and ``2*(x + 1) - 2`` is ``x * 2``;
- ``(a*c + b) // c`` is ``a + b // c`` and ``(a*c + b) % c`` is ``b % c``; ``b // c`` is a
  constant and ``b % c`` is ``b`` shifted when the bounds keep ``b`` inside one period of ``c``;
- ``min``/``max``, comparisons, ``select``, ``and``/``or``/``not`` fold when the intervals decide them.

No rule changes the value of an expression for any values of its variables inside
the analyzer's bounds; applying the rules twice gives the same text (idempotence).
"""

from __future__ import annotations

from dataclasses import fields
from typing import TYPE_CHECKING, Any

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
    Block,
    BufferLoad,
    Call,
    Cast,
    CmpOp,
    Div,
    Expr,
    FloatImm,
    FloorDiv,
    FloorMod,
    For,
    IntImm,
    Max,
    Min,
    Mul,
    Not,
    Or,
    Range,
    Select,
    Sub,
    Transformer,
    Var,
    as_int,
)

from .const_fold import fold_binary, fold_call, fold_cast, fold_not
from .linear import Known, Linear, is_int_dtype, remember_sum, sum_form, sum_form_known

if TYPE_CHECKING:
    from .arith import Analyzer

__all__ = ["Simplifier"]

_NEGATE: dict[type, type[CmpOp]] = {LT: GE, LE: GT, GT: LE, GE: LT, EQ: NE, NE: EQ}
_TRUE = IntImm(1, "bool")
_FALSE = IntImm(0, "bool")
_RULES: dict[type, str] = {  # node class -> Simplifier method applied once its children are simplified
    **dict.fromkeys((Add, Sub, Mul), "_linear"),
    **dict.fromkeys((EQ, NE, LT, LE, GT, GE), "_compare"),
    **dict.fromkeys((And, Or), "_logic"),
    **dict.fromkeys((Min, Max), "_minmax"),
    FloorDiv: "_floordiv",
    FloorMod: "_floormod",
    Div: "_fold",
    Not: "_not",
    Select: "_select",
    Cast: "_cast",
    Call: "_call",
}


_OTHER, _BINARY, _LOAD = 0, 1, 2
_SHAPES: dict[type, int] = {}
"""Per expression class (its key), whether :meth:`Simplifier._children` rebuilds it directly: a
``BinaryOp`` whose fields are exactly ``a`` and ``b``, or ``BufferLoad`` itself."""


def _shape_of(cls: type) -> int:
    names = tuple(f.name for f in fields(cls))
    if issubclass(cls, BinaryOp) and names == ("a", "b"):
        shape = _BINARY
    elif cls is BufferLoad:
        shape = _LOAD
    else:
        shape = _OTHER
    _SHAPES[cls] = shape
    return shape


def _either(found: Expr | None, default: Expr) -> Expr:
    return default if found is None else found


def _same(old: Expr, new: Expr) -> Expr:
    """``old`` when ``new`` is structurally equal to it (keeps identity for unchanged trees)."""
    return old if new == old else new


class Simplifier(Transformer):
    """Simplify every expression under a node, using (and scoping) the analyzer's bounds.

    Loop variables and block iteration variables are bound to their domains while
    the statements that use them are simplified.
    """

    def __init__(self, analyzer: Analyzer) -> None:
        self.an = analyzer
        self.known: Known = {}  # the forms of the sums it wrote (:func:`~.linear.remember_sum`)
        # children of expressions go through expr() unless a subclass changes visit or visit_buffer
        self._direct = type(self).visit is Simplifier.visit and type(self).visit_buffer is Transformer.visit_buffer

    # ---- dispatch ----------------------------------------------------------
    def visit(self, node: Any) -> Any:
        if isinstance(node, Expr):
            return self.expr(node)
        return super().visit(node)

    def expr(self, e: Expr) -> Expr:
        if isinstance(e, (IntImm, FloatImm, Var)):
            return e
        e = self._children(e)
        rule = _RULES.get(type(e))
        return e if rule is None else getattr(self, rule)(e)  # type: ignore[no-any-return]

    def _children(self, e: Expr) -> Expr:
        """``e`` with its children simplified: ``generic_visit(e)``, made directly for a binary
        operator (fields ``a`` and ``b``) and a load (a buffer, which stays, and indices)."""
        shape = _SHAPES.get(type(e))
        if shape is None:
            shape = _shape_of(type(e))
        if not self._direct:
            shape = _OTHER
        if shape == _BINARY:
            a, b = e.a, e.b  # type: ignore[attr-defined]
            if isinstance(a, Expr) and isinstance(b, Expr):
                na, nb = self.expr(a), self.expr(b)
                return e if na is a and nb is b else type(e)(na, nb)  # type: ignore[call-arg]
        elif shape == _LOAD:
            indices = e.indices  # type: ignore[attr-defined]
            if all(isinstance(i, Expr) for i in indices):
                new = [self.expr(i) for i in indices]
                if all(x is y for x, y in zip(new, indices)):
                    return e
                return BufferLoad(e.buffer, tuple(new))  # type: ignore[attr-defined]
        return self.generic_visit(e)  # type: ignore[no-any-return]

    def visit_For(self, s: For) -> For:
        with self.an.scoped():
            self.an.bind(s.loop_var, Range(self.visit(s.min), self.visit(s.extent)))
            return self.generic_visit(s)  # type: ignore[no-any-return]

    def visit_Block(self, s: Block) -> Block:
        with self.an.scoped():
            for iv in s.iter_vars:
                self.an.bind(iv.var, iv.dom)
            return self.generic_visit(s)  # type: ignore[no-any-return]

    # ---- arithmetic --------------------------------------------------------
    def _fold(self, e: BinaryOp) -> Expr:
        return _either(fold_binary(e, e.a, e.b), e)

    def _linear(self, e: BinaryOp) -> Expr:
        folded = fold_binary(e, e.a, e.b)
        if folded is not None:
            return folded
        form = sum_form_known(e, self.known) if is_int_dtype(e.dtype) else None
        if form is None:
            return e
        out = _same(e, form.to_expr(e.dtype))
        remember_sum(out, form, self.known)
        return out

    def _divisor(self, e: BinaryOp) -> tuple[Linear, int] | None:
        """The numerator's form and the constant non-zero divisor of an integer ``//``/``%``."""
        c = as_int(e.b)
        if c is None or c == 0 or not is_int_dtype(e.dtype):
            return None
        form = sum_form(e.a)
        return None if form is None else (form, c)

    def _floordiv(self, e: FloorDiv) -> Expr:
        folded = fold_binary(e, e.a, e.b)
        found = self._divisor(e) if folded is None else None
        if found is None:
            return _either(folded, e)
        form, c = found
        quotient = Linear(tuple((t, k // c) for t, k in form.coeffs if k % c == 0))
        rest = Linear(tuple((t, k) for t, k in form.coeffs if k % c != 0), form.const)
        if rest.const % c == 0:
            quotient, rest = quotient + rest.const // c, rest.with_const(0)
        iv = self.an.interval_of(rest)
        if iv.lo is not None and iv.hi is not None and iv.lo // c == iv.hi // c:
            return _same(e, (quotient + iv.lo // c).to_expr(e.dtype))
        inner = rest.to_expr(e.dtype)
        if isinstance(inner, FloorDiv) and c > 0 and (c1 := as_int(inner.b)) is not None and c1 > 0:
            # (x // c1) // c == x // (c1 * c)
            part = sum_form(self._floordiv(FloorDiv(inner.a, IntImm(c1 * c, e.dtype))))
        else:
            part = Linear.term(FloorDiv(inner, IntImm(c, e.dtype)))
        assert part is not None
        return _same(e, (quotient + part).to_expr(e.dtype))

    def _floormod(self, e: FloorMod) -> Expr:
        folded = fold_binary(e, e.a, e.b)
        found = self._divisor(e) if folded is None else None
        if found is None:
            return _either(folded, e)
        form, c = found
        rest = Linear(tuple((t, k) for t, k in form.coeffs if k % c != 0), form.const % c)
        if rest.is_const:
            return IntImm(rest.const, e.dtype)
        iv = self.an.interval_of(rest)
        if iv.lo is not None and iv.hi is not None and iv.lo // c == iv.hi // c:
            return _same(e, (rest - c * (iv.lo // c)).to_expr(e.dtype))
        inner = rest.to_expr(e.dtype)
        if (
            isinstance(inner, FloorMod)
            and c > 0
            and (c1 := as_int(inner.b)) is not None
            and c1 > 0
            and c1 % c == 0
        ):
            return self._floormod(FloorMod(inner.a, IntImm(c, e.dtype)))  # (x % (k*c)) % c == x % c
        return _same(e, FloorMod(inner, IntImm(c, e.dtype)))

    def _minmax(self, e: Min | Max) -> Expr:
        folded = fold_binary(e, e.a, e.b)
        if folded is not None:
            return folded
        if e.a == e.b:
            return e.a
        diff = self.an.diff_interval(e.a, e.b)
        if diff is not None:
            a_small = diff.hi is not None and diff.hi <= 0
            b_small = diff.lo is not None and diff.lo >= 0
            if a_small or b_small:
                return e.a if a_small == isinstance(e, Min) else e.b
        return e

    # ---- logic -------------------------------------------------------------
    def _decided(self, e: Expr) -> Expr | None:
        """``True``/``False`` when the intervals decide the boolean ``e``."""
        iv = self.an.interval(e)
        if iv.excludes_zero():
            return _TRUE
        return _FALSE if iv.lo == iv.hi == 0 else None

    def _compare(self, e: CmpOp) -> Expr:
        folded = fold_binary(e, e.a, e.b)
        if folded is not None:
            return folded
        return _either(self._decided(e), e)

    def _logic(self, e: And | Or) -> Expr:
        folded = fold_binary(e, e.a, e.b)
        if folded is not None:
            return folded
        absorbing = 0 if isinstance(e, And) else 1
        for x, y in ((e.a, e.b), (e.b, e.a)):
            if isinstance(x, IntImm):
                if (x.value != 0) == bool(absorbing):
                    return IntImm(absorbing, "bool")
                if y.dtype == "bool":
                    return y
        if e.a == e.b and e.a.dtype == "bool":
            return e.a
        return _either(self._decided(e), e)

    def _not(self, e: Not) -> Expr:
        folded = fold_not(e.a)
        if folded is not None:
            return folded
        inner = e.a
        if isinstance(inner, Not) and inner.a.dtype == "bool":
            return inner.a
        if (
            isinstance(inner, CmpOp)
            and type(inner) in _NEGATE
            and is_int_dtype(inner.a.dtype)
            and is_int_dtype(inner.b.dtype)
        ):
            return _NEGATE[type(inner)](inner.a, inner.b)
        return _either(self._decided(e), e)

    def _select(self, e: Select) -> Expr:
        cond = e.cond if isinstance(e.cond, IntImm) else self._decided(e.cond)
        if isinstance(cond, IntImm):
            return e.true_value if cond.value else e.false_value
        if e.true_value == e.false_value:
            return e.true_value
        return e

    # ---- casts and calls ---------------------------------------------------
    def _cast(self, e: Cast) -> Expr:
        folded = fold_cast(e.dtype, e.value)
        if folded is not None:
            return folded
        return e.value if e.value.dtype == e.dtype else e

    def _call(self, e: Call) -> Expr:
        return _either(fold_call(e, e.args), e)
