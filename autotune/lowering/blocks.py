"""Lower blocks to plain statements (TVM's LowerInitBlock + ConvertBlocksToOpaque + LowerOpaqueBlock).

A block's iter vars are replaced by their bindings, its predicate becomes an
``if``, its ``init`` runs when every reduce iter var is at its first value, and
each allocated buffer becomes an ``Allocate`` of its storage plus a
``DeclBuffer`` around the block's statements. Allocate nodes carry the block's
``candidate_memory_pools`` annotation for that buffer.
"""

from __future__ import annotations

from .. import ir
from ..analysis import sum_form

POOLS_ANNOTATION = "candidate_memory_pools"


def _first_iteration(binding: ir.Expr, start: ir.Expr, loops: dict[ir.Var, ir.For]) -> list[ir.Expr]:
    """``binding == start`` as one test per loop when it is one: a binding ``c + sum(a_i * v_i)``
    with every ``a_i > 0``, each ``v_i`` a loop from its ``min`` up, is at its least value only when
    every ``v_i`` is at its ``min``; if that value is ``start``, the test is ``v_i == min_i`` for
    each (a split reduction ``rc_0 * 16 + rc_1 == 0`` becomes ``rc_0 == 0 and rc_1 == 0``, which
    ``hoist_guards`` peels loop by loop)."""
    form, first = sum_form(binding), ir.as_int(start)
    if form is not None and first is not None:
        least, tests = form.const, []
        for term, coeff in form.coeffs:
            loop = loops.get(term) if isinstance(term, ir.Var) else None
            low = None if loop is None else ir.as_int(loop.min)
            if loop is None or low is None or coeff <= 0:
                break
            least += coeff * low
            tests.append(ir.eq(term, loop.min))
        else:
            if least == first:
                return tests
    return [ir.eq(binding, start)]


def _init_condition(block: ir.Block, loops: dict[ir.Var, ir.For]) -> ir.Expr | None:
    """When the block's init runs: every reduce iter var at its first value, said of the loops."""
    cond: ir.Expr | None = None
    for iv, binding in zip(block.iter_vars, block.bindings):
        if iv.kind == "reduce":
            for term in _first_iteration(binding, iv.dom.min, loops):
                cond = term if cond is None else ir.And(cond, term)
    return cond


class _BlockLowerer(ir.Transformer):
    def __init__(self, pools: dict[str, tuple[str, ...]]) -> None:
        self.pools = pools
        self.loops: dict[ir.Var, ir.For] = {}

    def visit_For(self, f: ir.For) -> ir.Stmt:
        self.loops[f.loop_var] = f
        try:
            return self.generic_visit(f)  # type: ignore[no-any-return]
        finally:
            del self.loops[f.loop_var]

    def visit_Block(self, block: ir.Block) -> ir.Stmt:
        vmap = {iv.var: b for iv, b in zip(block.iter_vars, block.bindings)}
        stmt: ir.Stmt = ir.substitute(self.visit(block.body), vmap)
        if block.init is not None:
            init = ir.substitute(self.visit(block.init), vmap)
            cond = _init_condition(block, self.loops)
            stmt = ir.seq(init if cond is None else ir.IfThenElse(cond, init), stmt)
        if not (isinstance(block.predicate, ir.IntImm) and block.predicate.value == 1):
            stmt = ir.IfThenElse(block.predicate, stmt)
        pools = self.pools
        for buf in reversed(block.alloc_buffers):
            stmt = ir.DeclBuffer(buf, stmt)
            ann: ir.Annotations = ()
            if buf.name in pools:
                ann = ir.ann_set(ann, POOLS_ANNOTATION, tuple(pools[buf.name]))
            if buf.scope == ir.REGISTER_SCOPE:
                ann = ir.ann_set(ann, "scope", ir.REGISTER_SCOPE)
            extents = tuple(ir.const(e) for e in buf.physical_shape())
            stmt = ir.Allocate(buf.data, buf.dtype, extents, stmt, ann)
        return stmt


def lower_blocks(func: ir.Func) -> ir.Func:
    """Remove every block; the result has only loops, ifs, stores, allocations and declarations."""
    from dataclasses import replace

    # Candidate pools are keyed by buffer name (names are unique), wherever the
    # annotation sits: passes that move an allocation need not carry it along.
    pools: dict[str, tuple[str, ...]] = {}
    for blk in ir.collect(func.body, ir.Block):
        pools.update(dict(ir.ann_get(blk.annotations, POOLS_ANNOTATION, ())))
    return replace(func, body=_BlockLowerer(pools).visit(func.body))
