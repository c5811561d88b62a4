"""Simplify a lowered function: every expression, dead branches and trivial loops.

Expressions (indices, values, conditions, loop bounds, allocation extents) go
through :class:`autotune.analysis.arith.Analyzer` with each loop variable bound
to its range, so inside ``for i in range(4)`` the condition ``i < 4`` is
``True``. Then ``if True: s`` becomes ``s``, an ``if`` whose condition is
provably false becomes its ``else`` (or nothing), and a loop of extent 1 becomes
its body with the loop variable replaced by the loop's min.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from .. import ir
from ..analysis.arith import Analyzer
from ..analysis.rewrite import Simplifier

NOTHING = ir.SeqStmt(())


def _is_nothing(s: ir.Stmt | None) -> bool:
    return s is None or (isinstance(s, ir.SeqStmt) and not s.seq)


class _FuncSimplifier(Simplifier):
    """The expression simplifier plus statement rules; a removed statement becomes :data:`NOTHING`."""

    def visit_For(self, s: ir.For) -> ir.Stmt:  # type: ignore[override]
        lo, extent = self.visit(s.min), self.visit(s.extent)
        n = ir.as_int(extent)
        if n is not None and n <= 0:
            return NOTHING
        if n == 1:
            body = self.visit(ir.substitute(s.body, {s.loop_var: lo}))
            if ir.ann_get(s.annotations, ir.VECTORIZER_ATTR) is None or _is_nothing(body):
                return body  # type: ignore[no-any-return]
            # it carries a vectoriser, so its nest is outlined: the loop stays, its variable goes
            return replace(s, min=lo, extent=extent, body=body)
        with self.an.scoped():
            self.an.bind(s.loop_var, ir.Range(lo, extent))
            body = self.visit(s.body)
        if _is_nothing(body):
            return NOTHING
        if lo is s.min and extent is s.extent and body is s.body:
            return s
        return replace(s, min=lo, extent=extent, body=body)

    def visit_IfThenElse(self, s: ir.IfThenElse) -> ir.Stmt:
        cond = self.visit(s.condition)
        value = ir.as_int(cond) if isinstance(cond, ir.IntImm) else None
        if value is not None:
            taken = s.then_case if value else s.else_case
            return NOTHING if taken is None else self.visit(taken)  # type: ignore[no-any-return]
        then = self.visit(s.then_case)
        other = self.visit(s.else_case) if s.else_case is not None else None
        if _is_nothing(other):
            other = None
        if _is_nothing(then):
            if other is None:
                return NOTHING
            return ir.IfThenElse(self.visit(ir.Not(cond)), other)
        if cond is s.condition and then is s.then_case and other is s.else_case:
            return s
        return ir.IfThenElse(cond, then, other)

    def visit_SeqStmt(self, s: ir.SeqStmt) -> ir.Stmt:
        items = [self.visit(x) for x in s.seq]
        if all(a is b for a, b in zip(items, s.seq)):
            return s
        kept = [x for x in items if not _is_nothing(x)]
        return ir.seq(*kept) if kept else NOTHING


def simplify_func(func: ir.Func) -> ir.Func:
    """``func`` with every expression simplified, dead ``if``s dropped and loops of extent 1 unrolled."""
    body: Any = _FuncSimplifier(Analyzer()).visit(func.body)
    return replace(func, body=body if not _is_nothing(body) else ir.Evaluate(ir.const(0)))
