"""CompactBufferAllocation: each intermediate shrinks to what one iteration of its site touches.

The site of a buffer is the innermost loop that encloses every block accessing
it (its accesses' lowest common ancestor), lifted above the loop a rolling
buffer rolls over. The buffer keeps, per dimension, the bounding box of the
block regions (explicit ``annotate_buffer_access`` regions included) relaxed over
the loops inside the site, and moves into an allocation block around the site's
body. A buffer whose site lies inside a parallel loop gets one copy per
iteration of that loop (a leading dimension indexed by the loop variable), so
threads never share storage; the memory plan counts every copy. A parallel loop
annotated ``autotune.copy_pad`` (bytes, by ``parallel(loop, copy_pad=...)``) puts
at least that many untouched bytes after each copy, the last one included (padded
strides), so no two threads write within ``copy_pad`` bytes of each other; the
plan counts the padding. A ``local`` buffer whose indices would not be constants
after unrolling (``register_problem``: a ``cache_read``/``cache_write`` into
``local`` whose loops stay serial) becomes an ordinary allocation instead of registers.
A site inside a nest outlined by ``set_vectorizer(mode, loop)`` is lifted above that
loop: the outlined function receives the buffer as an array argument.

An allocation whose storage is also viewed by a ``DeclBuffer`` of another buffer (an
alias, tvm-rfcs 0063: another shape, ``elem_offset`` or dtype) is left whole where it
is: the views' accesses are regions of the views, which map onto the storage through
their own shapes and offsets, so no region of the allocation alone covers them.
"""

from __future__ import annotations

from dataclasses import replace

from .. import ir
from ..analysis.arith import simplify
from ..analysis.region import User, buffer_users, common_loops, compact_box, region_at_site
from ..errors import LoweringError
from ..schedule.primitives.memory import register_problem
from ..schedule.tree import allocating_block, loop_path, replace_stmt
from .blocks import POOLS_ANNOTATION
from .rolling import ALLOC_OUTSIDE


def _site(func: ir.Func, buf: ir.Buffer, outside: str | None) -> tuple[list[User], ir.For | None, list[ir.For]]:
    """Accessing blocks with their paths, the site loop (None: root) and the parallel loops enclosing the site."""
    users = buffer_users(func.body, buf)
    fors = common_loops(users)
    if outside is not None:
        names = [f.loop_var.name for f in fors]
        if outside in names:
            fors = fors[: names.index(outside)]
    outlined = [k for k, f in enumerate(fors) if ir.ann_get(f.annotations, ir.VECTORIZER_ATTR) is not None]
    if outlined and buf.scope != ir.REGISTER_SCOPE:
        fors = fors[: outlined[0]]  # an outlined nest takes arrays as arguments: allocate above it
    site = fors[-1] if fors else None
    return users, site, [f for f in fors if f.kind == ir.ForKind.PARALLEL]


class _Rewrite(ir.Transformer):
    """Replace ``old`` by ``new``, shifting indices by the box offsets and prefixing private copies."""

    def __init__(self, old: ir.Buffer, new: ir.Buffer, offsets: list[ir.Expr], prefix: list[ir.Expr]) -> None:
        self.old, self.new, self.offsets, self.prefix = old, new, offsets, prefix

    def _shift(self, indices: tuple[ir.Expr, ...]) -> tuple[ir.Expr, ...]:
        shifted = [simplify(ir.Sub(i, o)) if ir.as_int(o) != 0 else i for i, o in zip(indices, self.offsets)]
        return (*self.prefix, *shifted)

    def visit_BufferLoad(self, node: ir.BufferLoad) -> ir.Expr:
        node = self.generic_visit(node)
        return ir.BufferLoad(self.new, self._shift(node.indices)) if node.buffer is self.new else node

    def visit_BufferStore(self, node: ir.BufferStore) -> ir.Stmt:
        node = self.generic_visit(node)
        return ir.BufferStore(self.new, node.value, self._shift(node.indices)) if node.buffer is self.new else node

    def visit_BufferRegion(self, node: ir.BufferRegion) -> ir.BufferRegion:
        if node.buffer is not self.old:
            return node
        shifted = [ir.Range(simplify(ir.Sub(r.min, o)), r.extent) for r, o in zip(node.region, self.offsets)]
        return ir.BufferRegion(self.new, (*[ir.Range(p, ir.const(1)) for p in self.prefix], *shifted))

    def visit_buffer(self, buffer: ir.Buffer) -> ir.Buffer:
        return self.new if buffer is self.old else buffer


def _place(func: ir.Func, owner: ir.Block, buf: ir.Buffer, site: ir.For | None) -> ir.Func:
    """Move the allocation of ``buf`` from ``owner`` to an allocation block around ``site``'s body.

    Its ``candidate_memory_pools`` entry is copied to the new block (``lower_blocks`` reads
    it from the block that allocates the buffer); ``owner`` keeps its copy, which
    ``inject_double_buffer`` finds when it moves the allocation back up.
    """
    candidates = dict(ir.ann_get(owner.annotations, POOLS_ANNOTATION, ())).get(buf.name)
    func = replace_stmt(func, owner, replace(owner, alloc_buffers=tuple(a for a in owner.alloc_buffers if a is not buf)))
    if site is None:
        root = func.body
        assert isinstance(root, ir.Block)
        return replace(func, body=_with_alloc(root, buf, candidates))
    site = next(f for f in ir.collect(func.body, ir.For) if f.loop_var is site.loop_var)
    body = site.body
    if not (isinstance(body, ir.Block) and body.name.startswith("alloc_") and not body.iter_vars):
        body = ir.Block(f"alloc_{buf.name}", (), (), body)
    return replace_stmt(func, site, replace(site, body=_with_alloc(body, buf, candidates)))


def _with_alloc(block: ir.Block, buf: ir.Buffer, candidates: tuple[str, ...] | None) -> ir.Block:
    """``block`` also allocating ``buf``, with ``candidates`` as its ``candidate_memory_pools`` if given."""
    ann = block.annotations
    if candidates is not None:
        pools = dict(ir.ann_get(ann, POOLS_ANNOTATION, ()))
        pools[buf.name] = candidates
        ann = ir.ann_set(ann, POOLS_ANNOTATION, tuple(sorted(pools.items())))
    return replace(block, alloc_buffers=(*block.alloc_buffers, buf), annotations=ann)


def compact_one(func: ir.Func, buf: ir.Buffer) -> ir.Func:
    if buf in ir.aliased_buffers(func):
        return func  # viewed through a DeclBuffer: the views' accesses are not regions of buf
    if buf.scope == ir.REGISTER_SCOPE and register_problem(func, buf) is not None:
        # a local buffer made by cache_read/cache_write whose loops were never unrolled: memory, not registers
        demoted = buf.with_(scope="global")
        func, buf = ir.substitute(func, bmap={buf: demoted}), demoted
    owner = allocating_block(func, buf)
    assert owner is not None
    outside = dict(ir.ann_get(owner.annotations, ALLOC_OUTSIDE, ())).get(buf.name)
    users, site, parallel = _site(func, buf, outside)
    if not users:
        return func
    box = compact_box(buf, region_at_site(users, buf, site))
    extents = [e for _, e in box]
    # registers are private to each thread: no per-iteration copies for them
    prefix_loops = parallel if site is not None and buf.scope != ir.REGISTER_SCOPE else []
    if extents == list(buf.const_shape()) and site is None and not prefix_loops:
        return func
    shape = (*[p.extent for p in prefix_loops], *[ir.const(e) for e in extents])
    seps = tuple(s + len(prefix_loops) for s in buf.axis_separators)
    new = buf.with_(shape=tuple(shape), axis_separators=seps)
    new = new.with_(strides=_copy_strides(new, prefix_loops))
    prefix: list[ir.Expr] = [simplify(ir.Sub(p.loop_var, p.min)) for p in prefix_loops]
    func = _Rewrite(buf, new, [o for o, _ in box], prefix).visit(func)
    owner = allocating_block(func, new)
    assert owner is not None
    target = site if not prefix_loops else _parent_loop(func, prefix_loops[0])
    return _place(func, owner, new, target)


def _copy_strides(buf: ir.Buffer, prefix_loops: list[ir.For]) -> tuple[ir.Expr, ...]:
    """Strides padding the private copies of ``buf`` (its leading dimensions, one per loop in
    ``prefix_loops``) by their loops' ``copy_pad``; ``()`` (row-major) when none asks for it.

    A padded dimension's stride is the copy plus the pad, rounded up to a multiple of 64 bytes, so
    every copy starts as aligned as the first; the buffer spans ``shape[0] * strides[0]`` elements,
    so the last copy is followed by its pad too.
    """
    pads = [ir.ann_get(p.annotations, ir.COPY_PAD_ATTR) for p in prefix_loops]
    if not any(pads):
        return ()
    if buf.axis_separators:
        loop = next(p for p, a in zip(prefix_loops, pads) if a).loop_var.name
        raise LoweringError(
            f"compact_buffers: copy_pad on loop '{loop}' cannot pad the copies of banked buffer '{buf.name}' "
            f"(axis separators {[s - len(prefix_loops) for s in buf.axis_separators]}): its copies are banks of their own"
        )
    shape, size = buf.const_shape(), ir.dtype_bytes(buf.dtype)
    strides = [1] * len(shape)
    for k in reversed(range(len(shape))):
        strides[k] = strides[k + 1] * shape[k + 1] if k + 1 < len(shape) else 1
        pad = pads[k] if k < len(pads) else None
        if pad:
            if pad % size or ir.COPY_PAD_UNIT % size:
                raise LoweringError(f"compact_buffers: copy_pad {pad} is not a multiple of the {size}-byte elements of '{buf.name}'")
            unit = ir.COPY_PAD_UNIT // size
            strides[k] = -(-(strides[k] + pad // size) // unit) * unit
    return tuple(ir.const(s) for s in strides)


def _parent_loop(func: ir.Func, loop: ir.For) -> ir.For | None:
    path = loop_path(func, loop.loop_var.name, "compact_buffers")
    fors = [s for s in path[:-1] if isinstance(s, ir.For)]
    return fors[-1] if fors else None


def compact_buffers(func: ir.Func) -> ir.Func:
    """Compact every intermediate allocated by a block."""
    for blk in list(ir.collect(func.body, ir.Block)):
        for buf in blk.alloc_buffers:
            func = compact_one(func, buf)
    return func
