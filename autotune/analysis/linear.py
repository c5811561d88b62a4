"""Linear (integer-affine) forms of expressions.

A :class:`Linear` is ``sum(coeff * term) + const`` with integer coefficients.
:func:`to_linear` accepts only integer-affine expressions, so its terms are
:class:`~autotune.ir.Var`; :func:`sum_form` also accepts any other integer
expression as an opaque *atom* term (``x // 3``, ``T.min(a, b)``, a load), which
is what the simplifier needs to cancel ``(i*4 + j) - i*4`` or ``m + 1 - m``.

Terms keep the order of their first appearance; :meth:`Linear.to_expr` prints
the positive terms first (in that order), then the negative ones, then the
constant: ``v_h * 2 + rh - 1``, ``5 - i``, ``x * -1 - 1``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from autotune.ir import (
    Add,
    Expr,
    FloorDiv,
    FloorMod,
    IntImm,
    Mul,
    Sub,
    Var,
)

__all__ = ["Linear", "is_int_dtype", "sum_form", "to_linear"]


def is_int_dtype(dtype: str) -> bool:
    """True for the integer dtypes (``int8`` ... ``int64``, ``uint8``); False for ``bool`` and floats."""
    return dtype.startswith(("int", "uint"))


@dataclass(frozen=True, slots=True)
class Linear:
    """``sum(coeff * term for term, coeff in coeffs) + const``.

    ``coeffs`` holds no zero coefficient and no term twice; its order is the order
    in which the terms first appeared. Terms are :class:`Var` for the forms made
    by :func:`to_linear`, and may be any integer expression for :func:`sum_form`.
    """

    coeffs: tuple[tuple[Expr, int], ...] = ()
    const: int = 0

    # ---- construction ------------------------------------------------------
    @staticmethod
    def of(terms: Iterable[tuple[Expr, int]], const: int = 0) -> Linear:
        """A form from ``(term, coeff)`` pairs, merging repeated terms and dropping zeros."""
        acc: dict[Expr, int] = {}
        for term, k in terms:
            acc[term] = acc.get(term, 0) + k
        return Linear(tuple((t, k) for t, k in acc.items() if k != 0), const)

    @staticmethod
    def term(term: Expr, coeff: int = 1) -> Linear:
        return Linear(((term, coeff),) if coeff else ())

    # ---- queries -----------------------------------------------------------
    @property
    def is_const(self) -> bool:
        return not self.coeffs

    @property
    def terms(self) -> tuple[Expr, ...]:
        return tuple(t for t, _ in self.coeffs)

    def coeff(self, term: Expr) -> int:
        """The coefficient of ``term`` (0 when absent)."""
        for t, k in self.coeffs:
            if t == term:  # identity for Var, structural for other nodes
                return k
        return 0

    def as_mapping(self) -> Mapping[Expr, int]:
        return dict(self.coeffs)

    def divisible_by(self, c: int) -> bool:
        """True when every coefficient (not the constant) is a multiple of ``c``."""
        return all(k % c == 0 for _, k in self.coeffs)

    # ---- arithmetic --------------------------------------------------------
    def __add__(self, other: Linear | int) -> Linear:
        if isinstance(other, int):
            return Linear(self.coeffs, self.const + other)
        return Linear.of((*self.coeffs, *other.coeffs), self.const + other.const)

    def __sub__(self, other: Linear | int) -> Linear:
        return self + (-other)

    def __neg__(self) -> Linear:
        return self.scale(-1)

    def scale(self, k: int) -> Linear:
        if k == 0:
            return Linear()
        return Linear(tuple((t, c * k) for t, c in self.coeffs), self.const * k)

    def with_const(self, const: int) -> Linear:
        return Linear(self.coeffs, const)

    # ---- back to IR --------------------------------------------------------
    def to_expr(self, dtype: str = "int32") -> Expr:
        """The canonical expression: positive terms, then negative terms, then the constant."""
        pos = [(t, k) for t, k in self.coeffs if k > 0]
        neg = [(t, -k) for t, k in self.coeffs if k < 0]
        c = self.const

        def scaled(t: Expr, k: int) -> Expr:
            return t if k == 1 else Mul(t, IntImm(k, dtype))

        if pos:
            out = scaled(*pos[0])
            rest = pos[1:]
        elif c > 0 or not neg:
            out, c = IntImm(c, dtype), 0
            rest = []
        else:
            t0, k0 = neg.pop(0)
            out, rest = Mul(t0, IntImm(-k0, dtype)), []
        for t, k in rest:
            out = Add(out, scaled(t, k))
        for t, k in neg:
            out = Sub(out, scaled(t, k))
        if c > 0:
            out = Add(out, IntImm(c, dtype))
        elif c < 0:
            out = Sub(out, IntImm(-c, dtype))
        return out


def to_linear(expr: Expr) -> Linear | None:
    """The affine form of an integer expression over integer variables, or None.

    ``+``, ``-``, multiplication by a constant, and ``//``/``%`` by a constant that
    divides every coefficient (``(i*4 + 6) // 2`` is ``i*2 + 3``) are affine, and so
    is a quotient and remainder pair that recombines (``f // 64 * 64 + f % 64`` is
    ``f``); anything else (floats, casts, calls, loads, select, min/max, other
    divisions) is not.
    """
    form = sum_form(expr)
    if form is None or not all(isinstance(t, Var) for t in form.terms):
        return None
    return form


def sum_form(expr: Expr) -> Linear | None:
    """Like :func:`to_linear`, but any non-affine integer sub-expression becomes a term.

    Quotient and remainder terms of one numerator recombine (see :func:`_recombine`).
    Returns None only for a non-integer expression.
    """
    form = _decompose(expr, atoms=True)
    return None if form is None else _recombine(form)


def _positive_divisor(e: Expr, kind: type[FloorDiv] | type[FloorMod]) -> tuple[Expr, int] | None:
    """``(a, c)`` when ``e`` is ``a // c`` (or ``a % c``) with a constant ``c > 0``."""
    if isinstance(e, kind) and isinstance(e.b, IntImm) and e.b.value > 0:
        return e.a, e.b.value
    return None


def _quotient_terms(x: Expr, m: int) -> tuple[Expr, ...]:
    """The spellings of ``x // m`` a form may hold: ``(a // c) // m`` is also ``a // (c*m)``."""
    spelled: list[Expr] = [FloorDiv(x, IntImm(m, x.dtype))]
    inner = _positive_divisor(x, FloorDiv)
    if inner is not None:
        spelled.append(FloorDiv(inner[0], IntImm(inner[1] * m, x.dtype)))
    return tuple(spelled)


def _recombine(form: Linear) -> Linear:
    """Fold ``k*m*(x // m) + k*(x % m)`` into ``k*x`` (floor division, ``m > 0``), repeatedly.

    A fused loop ``f`` of extents ``(X, 64)`` binds ``f // 64`` and ``f % 64``; a
    row-major index ``x*64 + c`` of it becomes ``f // 64 * 64 + f % 64``, which
    is ``f``: without this the generated code divides on every access and the
    fused loop never becomes one contiguous vector loop. Three fused loops give
    ``f // 2048 * 2048 + f // 64 % 32 * 64 + f % 64``, folded in two steps.
    """
    if not any(isinstance(t, FloorMod) for t, _ in form.coeffs):
        return form  # no remainder term: nothing to fold
    changed = True
    while changed:
        changed = False
        coeffs = form.as_mapping()
        for term, k in coeffs.items():
            found = _positive_divisor(term, FloorMod)
            if found is None:
                continue
            x, m = found
            partner = next((q for q in _quotient_terms(x, m) if coeffs.get(q) == k * m), None)
            if partner is None:
                continue
            inner = _decompose(x, atoms=True)
            assert inner is not None  # x is an integer expression: its remainder was a term
            merged: list[tuple[Expr, int]] = []
            placed = False
            for t, c in form.coeffs:  # x's terms take the place of the first of the pair
                if t in (term, partner):
                    if not placed:
                        merged += [(u, c2 * k) for u, c2 in inner.coeffs]
                        placed = True
                else:
                    merged.append((t, c))
            form = Linear.of(merged, form.const + inner.const * k)
            changed = True
            break
    return form


Known = dict[int, tuple[Expr, Linear]]
"""Forms of expressions, keyed on ``id(expr)``, that :func:`sum_form_known` takes instead of
walking them (:func:`remember_sum` puts them there). Each entry holds its expression, so the id
cannot be reused by another object while the entry is there."""


def sum_form_known(expr: Expr, known: Known) -> Linear | None:
    """:func:`sum_form`, taking the form of any sub-expression found in ``known`` from there.

    The simplifier rewrites sums bottom-up, each into the expression of its form, then takes the
    form of the sum around it: remembering each, it walks every sum once instead of once per
    enclosing sum."""
    form = _decompose(expr, True, known)
    return None if form is None else _recombine(form)


def remember_sum(expr: Expr, form: Linear, known: Known) -> None:
    """Put the form of ``expr`` in ``known``: ``expr`` is ``form.to_expr()``, or equal to it with the
    same term objects, and ``form`` is what :func:`sum_form` returned.

    Its form holds the positive terms of ``form``, then its negative ones, each with its
    coefficient, and its constant: each term of a :func:`sum_form` is a variable or an expression
    whose own form is that term alone, ``Mul(t, k)`` is ``k * t``, and a sum of distinct terms
    keeps their order (:meth:`Linear.to_expr` writes them so)."""
    if form.coeffs and not isinstance(expr, Var):
        coeffs = tuple(p for p in form.coeffs if p[1] > 0) + tuple(p for p in form.coeffs if p[1] < 0)
        known[id(expr)] = (expr, Linear(coeffs, form.const))


_IMM, _VAR, _ADD, _SUB, _MUL, _FLOORDIV, _FLOORMOD, _OTHER = range(8)
_KINDS: dict[type, int] = {}
"""What :func:`_decompose` does with a node of each class: the ``isinstance`` tests it made on
every node, made once per class (keyed on the class)."""
_INT_DTYPES: dict[str, bool] = {}
""":func:`is_int_dtype` of every dtype seen, keyed on the dtype string."""


def _kind_of(cls: type) -> int:
    bases = ((_IMM, IntImm), (_VAR, Var), (_ADD, Add), (_SUB, Sub), (_MUL, Mul), (_FLOORDIV, FloorDiv))
    kind = next((k for k, base in (*bases, (_FLOORMOD, FloorMod)) if issubclass(cls, base)), _OTHER)
    _KINDS[cls] = kind
    return kind


def _is_int(dtype: str) -> bool:
    found = _INT_DTYPES.get(dtype)
    if found is None:
        found = _INT_DTYPES[dtype] = is_int_dtype(dtype)
    return found


def _plus(la: Linear, lb: Linear, sign: int) -> Linear:
    """``la + sign * lb`` for two forms of :func:`_decompose` (no zero coefficient, no term twice):
    when either has no terms, the other's are kept as they are, which is what :meth:`Linear.of` gives."""
    if not lb.coeffs:
        return Linear(la.coeffs, la.const + sign * lb.const)
    if sign < 0:
        lb = lb.scale(-1)
    if not la.coeffs:
        return Linear(lb.coeffs, la.const + lb.const)
    return la + lb


def _decompose(e: Expr, atoms: bool, known: Known | None = None) -> Linear | None:
    kind = _KINDS.get(type(e))
    if kind is None:
        kind = _kind_of(type(e))
    if kind == _IMM:
        return Linear((), e.value) if _is_int(e.dtype) else None  # type: ignore[attr-defined]
    if not _is_int(e.dtype):
        return None
    if kind == _VAR:
        return Linear(((e, 1),))
    if known is not None:
        hit = known.get(id(e))
        if hit is not None and hit[0] is e:
            return hit[1]
    found = _decompose_op(e, kind, atoms, known) if kind != _OTHER else None
    if found is None and atoms:
        return Linear(((e, 1),))
    return found


def _decompose_op(e: Any, kind: int, atoms: bool, known: Known | None) -> Linear | None:
    if kind <= _MUL:  # +, -, *
        la, lb = _decompose(e.a, atoms, known), _decompose(e.b, atoms, known)
        if la is None or lb is None:
            return None
        if kind == _ADD:
            return _plus(la, lb, 1)
        if kind == _SUB:
            return _plus(la, lb, -1)
        if not la.coeffs:
            return lb.scale(la.const)
        if not lb.coeffs:
            return la.scale(lb.const)
        return None
    if isinstance(e.b, IntImm) and e.b.value != 0:  # // or %
        c = e.b.value
        la = _decompose(e.a, atoms, known)
        if la is None or not la.divisible_by(c):
            return None
        if kind == _FLOORDIV:
            return Linear(tuple((t, k // c) for t, k in la.coeffs), la.const // c)
        return Linear((), la.const % c)
    return None
