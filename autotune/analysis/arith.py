"""The arithmetic analyzer: variable bounds, intervals, proofs and simplification.

>>> from autotune.ir import Range, Var
>>> i, j = Var("i"), Var("j")
>>> str(simplify((i * 4 + j) - i * 4))
'j'
>>> an = Analyzer()
>>> an.bind(j, Range.of(0, 4))
>>> str(an.simplify((i * 4 + j) // 4)), an.can_prove(j < 4)
('i', True)
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any, TypeVar

from autotune.ir import Expr, Range, Var, as_int

from .interval import Interval, eval_interval, interval_of_sum
from .linear import Linear, sum_form
from .rewrite import Simplifier

__all__ = ["Analyzer", "simplify"]

NodeT = TypeVar("NodeT")


class Analyzer:
    """Facts about integer variables (intervals) and what follows from them.

    ``bounds`` maps variables to inclusive intervals; a variable without a bound
    may take any integer value.
    """

    def __init__(self, bounds: Mapping[Var, Interval] | None = None) -> None:
        self.bounds: dict[Var, Interval] = dict(bounds or {})

    def bind(self, var: Var, dom: Range | Interval) -> None:
        """Record that ``var`` lies in ``dom`` (a half-open :class:`Range` or an inclusive :class:`Interval`).

        A range with a symbolic ``min`` or ``extent`` is bounded through the intervals
        of those expressions.
        """
        if isinstance(dom, Interval):
            self.bounds[var] = dom
            return
        lo, ext = as_int(dom.min), as_int(dom.extent)
        if lo is not None and ext is not None:
            self.bounds[var] = Interval(lo, lo + ext - 1)
            return
        low, size = self.interval(dom.min), self.interval(dom.extent)
        top = None if low.hi is None or size.hi is None else low.hi + size.hi - 1
        self.bounds[var] = Interval(low.lo, top)

    @contextmanager
    def scoped(self) -> Iterator[Analyzer]:
        """Undo every :meth:`bind` made inside the ``with`` block when it ends."""
        saved = dict(self.bounds)
        try:
            yield self
        finally:
            self.bounds = saved

    # ---- queries -----------------------------------------------------------
    def interval(self, expr: Expr) -> Interval:
        """An interval holding every value of ``expr`` under the bounds."""
        return eval_interval(expr, self.bounds)

    def interval_of(self, form: Linear) -> Interval:
        return interval_of_sum(form, self.bounds)

    def diff_interval(self, a: Expr, b: Expr) -> Interval | None:
        """The interval of ``a - b`` with common terms cancelled; None unless both are integers."""
        sa, sb = sum_form(a), sum_form(b)
        if sa is None or sb is None:
            return None
        return self.interval_of(sa - sb)

    def can_prove(self, cond: Expr) -> bool:
        """True when ``cond`` (a comparison, ``and``/``or``/``not``) holds for every value in the bounds.

        False means "not proven", not "false".
        """
        return self.interval(self.simplify(cond)).excludes_zero()

    def can_prove_false(self, cond: Expr) -> bool:
        """True when ``cond`` fails for every value in the bounds."""
        iv = self.interval(self.simplify(cond))
        return iv.lo == iv.hi == 0

    # ---- rewriting ---------------------------------------------------------
    def simplify(self, node: NodeT) -> NodeT:
        """``node`` with every expression simplified (an expression, a region, a statement...).

        Inside statements, loop and block variables are bounded by their domains.
        """
        result: Any = Simplifier(self).visit(node)
        return result  # type: ignore[no-any-return]


def simplify(expr: NodeT, bounds: Mapping[Var, Interval] | None = None) -> NodeT:
    """Simplify ``expr`` (or any node) knowing that each variable lies in its interval in ``bounds``."""
    return Analyzer(bounds).simplify(expr)
