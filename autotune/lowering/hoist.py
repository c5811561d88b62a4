"""Hoist guards out of loops, so innermost loops carry no branches.

Two rewrites, applied from the innermost loop outwards:

- first-iteration peeling: ``for r: (if r == r0 and c: init); update`` becomes
  ``(if c: init[r := r0]); for r: update`` when ``init`` does not use ``r`` (a
  reduction's initialisation leaves the reduction loops);
- invariant guards: ``for i: if c1 and c2: S`` becomes ``if c1: for i: if c2: S``
  for the conjuncts ``c1`` that do not use ``i`` (tile predicates leave the
  loops they do not depend on).
"""

from __future__ import annotations

from dataclasses import replace

from .. import ir


def _conjuncts(e: ir.Expr) -> list[ir.Expr]:
    if isinstance(e, ir.And):
        return _conjuncts(e.a) + _conjuncts(e.b)
    return [e]


def _conj(terms: list[ir.Expr]) -> ir.Expr:
    out = terms[0]
    for t in terms[1:]:
        out = ir.And(out, t)
    return out


def _guard(terms: list[ir.Expr], stmt: ir.Stmt) -> ir.Stmt:
    return ir.IfThenElse(_conj(terms), stmt) if terms else stmt


def _uses(node: object, var: ir.Var) -> bool:
    return var in ir.free_vars(node)


def _peel_first(f: ir.For) -> ir.Stmt | None:
    body = f.body
    if not isinstance(body, ir.SeqStmt) or len(body.seq) < 2:
        return None
    first = body.seq[0]
    extent = ir.as_int(f.extent)
    if not isinstance(first, ir.IfThenElse) or first.else_case is not None or extent is None or extent <= 0:
        return None
    terms = _conjuncts(first.condition)
    is_first = [t for t in terms if isinstance(t, ir.EQ) and t.a is f.loop_var and t.b == f.min]
    rest = [t for t in terms if not any(t is s for s in is_first)]
    if not is_first or _uses(first.then_case, f.loop_var) or any(_uses(t, f.loop_var) for t in rest):
        return None
    return ir.seq(_guard(rest, first.then_case), replace(f, body=ir.seq(*body.seq[1:])))


def _hoist_invariant(f: ir.For) -> ir.Stmt | None:
    body = f.body
    if not isinstance(body, ir.IfThenElse) or body.else_case is not None:
        return None
    terms = _conjuncts(body.condition)
    invariant = [t for t in terms if not _uses(t, f.loop_var)]
    if not invariant:
        return None
    variant = [t for t in terms if _uses(t, f.loop_var)]
    return ir.IfThenElse(_conj(invariant), replace(f, body=_guard(variant, body.then_case)))


def _rewrite(f: ir.For) -> ir.Stmt:
    peeled = _peel_first(f)
    if peeled is not None:
        return peeled
    hoisted = _hoist_invariant(f)
    if hoisted is None:
        return f
    assert isinstance(hoisted, ir.IfThenElse) and isinstance(hoisted.then_case, ir.For)
    return replace(hoisted, then_case=_rewrite(hoisted.then_case))


class _Hoist(ir.Transformer):
    def visit_For(self, f: ir.For) -> ir.Stmt:
        return _rewrite(self.generic_visit(f))


def hoist_guards(func: ir.Func) -> ir.Func:
    """Move guards out of the loops they do not depend on (see module doc)."""
    return replace(func, body=_Hoist().visit(func.body))
