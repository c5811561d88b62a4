"""Cache primitives: cache_read and cache_write (TVM semantics).

Both add an intermediate buffer in a given storage scope, allocated by the root
block, and a copy block named ``<buffer>_<scope>`` with one serial loop per
dimension. The copy block writes its buffer at its own spatial iter vars, so
``compute_at`` can then move it into a consumer's tile.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from ... import ir
from ...errors import ScheduleError
from ...ir.names import fresh_name
from ..regions import refresh_regions
from ..tree import all_names, get_block, root_block, writers_of

Result = tuple[ir.Func, tuple[str, ...]]


def _region_buffer(blk: ir.Block, regions: tuple[ir.BufferRegion, ...], index: int, what: str, primitive: str) -> ir.Buffer:
    if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < len(regions):
        raise ScheduleError(primitive, f"block '{blk.name}' {what} {len(regions)} buffers, buffer_index {index!r} is out of range")
    return regions[index].buffer


def _check_scope(scope: str, primitive: str) -> None:
    if not isinstance(scope, str) or not scope:
        raise ScheduleError(primitive, f"scope must be a non-empty string, got {scope!r}")


def _const_shape(buf: ir.Buffer, primitive: str) -> tuple[int, ...]:
    try:
        return buf.const_shape()
    except ValueError:
        raise ScheduleError(primitive, f"buffer '{buf.name}' has a symbolic shape") from None


def _root_items(root: ir.Block) -> list[ir.Stmt]:
    return list(root.body.seq) if isinstance(root.body, ir.SeqStmt) else [root.body]


def _item_of(items: list[ir.Stmt], blk: ir.Block) -> int:
    """The position of the root-level statement that holds ``blk``."""
    for k, item in enumerate(items):
        if any(b is blk for b in ir.collect(item, ir.Block)):
            return k
    raise ValueError(f"block {blk.name} is not under the root block")


def _cache_buffer(func: ir.Func, buf: ir.Buffer, scope: str, primitive: str) -> ir.Buffer:
    """A fresh intermediate like ``buf`` in ``scope``; its name is also the copy block's."""
    shape = _const_shape(buf, primitive)
    name = fresh_name(all_names(func), f"{buf.name}_{re.sub(r'[^0-9A-Za-z_]', '_', scope)}")
    return ir.decl_buffer(name, shape, buf.dtype, scope=scope)


def _copy_nest(func: ir.Func, src: ir.Buffer, dst: ir.Buffer, name: str) -> ir.Stmt:
    """``for ax0, ax1...: dst[v_ax0, ...] = src[v_ax0, ...]`` in a block called ``name``."""
    taken = all_names(func) | {name}
    loops = [ir.Var(fresh_name(taken, f"ax{k}")) for k in range(src.ndim)]
    ivs = tuple(ir.IterVar(ir.Var(f"v_{v.name}"), ir.Range.of(0, d), "spatial") for v, d in zip(loops, src.shape))
    idx = tuple(iv.var for iv in ivs)
    body = ir.BufferStore(dst, ir.BufferLoad(src, idx), idx)
    stmt: ir.Stmt = refresh_regions(ir.Block(name, ivs, tuple(loops), body))
    for var, dim in reversed(list(zip(loops, src.shape))):
        stmt = ir.For(var, ir.const(0), dim, ir.ForKind.SERIAL, stmt)
    return stmt


class _Redirect(ir.Transformer):
    """Swap ``old`` for ``new`` inside the given blocks and infer their regions again."""

    def __init__(self, blocks: list[ir.Block], old: ir.Buffer, new: ir.Buffer) -> None:
        self.ids = {id(b) for b in blocks}
        self.bmap = {old: new}

    def visit(self, node: Any) -> Any:
        if isinstance(node, ir.Expr):
            return node
        return super().visit(node)

    def visit_Block(self, b: ir.Block) -> ir.Stmt:
        if id(b) in self.ids:
            return refresh_regions(ir.substitute(b, bmap=self.bmap))
        return self.generic_visit(b)  # type: ignore[no-any-return]


def _with_items(root: ir.Block, items: list[ir.Stmt], alloc: ir.Buffer) -> ir.Block:
    return replace(root, body=ir.seq(*items), alloc_buffers=(*root.alloc_buffers, alloc))


def cache_read(func: ir.Func, block: str, buffer_index: int, scope: str = "global") -> Result:
    """Copy buffer ``block.reads[buffer_index]`` into a new ``scope`` buffer read by every reader.

    ``for i: B[i] = A[i] * 2`` becomes
    ``for ax0: A_global[ax0] = A[ax0]`` then ``for i: B[i] = A_global[i] * 2``.
    The copy goes right before the root-level loop nest of the first reader.
    """
    p = "cache_read"
    root_block(func)
    blk = get_block(func, block, p)
    buf = _region_buffer(blk, blk.reads, buffer_index, "reads", p)
    _check_scope(scope, p)
    if any(w.buffer is buf for w in blk.writes):
        raise ScheduleError(p, f"block '{block}' reads and writes '{buf.name}' (it updates it in place); use cache_write")
    new = _cache_buffer(func, buf, scope, p)
    return stage_in(func, buf, new, p), (new.name,)


def stage_in(func: ir.Func, buf: ir.Buffer, new: ir.Buffer, p: str) -> ir.Func:
    """``func`` with every reader of ``buf`` reading ``new`` instead, a copy block (named as ``new``)
    filling it right before the root-level loop nest of the first reader, and ``new`` allocated by
    the root block."""
    root = root_block(func)
    items = _root_items(root)
    readers = [b for b in ir.collect(root.body, ir.Block) if any(r.buffer is buf for r in b.reads)]
    first = min(_item_of(items, r) for r in readers)
    for w in writers_of(func, buf):
        if w.name != "root" and _item_of(items, w) >= first:
            raise ScheduleError(
                p, f"block '{w.name}' writes '{buf.name}' in or after the loop nest of its first reader: a copy made before it would be stale"
            )
    nest = _copy_nest(func, buf, new, new.name)
    redirect = _Redirect(readers, buf, new)
    moved: list[ir.Stmt] = [redirect.visit(s) for s in items]
    return replace(func, body=_with_items(root, [*moved[:first], nest, *moved[first:]], new))


def cache_write(func: ir.Func, block: str, buffer_index: int, scope: str = "global") -> Result:
    """Make ``block`` write a new ``scope`` buffer, copied out to the original after its loop nest.

    ``for i: C[i] = A[i] * 2`` becomes
    ``for i: C_global[i] = A[i] * 2`` then ``for ax0: C[ax0] = C_global[ax0]``.
    """
    p = "cache_write"
    root_block(func)
    blk = get_block(func, block, p)
    buf = _region_buffer(blk, blk.writes, buffer_index, "writes", p)
    _check_scope(scope, p)
    new = _cache_buffer(func, buf, scope, p)
    return stage_out(func, blk, buf, new, p), (new.name,)


def stage_out(func: ir.Func, blk: ir.Block, buf: ir.Buffer, new: ir.Buffer, p: str) -> ir.Func:
    """``func`` with ``blk``, the only writer of ``buf``, writing ``new`` instead, a copy block (named
    as ``new``) copying it out to ``buf`` right after ``blk``'s root-level loop nest, and ``new``
    allocated by the root block."""
    root = root_block(func)
    writers = writers_of(func, buf)
    if len(writers) != 1:
        names = ", ".join(f"'{w.name}'" for w in writers)
        raise ScheduleError(p, f"'{buf.name}' is written by blocks {names}; the copy-out would overwrite all but '{blk.name}'")
    items = _root_items(root)
    k = _item_of(items, blk)
    for other in ir.collect(items[k], ir.Block):
        if other is not blk and any(r.buffer is buf for r in (*other.reads, *other.writes)):
            raise ScheduleError(
                p, f"block '{other.name}' reads '{buf.name}' inside the loop nest of '{blk.name}', before the copy-out would run"
            )
    moved: ir.Stmt = _Redirect([blk], buf, new).visit(items[k])
    nest = _copy_nest(func, new, buf, new.name)
    return replace(func, body=_with_items(root, [*items[:k], moved, nest, *items[k + 1 :]], new))
