"""Lower a TE graph to a first loop nest: one Block per compute stage.

Every stage gets one serial loop per axis (spatial axes, then reduce axes) and a
block inside the innermost loop whose iter vars are bound to those loops. The
block's read and write regions come from :mod:`autotune.analysis.region`; a
buffer whose index needs float math falls back to its full extent, listed in the
block annotation ``autotune.full_region`` so the fallback is visible.
"""

from __future__ import annotations

from collections.abc import Sequence

from .. import ir
from ..analysis.region import block_access_regions
from ..ir.names import fresh_name
from .tensor import Reduce, ReduceAxis, Tensor, max_value, min_value

FULL_REGION_ANNOTATION = "autotune.full_region"


def _identity(combiner: str, dtype: str) -> ir.Expr:
    """The initial value of a ``combiner`` reduction in ``dtype``: 0, or the dtype's own lowest or highest value."""
    if combiner == "sum":
        return ir.const(0.0 if ir.is_float(dtype) else 0, dtype)
    return min_value(dtype) if combiner == "max" else max_value(dtype)


def _combine(combiner: str, acc: ir.Expr, value: ir.Expr) -> ir.Expr:
    if combiner == "sum":
        return ir.Add(acc, value)
    return ir.Max(acc, value) if combiner == "max" else ir.Min(acc, value)


def topo_order(outputs: Sequence[Tensor]) -> list[Tensor]:
    """Every tensor reachable from ``outputs``, producers before consumers."""
    order: list[Tensor] = []
    seen: set[int] = set()

    def visit(t: Tensor) -> None:
        if id(t) in seen:
            return
        seen.add(id(t))
        for producer in t.inputs:
            visit(producer)
        order.append(t)

    for t in outputs:
        visit(t)
    return order


def lower_stage(t: Tensor, taken: set[str] | None = None) -> ir.Stmt:
    """The loop nest and block of one compute stage; loop and iter var names avoid ``taken``."""
    assert t.body is not None
    taken = set() if taken is None else taken
    reduce_axes: tuple[ReduceAxis, ...] = t.body.axes if isinstance(t.body, Reduce) else ()
    loops = [ir.Var(fresh_name(taken, a.name)) for a in (*t.axes, *reduce_axes)]
    spatial = [ir.IterVar(ir.Var(fresh_name(taken, "v_" + v.name)), ir.Range.of(0, d), "spatial") for v, d in zip(loops, t.shape)]
    reduce = [
        ir.IterVar(ir.Var(fresh_name(taken, "v_" + v.name)), ir.Range.of(a.lo, a.extent), "reduce")
        for v, a in zip(loops[len(t.axes) :], reduce_axes)
    ]
    iter_vars = spatial + reduce
    vmap: dict[ir.Var, ir.Expr] = {a: iv.var for a, iv in zip((*t.axes, *reduce_axes), iter_vars)}
    out_idx = tuple(iv.var for iv in spatial)
    init = None
    if isinstance(t.body, Reduce):
        source = ir.substitute(t.body.source, vmap)
        body: ir.Stmt = ir.BufferStore(t.buffer, _combine(t.body.combiner, t.buffer[out_idx], source), out_idx)
        init = ir.BufferStore(t.buffer, _identity(t.body.combiner, t.dtype), out_idx)
    else:
        body = ir.BufferStore(t.buffer, ir.substitute(t.body, vmap), out_idx)
    block = ir.Block(t.name, tuple(iter_vars), tuple(loops), body, init=init)
    reads, writes, fallback = block_access_regions(block)
    annotations = ((FULL_REGION_ANNOTATION, fallback),) if fallback else ()
    block = ir.Block(t.name, tuple(iter_vars), tuple(loops), body, reads, writes, init, (), annotations)
    stmt: ir.Stmt = block
    domains = [(0, d) for d in t.shape] + [(a.lo, a.extent) for a in reduce_axes]
    for var, (lo, extent) in reversed(list(zip(loops, domains))):
        stmt = ir.For(var, ir.const(lo), ir.const(extent), ir.ForKind.SERIAL, stmt)
    return stmt


def create_func(inputs: Sequence[Tensor], outputs: Sequence[Tensor], name: str = "main") -> ir.Func:
    """The function computing ``outputs`` from ``inputs``; intermediates are allocated at the root block."""
    order = topo_order(outputs)
    given = {id(t) for t in inputs}
    for t in order:
        if t.is_placeholder and id(t) not in given:
            raise ValueError(f"create_func {name}: placeholder {t.name} is read but not listed in inputs")
    names = [t.name for t in (*inputs, *[t for t in order if not t.is_placeholder])]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ValueError(f"create_func {name}: tensor names must be unique, repeated: {duplicates}")
    out_ids = {id(t) for t in outputs}
    stages = [t for t in order if not t.is_placeholder]
    intermediates = tuple(t.buffer for t in stages if id(t) not in out_ids)
    taken = {t.name for t in order}
    body = ir.seq(*[lower_stage(t, taken) for t in stages])
    root = ir.Block("root", (), (), body, alloc_buffers=intermediates)
    params = tuple(t.buffer for t in inputs) + tuple(t.buffer for t in outputs)
    return ir.Func(name, params, root, num_outputs=len(outputs))
