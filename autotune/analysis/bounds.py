"""The index set of one buffer dimension, and its relaxation over loop variables.

A :class:`DimBound` is ``[base + lo, base + hi]`` where ``base`` is a
:class:`~autotune.analysis.linear.Linear` form without constant over the variables
that stay symbolic. The :class:`Relaxer` turns an index range such as
``4*ho + hi + rh : +1`` into ``base = ho*4, lo = 0, hi = 5`` when ``hi`` and ``rh``
run over ``[0, 4)`` and ``[0, 3)``. Two bounds with the same base unite exactly.

Quasi-affine parts (``e // c`` and ``e % c`` of affine ``e`` and constant ``c``) are
relaxed too: ``(B + [lo, hi]) // c`` is ``B // c + [lo // c, hi // c]`` when ``c``
divides ``B``, else ``(B + lo) // c + [0, ceil((hi - lo) / c)]`` (possibly one too
large); ``%`` gives a constant range. Anything else is not relaxed: in *strict* mode
(block access regions) it fails, otherwise its interval is used when it is bounded.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from autotune.ir import Expr, FloorDiv, FloorMod, IntImm, Range, Var, as_int, free_vars

from .arith import Analyzer
from .linear import Linear, sum_form

__all__ = ["DimBound", "Relaxer"]


@dataclass(frozen=True, slots=True)
class DimBound:
    """The indices ``base + lo .. base + hi`` (inclusive); ``base`` has no constant part."""

    base: Linear
    lo: int
    hi: int

    @staticmethod
    def make(form: Linear, lo: int, hi: int) -> DimBound:
        return DimBound(form.with_const(0), lo + form.const, hi + form.const)

    def union(self, other: DimBound) -> DimBound | None:
        """The bounding box of both, or None when their bases differ (no constant distance)."""
        if dict(self.base.coeffs) != dict(other.base.coeffs):
            return None
        return DimBound(self.base, min(self.lo, other.lo), max(self.hi, other.hi))

    def to_range(self, dtype: str = "int32") -> Range:
        return Range(self.base.with_const(self.lo).to_expr(dtype), IntImm(self.hi - self.lo + 1, dtype))


def _divisor(term: Expr) -> int | None:
    if isinstance(term, (FloorDiv, FloorMod)):
        c = as_int(term.b)
        return c if c else None
    return None


def quasi_affine(form: Linear) -> bool:
    """True when every term is a variable or ``e // c`` / ``e % c`` of a quasi-affine ``e``."""
    for term, _ in form.coeffs:
        if isinstance(term, Var):
            continue
        inner = sum_form(term.a) if _divisor(term) is not None else None  # type: ignore[attr-defined]
        if inner is None or not quasi_affine(inner):
            return False
    return True


class Relaxer:
    """Bounds of index ranges when the variables of ``domains`` run over their ranges."""

    def __init__(
        self, domains: Mapping[Var, Range], analyzer: Analyzer | None = None, *, strict: bool = False
    ) -> None:
        self.domains = domains
        self.an = analyzer if analyzer is not None else Analyzer()
        self.strict = strict
        self.box = Analyzer(self.an.bounds)  # outer bounds plus the relaxed domains, for intervals
        for var, dom in domains.items():
            self.box.bind(var, dom)

    def mentions(self, node: Expr) -> bool:
        return any(v in self.domains for v in free_vars(node))

    def bound(self, lo: Expr, extent: Expr) -> DimBound | None:
        """The bound of ``[lo, lo + extent)`` with the domains relaxed; None when it cannot be bounded."""
        size = as_int(self.an.simplify(extent))
        if size is None:
            size = self.box.interval(extent).hi
        form = sum_form(self.an.simplify(lo))
        if size is None or form is None:
            return None
        found = self.relax(form)
        if found is None:
            return None
        return DimBound(found.base, found.lo, found.hi + max(size, 1) - 1)

    def relax(self, form: Linear) -> DimBound | None:
        """Relax every term of ``form`` that mentions a relaxed variable."""
        settled, lo, hi = Linear(), form.const, form.const
        pending = form.with_const(0)
        for _ in range(len(self.domains) + 2):
            if pending.is_const:
                return DimBound.make(settled, lo, hi)
            later = Linear()
            for term, k in pending.coeffs:
                part = self._term(term)
                if part is None:
                    return None
                stays, moves, t_lo, t_hi = part
                settled, later = settled + stays.scale(k), later + moves.scale(k)
                lo, hi = lo + min(k * t_lo, k * t_hi), hi + max(k * t_lo, k * t_hi)
            pending = Linear(later.coeffs)
            lo, hi = lo + later.const, hi + later.const
        return None  # domains that refer to each other in a cycle

    def _term(self, term: Expr) -> tuple[Linear, Linear, int, int] | None:
        """``term`` as (settled part, part still to relax, lo, hi) offsets; None if unbounded."""
        if not self.mentions(term):
            if self.strict and not quasi_affine(Linear.term(term)):
                return None
            return Linear.term(term), Linear(), 0, 0
        if isinstance(term, Var):
            dom = self.domains[term]
            start = sum_form(dom.min)
            if start is not None and not quasi_affine(start):
                # a start the rolling buffer made conditional (``select(first, 0, 2)``): the loop
                # runs within [lowest start, highest last value], both bounded by intervals
                return self._var_by_interval(dom)
            size = as_int(dom.extent)
            if size is None:
                size = self.box.interval(dom.extent).hi
            if size is None or start is None:
                return None
            return Linear(), start, 0, max(size, 1) - 1
        c = _divisor(term)
        inner = sum_form(term.a) if c is not None else None  # type: ignore[attr-defined]
        relaxed = self.relax(inner) if inner is not None else None
        if relaxed is not None and c is not None:
            if isinstance(term, FloorDiv):
                return self._floordiv(relaxed, c, term.dtype)
            return _floormod(relaxed, c)
        if self.strict:
            return None
        iv = self.box.interval(term)
        if iv.lo is None or iv.hi is None:
            return None
        return Linear(), Linear(), iv.lo, iv.hi

    def _var_by_interval(self, dom: Range) -> tuple[Linear, Linear, int, int] | None:
        """A loop variable over ``dom`` as constant offsets: the lowest value its start takes to
        the highest value its last iteration takes (``start + extent - 1`` simplified first, so a
        start that the extent subtracts cancels); None where either is unbounded."""
        last = self.an.simplify(dom.min + dom.extent - IntImm(1, dom.min.dtype))
        lo, hi = self.box.interval(dom.min).lo, self.box.interval(last).hi
        if lo is None or hi is None:
            return None
        return Linear(), Linear(), lo, max(lo, hi)

    def _floordiv(self, inner: DimBound, c: int, dtype: str) -> tuple[Linear, Linear, int, int]:
        base, lo, hi = inner.base, inner.lo, inner.hi
        if c < 0:  # x // c == (-x) // (-c)
            base, lo, hi, c = -base, -hi, -lo, -c
        if base.divisible_by(c):
            return Linear(tuple((t, k // c) for t, k in base.coeffs)), Linear(), lo // c, hi // c
        first = sum_form(self.an.simplify(FloorDiv(base.with_const(lo).to_expr(dtype), IntImm(c, dtype))))
        assert first is not None
        return first.with_const(0), Linear(), first.const, first.const - (-(hi - lo) // c)


def _floormod(inner: DimBound, c: int) -> tuple[Linear, Linear, int, int]:
    if inner.base.divisible_by(c) and inner.lo // c == inner.hi // c:
        return Linear(), Linear(), inner.lo % c, inner.hi % c
    return (Linear(), Linear(), 0, c - 1) if c > 0 else (Linear(), Linear(), c + 1, 0)
