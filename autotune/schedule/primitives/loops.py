"""Loop primitives: split, reorder, fuse, parallel, vectorize, unroll."""

from __future__ import annotations

import itertools
from dataclasses import replace
from math import prod

from ... import ir
from ...analysis.arith import simplify
from ...errors import ScheduleError
from ...ir.names import fresh_name
from ..tree import all_names, blocks_under, loop_path, replace_stmt
from .placement import DOUBLE, ROLLING, ROLLING_LOOP

Result = tuple[ir.Func, tuple[str, ...]]


def _const_loop(loop: ir.For, primitive: str) -> int:
    extent = ir.as_int(loop.extent)
    if ir.as_int(loop.min) != 0 or extent is None:
        raise ScheduleError(primitive, f"loop '{loop.loop_var.name}' must start at 0 and have a constant extent")
    return extent


class _Guard(ir.Transformer):
    """Gives each block of ``vmap`` the predicate of its entry."""

    def __init__(self, vmap: dict[ir.Block, ir.Block]) -> None:
        self.vmap = vmap

    def visit_Block(self, b: ir.Block) -> ir.Stmt:
        inner = self.generic_visit(b)
        return replace(inner, predicate=self.vmap[b].predicate) if b in self.vmap else inner


def _add_predicate(stmt: ir.Stmt, cond: ir.Expr) -> ir.Stmt:
    """Guard every block under ``stmt`` with ``cond`` (conjoined with its own predicate)."""
    vmap: dict[ir.Block, ir.Block] = {}
    for b in blocks_under(stmt):
        pred = cond if isinstance(b.predicate, ir.IntImm) and b.predicate.value == 1 else ir.And(b.predicate, cond)
        vmap[b] = replace(b, predicate=pred)
    return _Guard(vmap).visit(stmt)  # type: ignore[no-any-return]


class _SimplifyBindings(ir.Transformer):
    """Simplifies every block's bindings and predicate."""

    def visit_Block(self, b: ir.Block) -> ir.Stmt:
        b = self.generic_visit(b)
        bindings = tuple(simplify(e) for e in b.bindings)
        return replace(b, bindings=bindings, predicate=simplify(b.predicate))


def _simplify_bindings(stmt: ir.Stmt) -> ir.Stmt:
    return _SimplifyBindings().visit(stmt)  # type: ignore[no-any-return]


_TAGGED = {ROLLING_LOOP: "rolling buffer", DOUBLE: "double buffer"}


def _check_no_annotation_names(node: ir.For, primitive: str, keys: tuple[str, ...] = (ROLLING_LOOP, DOUBLE)) -> None:
    """Refuse to rename or move ``node``'s loop when a rolling or double buffer (``keys``) is tagged with its name."""
    name = node.loop_var.name
    for b in blocks_under(node):
        for key in keys:
            what = _TAGGED[key]
            if ir.ann_get(b.annotations, key) == name:
                raise ScheduleError(
                    primitive, f"loop '{name}' carries the {what} of block '{b.name}'; {primitive} it before {what.replace(' ', '_')}"
                )


def _check_not_rolled_rows(func: ir.Func, node: ir.For, primitive: str, sizes: list[int] | None = None) -> None:
    """Refuse to fuse the loop over the rolled dimension of a rolled block (below the loop it rolls over):
    the sliding window starts that loop at the first new row, so it must stay a loop over rows. A split
    of it (``sizes``) must make an outer loop over steps of whole rows: two loops, the inner dividing it."""
    name = node.loop_var.name
    above = {f.loop_var.name for f in loop_path(func, name, primitive)[:-1] if isinstance(f, ir.For)}
    for b in blocks_under(node):
        tied, info = ir.ann_get(b.annotations, ROLLING_LOOP), ir.ann_get(b.annotations, ROLLING)
        if tied is None or info is None or tied not in above:
            continue
        store = next(st for st in ir.collect(b.body, ir.BufferStore) if st.buffer.name == info[0])
        index = ir.substitute(store.indices[info[1]], dict(zip((iv.var for iv in b.iter_vars), b.bindings)))
        if node.loop_var not in ir.free_vars(index):
            continue
        extent = ir.as_int(node.extent)
        if sizes is not None and len(sizes) == 2 and extent is not None and sizes[0] * sizes[1] == extent:
            continue
        how = "" if sizes is None else f"into two loops whose inner one divides its {extent} rows, or "
        raise ScheduleError(
            primitive, f"loop '{name}' runs the rows of block '{b.name}', which keeps a rolling buffer over loop '{tied}'; "
            f"{primitive} it {how}before rolling_buffer"
        )


def split(func: ir.Func, loop: str, factors: tuple[int | None, ...], names: tuple[str, ...] = ()) -> Result:
    """Split a loop into nested loops of the given extents (one may be None: inferred).

    ``for h in range(130)`` with factors [None, 4] becomes
    ``for h_0 in range(33): for h_1 in range(4):`` with ``h = h_0 * 4 + h_1`` and,
    since 4 does not divide 130, the predicate ``h_0 * 4 + h_1 < 130`` on the blocks.
    """
    node = loop_path(func, loop, "split")[-1]
    assert isinstance(node, ir.For)
    extent = _const_loop(node, "split")
    _check_no_annotation_names(node, "split")
    if len(factors) < 2:
        raise ScheduleError("split", f"needs at least two factors, got {list(factors)}")
    if sum(f is None for f in factors) > 1:
        raise ScheduleError("split", "at most one factor may be None")
    for f in factors:
        if f is not None and (not isinstance(f, int) or isinstance(f, bool) or f <= 0):
            raise ScheduleError("split", f"factors must be positive integers, got {f!r} in {list(factors)}")
    known = prod(f for f in factors if f is not None)
    sizes = [f if f is not None else -(-extent // known) for f in factors]
    if prod(sizes) < extent:
        raise ScheduleError("split", f"factors {list(factors)} cover {prod(sizes)} iterations, loop '{loop}' has {extent}")
    _check_not_rolled_rows(func, node, "split", sizes)
    if names and len(names) != len(sizes):
        raise ScheduleError("split", f"{len(names)} names given for {len(sizes)} loops")
    taken = all_names(func)
    new_names = [fresh_name(taken, n) for n in names] if names else [fresh_name(taken, f"{loop}_{k}") for k in range(len(sizes))]
    new_vars = [ir.Var(n) for n in new_names]
    fused: ir.Expr = ir.const(0)
    for v, size in zip(new_vars, sizes):
        fused = fused * size + v
    fused = simplify(fused)
    body = ir.substitute(node.body, {node.loop_var: fused})
    if prod(sizes) != extent:
        body = _add_predicate(body, ir.LT(fused, ir.const(extent)))
    body = _simplify_bindings(body)
    for v, size in reversed(list(zip(new_vars, sizes))):
        body = ir.For(v, ir.const(0), ir.const(size), ir.ForKind.SERIAL, body)
    return replace_stmt(func, node, body), tuple(new_names)


def _chain(func: ir.Func, loops: tuple[str, ...], primitive: str) -> list[ir.For]:
    """The perfect nest of loops from the outermost to the innermost of ``loops``."""
    if len(set(loops)) != len(loops):
        raise ScheduleError(primitive, f"loops repeated in {list(loops)}")
    paths = {name: loop_path(func, name, primitive) for name in loops}
    deepest = max(paths.values(), key=len)
    fors = [s for s in deepest if isinstance(s, ir.For)]
    names = [f.loop_var.name for f in fors]
    for name in loops:
        if name not in names:
            raise ScheduleError(primitive, f"loops {list(loops)} are not nested in one another")
    lo = min(names.index(n) for n in loops)
    hi = max(names.index(n) for n in loops)
    chain = fors[lo : hi + 1]
    for outer, inner in itertools.pairwise(chain):
        if outer.body is not inner:
            raise ScheduleError(primitive, f"loop '{outer.loop_var.name}' has statements besides loop '{inner.loop_var.name}'")
    return chain


def reorder(func: ir.Func, loops: tuple[str, ...]) -> Result:
    """Put ``loops`` in the given order, in the positions they occupy (other loops stay)."""
    chain = _chain(func, loops, "reorder")
    chain_vars = {f.loop_var for f in chain}
    for f in chain:
        if ir.free_vars(f.min) & chain_vars or ir.free_vars(f.extent) & chain_vars:
            raise ScheduleError("reorder", f"the range of loop '{f.loop_var.name}' depends on another loop")
    by_name = {f.loop_var.name: f for f in chain}
    order = iter(loops)
    new_seq = [by_name[next(order)] if f.loop_var.name in loops else f for f in chain]
    for old, new in zip(chain, new_seq):
        if old is not new:
            # the prefetch of a double buffer belongs to the loop just above the staged block
            _check_no_annotation_names(old, "reorder", (DOUBLE,))
    body = chain[-1].body
    for f in reversed(new_seq):
        body = replace(f, body=body)
    return replace_stmt(func, chain[0], body), ()


def fuse(func: ir.Func, loops: tuple[str, ...], name: str | None = None) -> Result:
    """Fuse consecutive perfectly nested loops into one of the product extent."""
    if len(loops) < 2:
        raise ScheduleError("fuse", f"needs at least two loops, got {list(loops)}")
    chain = _chain(func, loops, "fuse")
    if [f.loop_var.name for f in chain] != list(loops):
        raise ScheduleError("fuse", f"loops {list(loops)} must be consecutive and listed outermost first")
    extents = [_const_loop(f, "fuse") for f in chain]
    for f in chain:
        _check_no_annotation_names(f, "fuse")
        _check_not_rolled_rows(func, f, "fuse")
    taken = all_names(func)
    fused_var = ir.Var(fresh_name(taken, name or "_".join(loops) + "_fused"))
    vmap: dict[ir.Var, ir.Expr] = {}
    for k, f in enumerate(chain):
        inner = prod(extents[k + 1 :])
        e: ir.Expr = ir.FloorDiv(fused_var, ir.const(inner)) if inner > 1 else fused_var
        vmap[f.loop_var] = ir.FloorMod(e, ir.const(extents[k])) if k > 0 else e
    body = _simplify_bindings(ir.substitute(chain[-1].body, vmap))
    new = ir.For(fused_var, ir.const(0), ir.const(prod(extents)), ir.ForKind.SERIAL, body)
    return replace_stmt(func, chain[0], new), (fused_var.name,)


def _set_kind(func: ir.Func, loop: str, kind: str, primitive: str) -> Result:
    node = loop_path(func, loop, primitive)[-1]
    assert isinstance(node, ir.For)
    if kind in (ir.ForKind.PARALLEL, ir.ForKind.VECTORIZED):
        for b in blocks_under(node):
            for iv, binding in zip(b.iter_vars, b.bindings):
                if iv.kind == "reduce" and node.loop_var in ir.free_vars(binding):
                    raise ScheduleError(primitive, f"loop '{loop}' binds reduction axis '{iv.var.name}' of block '{b.name}'")
            if ir.ann_get(b.annotations, ROLLING_LOOP) == loop:
                raise ScheduleError(primitive, f"loop '{loop}' carries the rolling buffer of block '{b.name}'")
            if kind == ir.ForKind.PARALLEL and ir.ann_get(b.annotations, DOUBLE) == loop:
                raise ScheduleError(
                    primitive,
                    f"loop '{loop}' fills the double buffer of block '{b.name}': on several threads the prefetch "
                    "of iteration i+1 overwrites the slot that iteration i-1 reads",
                )
    if kind == ir.ForKind.PARALLEL:
        outlined = [f.loop_var.name for f in loop_path(func, loop, primitive) if isinstance(f, ir.For) and ir.ann_get(f.annotations, ir.VECTORIZER_ATTR)]
        if outlined:
            raise ScheduleError(primitive, f"loop '{loop}' is in the nest of loop '{outlined[0]}', outlined by set_vectorizer: an outlined nest runs on one thread")
    if kind == ir.ForKind.UNROLLED and ir.as_int(node.extent) is None:
        raise ScheduleError(primitive, f"loop '{loop}' has no constant extent")
    return replace_stmt(func, node, replace(node, kind=kind)), ()


def parallel(func: ir.Func, loop: str, copy_pad: int | None = None) -> Result:
    """Run the iterations of ``loop`` on several threads (``prange``).

    Each iteration gets its own copy of a buffer computed under the loop (compaction);
    ``copy_pad`` (bytes, a multiple of 64) leaves at least that many untouched bytes after
    each copy, so no two threads write within ``copy_pad`` bytes of each other (on the 2-core
    hosts two threads writing within 4 KiB of each other ran up to 1.5x slower:
    ``experiments/copy_pad.py``).
    The memory plan counts the padding.
    """
    if copy_pad is not None and (copy_pad <= 0 or copy_pad % ir.COPY_PAD_UNIT):
        raise ScheduleError("parallel", f"copy_pad must be a positive multiple of {ir.COPY_PAD_UNIT} bytes, got {copy_pad}")
    func, names = _set_kind(func, loop, ir.ForKind.PARALLEL, "parallel")
    if copy_pad is not None:
        node = loop_path(func, loop, "parallel")[-1]
        assert isinstance(node, ir.For)
        func = replace_stmt(func, node, replace(node, annotations=ir.ann_set(node.annotations, ir.COPY_PAD_ATTR, copy_pad)))
    return func, names


def vectorize(func: ir.Func, loop: str) -> Result:
    """Mark ``loop`` for vector code (a contiguous innermost loop in the kernel)."""
    return _set_kind(func, loop, ir.ForKind.VECTORIZED, "vectorize")


def unroll(func: ir.Func, loop: str) -> Result:
    """Unroll ``loop`` into straight-line code."""
    return _set_kind(func, loop, ir.ForKind.UNROLLED, "unroll")
