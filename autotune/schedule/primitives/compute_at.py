"""Compute location: compute_at, reverse_compute_at, compute_inline, reverse_compute_inline."""

from __future__ import annotations

from dataclasses import replace

from ... import ir
from ...analysis.arith import Analyzer, simplify
from ...analysis.interval import Interval
from ...analysis.region import relax_region, substitute_bindings, union_regions
from ...errors import ScheduleError
from ...ir.names import fresh_name
from ..regions import refresh_regions
from ..tree import all_names, block_path, loop_path, readers_of, replace_stmt, root_block
from .placement import (
    check_not_into_prefetch,
    check_not_tied_to_a_loop,
    check_outside_reduction,
    check_written_before,
    moved_predicate,
)

Result = tuple[ir.Func, tuple[str, ...]]


def scope_root(path: list[ir.Stmt]) -> ir.Stmt:
    """The outermost statement of ``path`` that holds nothing but the block at its end."""
    top = path[-1]
    for stmt in reversed(path[:-1]):
        if isinstance(stmt, ir.For) and stmt.body is top:
            top = stmt
        else:
            break
    return top


def _written_buffer(block: ir.Block, primitive: str) -> ir.Buffer:
    if len(block.writes) != 1:
        raise ScheduleError(primitive, f"block '{block.name}' must write exactly one buffer, it writes {len(block.writes)}")
    return block.writes[0].buffer


def _intermediate(func: ir.Func, buf: ir.Buffer, block: str, primitive: str) -> None:
    if any(p is buf for p in func.params):
        raise ScheduleError(primitive, f"block '{block}' writes '{buf.name}', a function parameter, not an intermediate")


def _identity_dims(block: ir.Block, buf: ir.Buffer, primitive: str) -> list[ir.IterVar]:
    """The spatial iter var that indexes each dimension of ``block``'s write of ``buf``."""
    stores = [s for s in ir.collect(block.body, ir.BufferStore) if s.buffer is buf]
    spatial = {iv.var: iv for iv in block.iter_vars if iv.kind == "spatial"}
    dims: list[ir.IterVar] = []
    for idx in stores[0].indices if stores else ():
        if not isinstance(idx, ir.Var) or idx not in spatial or spatial[idx] in dims:
            raise ScheduleError(primitive, f"block '{block.name}' must write '{buf.name}' at its own spatial iter vars, one per dimension")
        dims.append(spatial[idx])
    if not stores or any(s.indices != stores[0].indices for s in stores):
        raise ScheduleError(primitive, f"block '{block.name}' writes '{buf.name}' at more than one index")
    return dims


def _inner_domains(path: list[ir.Stmt], loop: ir.For) -> dict[ir.Var, ir.Range]:
    """Domains of the loops on ``path`` strictly inside ``loop``."""
    inside = path[path.index(loop) + 1 :]
    return {f.loop_var: ir.Range(f.min, f.extent) for f in inside if isinstance(f, ir.For)}


def _outer_bounds(path: list[ir.Stmt], loop: ir.For) -> Analyzer:
    an = Analyzer()
    for f in path[: path.index(loop) + 1]:
        if isinstance(f, ir.For):
            lo, ext = ir.as_int(f.min), ir.as_int(f.extent)
            if lo is not None and ext is not None:
                an.bind(f.loop_var, Interval(lo, lo + ext - 1))
    return an


def _later_writers(func: ir.Func, producer: ir.Block, buf: ir.Buffer) -> list[ir.Block]:
    """Blocks after ``producer`` that also write ``buf`` (the update of a decomposed reduction)."""
    order = list(ir.collect(func.body, ir.Block))
    start = next(k for k, b in enumerate(order) if b is producer)
    return [b for b in order[start + 1 :] if any(w.buffer is buf for w in b.writes)]


def _consumed_region(func: ir.Func, producer: ir.Block, buf: ir.Buffer, loop: ir.For, loop_name: str, primitive: str) -> ir.BufferRegion:
    for writer in _later_writers(func, producer, buf):
        if loop not in block_path(func, writer.name, primitive):
            raise ScheduleError(
                primitive,
                f"block '{writer.name}' also writes '{buf.name}' after '{producer.name}' and is not under loop '{loop_name}': "
                f"computed there, '{producer.name}' would run after it",
            )
    loop_stmt_path = loop_path(func, loop_name, primitive)
    region: ir.BufferRegion | None = None
    users = [*readers_of(func, buf), *(b for b in _later_writers(func, producer, buf) if any(r.buffer is buf for r in b.reads))]
    for consumer in users:
        path = block_path(func, consumer.name, primitive)
        if loop not in path:
            raise ScheduleError(primitive, f"block '{consumer.name}' reads '{buf.name}' but is not under loop '{loop_name}'")
        for r in consumer.reads:
            if r.buffer is buf:
                relaxed = relax_region(substitute_bindings(r, consumer), _inner_domains(path, loop))
                region = relaxed if region is None else union_regions(region, relaxed)
    if region is None:
        raise ScheduleError(primitive, f"no block under loop '{loop_name}' reads '{buf.name}'")
    del loop_stmt_path
    return region


def _regenerate(
    func: ir.Func,
    block: ir.Block,
    region: ir.BufferRegion,
    dims: list[ir.IterVar],
    target_path: list[ir.Stmt],
    old_names: dict[ir.Var, str],
    primitive: str,
) -> ir.Stmt:
    """A new loop nest for ``block`` covering ``region`` (spatial dims) and its full reduce domains,
    to go under the last loop of ``target_path``."""
    target = target_path[-1]
    assert isinstance(target, ir.For)
    an = _outer_bounds(target_path, target)
    taken = all_names(func)
    bindings: dict[ir.Var, ir.Expr] = {}
    loops: list[tuple[ir.Var, int]] = []
    conds: list[ir.Expr] = []
    for iv, rng in zip(dims, region.region):
        extent = ir.as_int(simplify(rng.extent))
        if extent is None:
            raise ScheduleError(primitive, f"the region of '{region.buffer.name}' needed under the loop has a non-constant extent {rng.extent}")
        lo = simplify(rng.min)
        dom_lo, dom_hi = ir.as_int(iv.dom.min), ir.as_int(simplify(ir.Add(iv.dom.min, iv.dom.extent)))
        first = ir.as_int(lo)
        if first is not None and dom_lo is not None and dom_hi is not None:
            # a constant region (the same under every iteration of the loop): clip it to the
            # domain instead of guarding it, so a padded consumer's producer has no predicate
            first, last = max(first, dom_lo), min(first + extent, dom_hi)
            if last <= first:
                raise ScheduleError(primitive, f"the region of '{region.buffer.name}' needed under the loop lies outside the block's domain")
            lo, extent = ir.const(first), last - first
        if extent == 1:
            value = lo
        else:
            var = ir.Var(fresh_name(taken, old_names.get(iv.var, "ax")))
            loops.append((var, extent))
            value = simplify(ir.Add(lo, var))
        bindings[iv.var] = value
        box = an.interval(lo)
        if box.lo is None or dom_lo is None or box.lo < dom_lo:
            conds.append(ir.LE(iv.dom.min, value))
        box_hi = an.interval(simplify(ir.Add(lo, ir.const(extent - 1))))
        if box_hi.hi is None or dom_hi is None or box_hi.hi >= dom_hi:
            conds.append(ir.LT(value, simplify(ir.Add(iv.dom.min, iv.dom.extent))))
    for iv in block.iter_vars:
        if iv.kind == "reduce":
            var = ir.Var(fresh_name(taken, iv.var.name.removeprefix("v_")))
            loops.append((var, -1))
            bindings[iv.var] = var
    scope = {f.loop_var for f in target_path if isinstance(f, ir.For)} | {var for var, _ in loops}
    kept = moved_predicate(block, bindings, scope, primitive)
    pred = _conj([*kept, *conds]) if kept or conds else ir.TRUE
    new_block = replace(block, bindings=tuple(bindings[iv.var] for iv in block.iter_vars), predicate=pred)
    reduce_doms = {bindings[iv.var]: iv.dom for iv in block.iter_vars if iv.kind == "reduce"}
    stmt: ir.Stmt = new_block
    for var, extent in reversed(loops):
        if extent >= 0:
            stmt = ir.For(var, ir.const(0), ir.const(extent), ir.ForKind.SERIAL, stmt)
        else:
            dom = reduce_doms[var]
            stmt = ir.For(var, dom.min, dom.extent, ir.ForKind.SERIAL, stmt)
    return stmt


def _is_true(e: ir.Expr) -> bool:
    return isinstance(e, ir.IntImm) and e.value == 1


def _conj(conds: list[ir.Expr]) -> ir.Expr:
    out = conds[0]
    for c in conds[1:]:
        out = ir.And(out, c)
    return out


def _old_loop_names(path: list[ir.Stmt], top: ir.Stmt, block: ir.Block) -> dict[ir.Var, str]:
    """The name of the loop each spatial iter var was bound to, to reuse for its new loop."""
    own = {s.loop_var for s in path[path.index(top) :] if isinstance(s, ir.For)}
    return {
        iv.var: b.name
        for iv, b in zip(block.iter_vars, block.bindings)
        if iv.kind == "spatial" and isinstance(b, ir.Var) and b in own
    }


def compute_at(func: ir.Func, block: str, loop: str) -> Result:
    """Compute producer ``block`` under ``loop``, only the region its consumers there read.

    ``for h in 130: B`` then ``for ho in 32: for hi in 4: C`` becomes
    ``for ho in 32: (for h in 6: B at ho*4 + h); for hi in 4: C`` (3x3 pool: 4 rows need 6).
    """
    root_block(func)
    path = block_path(func, block, "compute_at")
    producer = path[-1]
    assert isinstance(producer, ir.Block)
    buf = _written_buffer(producer, "compute_at")
    _intermediate(func, buf, block, "compute_at")
    check_not_tied_to_a_loop(func, producer, "compute_at")
    lpath = loop_path(func, loop, "compute_at")
    target = lpath[-1]
    assert isinstance(target, ir.For)
    if target in path:
        raise ScheduleError("compute_at", f"loop '{loop}' encloses block '{block}' itself")
    dims = _identity_dims(producer, buf, "compute_at")
    if producer.init is None and any(r.buffer is buf for r in producer.reads):
        raise ScheduleError(
            "compute_at",
            f"block '{block}' accumulates into '{buf.name}' and its init is a block of its own (decompose_reduction): "
            "the elements that consumers' tiles share would be accumulated again; compute_at before decompose_reduction",
        )
    check_not_into_prefetch(func, producer, loop, "compute_at")
    top = scope_root(path)
    region = _consumed_region(func, producer, buf, target, loop, "compute_at")
    names = _old_loop_names(path, top, producer)
    removed = replace_stmt(func, top, None)
    target = loop_path(removed, loop, "compute_at")[-1]  # type: ignore[assignment]
    assert isinstance(target, ir.For)
    nest = _regenerate(removed, producer, region, dims, loop_path(removed, loop, "compute_at"), names, "compute_at")
    return replace_stmt(removed, target, replace(target, body=ir.seq(nest, target.body))), ()


def reverse_compute_at(func: ir.Func, block: str, loop: str) -> Result:
    """Compute consumer ``block`` under ``loop``, over the region its producer writes there.

    The consumer must read the produced buffer at its own spatial iter vars (elementwise).
    """
    root_block(func)
    path = block_path(func, block, "reverse_compute_at")
    consumer = path[-1]
    assert isinstance(consumer, ir.Block)
    check_not_tied_to_a_loop(func, consumer, "reverse_compute_at")
    lpath = loop_path(func, loop, "reverse_compute_at")
    target = lpath[-1]
    assert isinstance(target, ir.For)
    if target in path:
        raise ScheduleError("reverse_compute_at", f"loop '{loop}' encloses block '{block}' itself")
    produced = [b for b in ir.collect(target, ir.Block) for w in b.writes if any(r.buffer is w.buffer for r in consumer.reads)]
    if not produced:
        raise ScheduleError("reverse_compute_at", f"no block under loop '{loop}' produces a buffer that '{block}' reads")
    for p in produced:
        check_outside_reduction(func, p, block, loop)
    check_written_before(func, consumer, target, loop)
    check_not_into_prefetch(func, consumer, loop, "reverse_compute_at")
    producer = produced[0]
    buf = next(w.buffer for w in producer.writes if any(r.buffer is w.buffer for r in consumer.reads))
    dims = _read_identity_dims(consumer, buf)
    ppath = block_path(func, producer.name, "reverse_compute_at")
    region = relax_region(substitute_bindings(producer.writes[0], producer), _inner_domains(ppath, target))
    top = scope_root(path)
    names = _old_loop_names(path, top, consumer)
    removed = replace_stmt(func, top, None)
    target = loop_path(removed, loop, "reverse_compute_at")[-1]  # type: ignore[assignment]
    assert isinstance(target, ir.For)
    nest = _regenerate(removed, consumer, region, dims, loop_path(removed, loop, "reverse_compute_at"), names, "reverse_compute_at")
    return replace_stmt(removed, target, replace(target, body=ir.seq(target.body, nest))), ()


def _read_identity_dims(block: ir.Block, buf: ir.Buffer, primitive: str = "reverse_compute_at") -> list[ir.IterVar]:
    loads = [ld for ld in ir.collect(block.body, ir.BufferLoad) if ld.buffer is buf]
    spatial = {iv.var: iv for iv in block.iter_vars if iv.kind == "spatial"}
    if not loads or any(ld.indices != loads[0].indices for ld in loads):
        raise ScheduleError(primitive, f"block '{block.name}' must read '{buf.name}' at one index")
    dims = []
    for idx in loads[0].indices:
        if not isinstance(idx, ir.Var) or idx not in spatial or spatial[idx] in dims:
            raise ScheduleError(primitive, f"block '{block.name}' must read '{buf.name}' at its own spatial iter vars (elementwise)")
        dims.append(spatial[idx])
    if len(dims) != len(spatial):
        raise ScheduleError(primitive, f"block '{block.name}' has spatial axes that do not index '{buf.name}'")
    return dims


def _remove_alloc(func: ir.Func, buf: ir.Buffer) -> ir.Func:
    class _Drop(ir.Transformer):
        def visit_Block(self, b: ir.Block) -> ir.Block:
            b = self.generic_visit(b)
            if any(a is buf for a in b.alloc_buffers):
                b = replace(b, alloc_buffers=tuple(a for a in b.alloc_buffers if a is not buf))
            return b

    return replace(func, body=_Drop().visit(func.body))


def compute_inline(func: ir.Func, block: str) -> Result:
    """Inline an elementwise producer into its consumers and drop its buffer.

    ``B[i] = f(A[i]); C[i] = g(B[i])`` becomes ``C[i] = g(f(A[i]))``.
    """
    root_block(func)
    path = block_path(func, block, "compute_inline")
    producer = path[-1]
    assert isinstance(producer, ir.Block)
    buf = _written_buffer(producer, "compute_inline")
    _intermediate(func, buf, block, "compute_inline")
    if producer.init is not None or any(iv.kind == "reduce" for iv in producer.iter_vars):
        raise ScheduleError("compute_inline", f"block '{block}' is a reduction")
    if not isinstance(producer.body, ir.BufferStore):
        raise ScheduleError("compute_inline", f"block '{block}' must be a single store")
    check_not_tied_to_a_loop(func, producer, "compute_inline")
    others = [b.name for b in ir.collect(func.body, ir.Block) if b is not producer and any(w.buffer is buf for w in b.writes)]
    if others:
        raise ScheduleError("compute_inline", f"'{buf.name}' is also written by {others}: inlined, their writes would be lost")
    dims = _identity_dims(producer, buf, "compute_inline")
    store = producer.body
    consumers = readers_of(func, buf)

    class _Inline(ir.Transformer):
        def visit_BufferLoad(self, ld: ir.BufferLoad) -> ir.Expr:
            ld = self.generic_visit(ld)
            if ld.buffer is not buf:
                return ld
            return ir.substitute(store.value, {iv.var: idx for iv, idx in zip(dims, ld.indices)})

    out = replace_stmt(func, scope_root(path), None)
    for c in consumers:
        c_now = block_path(out, c.name, "compute_inline")[-1]
        assert isinstance(c_now, ir.Block)
        new = refresh_regions(_Inline().visit(c_now))
        out = replace_stmt(out, c_now, new)
    return _remove_alloc(out, buf), ()


def reverse_compute_inline(func: ir.Func, block: str) -> Result:
    """Inline an elementwise consumer into its producer: ``B[i] = f(A[i]); C[i] = g(B[i])`` → ``C[i] = g(f(A[i]))``."""
    root_block(func)
    path = block_path(func, block, "reverse_compute_inline")
    consumer = path[-1]
    assert isinstance(consumer, ir.Block)
    if consumer.init is not None or any(iv.kind == "reduce" for iv in consumer.iter_vars):
        raise ScheduleError("reverse_compute_inline", f"block '{block}' is a reduction")
    if not isinstance(consumer.body, ir.BufferStore):
        raise ScheduleError("reverse_compute_inline", f"block '{block}' must be a single store")
    inter = [r.buffer for r in consumer.reads if not any(p is r.buffer for p in func.params)]
    if len(inter) != 1:
        raise ScheduleError("reverse_compute_inline", f"block '{block}' must read exactly one intermediate buffer, it reads {len(inter)}")
    buf = inter[0]
    producers = [b for b in ir.collect(func.body, ir.Block) if any(w.buffer is buf for w in b.writes)]
    if len(producers) != 1 or len(readers_of(func, buf)) != 1:
        raise ScheduleError("reverse_compute_inline", f"'{buf.name}' must have one producer and one consumer")
    producer = producers[0]
    if producer.init is not None or any(iv.kind == "reduce" for iv in producer.iter_vars):
        raise ScheduleError("reverse_compute_inline", f"producer '{producer.name}' is a reduction")
    check_not_tied_to_a_loop(func, producer, "reverse_compute_inline")
    c_dims = _read_identity_dims(consumer, buf, "reverse_compute_inline")
    out_buf = _written_buffer(consumer, "reverse_compute_inline")
    p_dims = _identity_dims(producer, buf, "reverse_compute_inline")
    assert isinstance(producer.body, ir.BufferStore)
    cstore = consumer.body
    to_p = {c.var: p.var for c, p in zip(c_dims, p_dims)}
    value = ir.substitute(cstore.value, to_p)

    class _Fold(ir.Transformer):
        def visit_BufferLoad(self, ld: ir.BufferLoad) -> ir.Expr:
            return producer.body.value if ld.buffer is buf else self.generic_visit(ld)  # type: ignore[union-attr]

    new_store = ir.BufferStore(out_buf, _Fold().visit(value), tuple(ir.substitute(i, to_p) for i in cstore.indices))
    new_producer = refresh_regions(replace(producer, name=producer.name, body=new_store))
    out = replace_stmt(func, scope_root(path), None)
    p_now = block_path(out, producer.name, "reverse_compute_inline")[-1]
    out = replace_stmt(out, p_now, new_producer)
    return _remove_alloc(out, buf), ()
