"""Lower blocks to plain statements (TVM's LowerInitBlock + ConvertBlocksToOpaque + LowerOpaqueBlock).

A block's iter vars are replaced by their bindings, its predicate becomes an
``if``, its ``init`` runs when every reduce iter var is at its first value, and
each allocated buffer becomes an ``Allocate`` of its storage plus a
``DeclBuffer`` around the block's statements. Allocate nodes carry the block's
``candidate_memory_pools`` annotation for that buffer.
"""

from __future__ import annotations

from .. import ir

POOLS_ANNOTATION = "candidate_memory_pools"


def _init_condition(block: ir.Block) -> ir.Expr | None:
    cond: ir.Expr | None = None
    for iv in block.iter_vars:
        if iv.kind == "reduce":
            term = ir.eq(iv.var, iv.dom.min)
            cond = term if cond is None else ir.And(cond, term)
    return cond


class _BlockLowerer(ir.Transformer):
    def __init__(self, pools: dict[str, tuple[str, ...]]) -> None:
        self.pools = pools

    def visit_Block(self, block: ir.Block) -> ir.Stmt:
        body = self.visit(block.body)
        if block.init is not None:
            init = self.visit(block.init)
            cond = _init_condition(block)
            body = ir.seq(init if cond is None else ir.IfThenElse(cond, init), body)
        vmap = {iv.var: b for iv, b in zip(block.iter_vars, block.bindings)}
        stmt: ir.Stmt = ir.substitute(body, vmap)
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
