"""Hoist guards out of loops, so innermost loops carry no branches.

Two rewrites, applied from the innermost loop outwards:

- first-iteration peeling: ``for r: (if r == r0 and c: init); update`` becomes
  ``(if c: init); for r: update`` when ``init`` does not use ``r`` (a reduction's
  initialisation leaves the reduction loops), also when ``init`` stands in a nest
  of loops of its own (``for r: (for i: for j: if r == r0: acc[i, j] = 0); update``:
  a register tile's inits leave every reduction loop above them in turn); and
  through a nest of loops inside ``r`` (a register tile ``for k: for i: for j:
  (if k == 0: acc[i, j] = 0); acc[i, j] += ...``: the inits' nest moves before
  ``for k``) when every access to the initialised buffer in the updates is the
  initialised element;
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


def _strip_first(stmt: ir.Stmt, f: ir.For) -> ir.Stmt | None:
    """``stmt``, a nest of loops (and of guards that do not test ``f``) around ``if f.var == min and
    c: S``, with the test on ``f`` dropped.

    None unless the loops' bounds, ``c`` and ``S`` do not use ``f``'s variable: the nest then does
    on ``f``'s first iteration exactly what it would do just before ``f``, and nothing otherwise.
    """
    if isinstance(stmt, ir.For):
        if _uses(stmt.min, f.loop_var) or _uses(stmt.extent, f.loop_var):
            return None
        inner = _strip_first(stmt.body, f)
        return None if inner is None else replace(stmt, body=inner)
    if not isinstance(stmt, ir.IfThenElse) or stmt.else_case is not None:
        return None
    terms = _conjuncts(stmt.condition)
    is_first = [t for t in terms if isinstance(t, ir.EQ) and t.a is f.loop_var and t.b == f.min]
    rest = [t for t in terms if not any(t is s for s in is_first)]
    if not is_first and not _uses(stmt.condition, f.loop_var):
        # a guard of the nest that does not test f (a strip's halo column): it stays around the init
        inner = _strip_first(stmt.then_case, f)
        return None if inner is None else replace(stmt, then_case=inner)
    if not is_first or _uses(stmt.then_case, f.loop_var) or any(_uses(t, f.loop_var) for t in rest):
        return None
    return _guard(rest, stmt.then_case)


def _peel_first_nest(f: ir.For) -> ir.Stmt | None:
    """``for r: (<loops> if r == r0 and c: init); update`` -> ``(<loops> if c: init); for r: update``.

    The inits of a register tile under a nest of reduction loops (``for rh: for rw: (for x: for o:
    if rh == 0 and rw == 0: acc[x, o] = 0); for rc: ...``) leave each reduction loop in turn, so the
    tile's init ends above the whole reduction (TVM's ``decompose_reduction`` at its outermost loop).
    """
    body = f.body
    extent = ir.as_int(f.extent)
    if not isinstance(body, ir.SeqStmt) or len(body.seq) < 2 or extent is None or extent <= 0:
        return None
    first = _strip_first(body.seq[0], f)
    if first is None:
        return None
    return ir.seq(first, replace(f, body=ir.seq(*body.seq[1:])))


def _split_nest(stmt: ir.Stmt, f: ir.For, nest: tuple[ir.For, ...] = ()) -> tuple[ir.Stmt, ir.Stmt] | None:
    """A perfect nest ``for i: for j: (if f.var == min and c: X[I] = v); updates`` split into
    ``(for i: for j: if c: X[I] = v, for i: for j: updates)``, or None.

    Valid when the inner loops do not depend on ``f``'s variable, ``I`` and ``v`` do
    not either, the init (with ``c``) reads no buffer the updates write, every access
    of ``X`` in the updates is ``X[I]``, and every loop of
    the nest either indexes ``X`` or runs the init on its first iteration only
    (``c`` has ``i == min``): each element's initialisation then only has to come
    before that element's first update. (With a loop ``r`` that does neither, the
    original re-initialises the element on every ``r`` while ``f`` is at its first
    iteration, discarding the updates made since.)
    """
    if isinstance(stmt, ir.For):
        if _uses(stmt.min, f.loop_var) or _uses(stmt.extent, f.loop_var):
            return None
        inner = _split_nest(stmt.body, f, (*nest, stmt))
        if inner is None:
            return None
        return replace(stmt, body=inner[0]), replace(stmt, body=inner[1])
    if isinstance(stmt, ir.IfThenElse) and stmt.else_case is None and not _uses(stmt.condition, f.loop_var):
        # a guard of the nest (a strip's halo column): both halves keep it
        inner = _split_nest(stmt.then_case, f, nest)
        return None if inner is None else (replace(stmt, then_case=inner[0]), replace(stmt, then_case=inner[1]))
    if not isinstance(stmt, ir.SeqStmt) or len(stmt.seq) < 2:
        return None
    first = stmt.seq[0]
    if not isinstance(first, ir.IfThenElse) or first.else_case is not None:
        return None
    init = first.then_case
    terms = _conjuncts(first.condition)
    is_first = [t for t in terms if isinstance(t, ir.EQ) and t.a is f.loop_var and t.b == f.min]
    rest = [t for t in terms if not any(t is s for s in is_first)]
    if not is_first or not isinstance(init, ir.BufferStore) or _uses(init, f.loop_var):
        return None
    if any(_uses(t, f.loop_var) for t in rest):
        return None
    indexed = set().union(*(ir.free_vars(i) for i in init.indices))
    for loop in nest:
        once = any(isinstance(t, ir.EQ) and t.a is loop.loop_var and t.b == loop.min for t in rest)
        if loop.loop_var not in indexed and not once:
            return None
    updates = ir.seq(*stmt.seq[1:])
    for node in ir.collect(updates, (ir.BufferLoad, ir.BufferStore)):
        if node.buffer.data is init.buffer.data and (node.buffer is not init.buffer or node.indices != init.indices):
            return None
    written = {s.buffer.data for s in ir.collect(updates, ir.BufferStore)}
    if any(load.buffer.data in written for load in ir.collect(first, ir.BufferLoad)):
        return None  # the inits would no longer see the updates of the elements before theirs
    return _guard(rest, init), updates


def _peel_nested(f: ir.For) -> ir.Stmt | None:
    """``for k: <nest with the init of a register tile>`` -> the inits' nest, then ``for k``."""
    extent = ir.as_int(f.extent)
    if extent is None or extent <= 0 or not isinstance(f.body, ir.For):
        return None
    split = _split_nest(f.body, f)
    if split is None:
        return None
    return ir.seq(split[0], replace(f, body=split[1]))


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
    peeled = _peel_first_nest(f) or _peel_nested(f)
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
