"""Padding primitives: hoist_padding.

``hoist_padding(block, buffer_index)`` moves the padding that ``block`` writes
inline around its reads of a buffer (a select on the buffer's bounds, see
:mod:`autotune.analysis.padding`) into a stage of its own: a block
``<buffer>_pad`` that writes a padded copy holding every element ``block`` reads,
placed before the root-level loop nest of ``block``; ``block`` then reads the copy
with no select (TOPI's separate pad stage)::

    for y, x, o, rh, rw, rc:                          for ax0, ax1, ax2:
      conv: ... select(0 <= y+rh-1 < H and ...,         data_pad: data_pad[ax0, ax1, ax2] =
                       data[y+rh-1, x+rw-1, rc], 0)  ->     select(0 <= ax0-1 < H and ..., data[ax0-1, ax1-1, ax2], 0)
                                                      for y, x, o, rh, rw, rc:
                                                        conv: ... data_pad[y+rh, x+rw, rc] ...

An activation applied to the value inside the select moves into the copy
with it. The copy writes its buffer at its own spatial iter vars, so
``compute_at`` can place it in a consumer's tile, where compaction shrinks it
to the tile's window. Without the select in its reduction, a register tile
of ``block`` loads each operand with one plain load (no clamp, no select).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ... import ir
from ...analysis import simplify
from ...analysis.padding import PaddedRead, padded_read
from ...errors import ScheduleError
from ...ir import expr as E
from ...ir.names import fresh_name
from ..regions import refresh_regions
from ..tree import all_names, get_block, root_block, writers_of
from .cache import _item_of, _region_buffer, _root_items, _with_items

Result = tuple[ir.Func, tuple[str, ...]]

P = "hoist_padding"


def _pad_nest(func: ir.Func, read: PaddedRead, dst: ir.Buffer) -> ir.Stmt:
    """``for ax...: dst[v] = select(bounds of v + lo, value at v + lo, pad)`` in a block named ``dst``."""
    taken = all_names(func) | {dst.name}
    loops = [ir.Var(fresh_name(taken, f"ax{k}")) for k in range(len(read.shape))]
    ivs = tuple(ir.IterVar(ir.Var(f"v_{v.name}"), ir.Range.of(0, n), "spatial") for v, n in zip(loops, read.shape))
    src = tuple(simplify(iv.var + lo) if lo else iv.var for iv, lo in zip(ivs, read.lo))
    extents = read.buffer.const_shape()
    conds: list[E.Expr] = []
    for d, index in enumerate(src):
        if read.low[d]:
            conds.append(index >= 0)
        if read.high[d]:
            conds.append(index < extents[d])
    value = read.value_at(src)
    if conds:
        cond = conds[0]
        for c in conds[1:]:
            cond = E.And(cond, c)
        value = E.Select(cond, value, read.pad)
    body = ir.BufferStore(dst, value, tuple(iv.var for iv in ivs))
    stmt: ir.Stmt = refresh_regions(ir.Block(dst.name, ivs, tuple(loops), body))
    for var, n in reversed(list(zip(loops, read.shape))):
        stmt = ir.For(var, ir.const(0), ir.const(n), ir.ForKind.SERIAL, stmt)
    return stmt


class _Unpad(ir.Transformer):
    """In block ``target``: the padding select replaced by a load of the padded copy."""

    def __init__(self, target: ir.Block, select: E.Select, load: E.BufferLoad) -> None:
        self.target, self.select, self.load = target, select, load
        self.inside = False

    def visit(self, node: Any) -> Any:
        if isinstance(node, E.Select) and self.inside and node == self.select:
            return self.load
        if isinstance(node, ir.Expr) and not self.inside:
            return node
        return super().visit(node)

    def visit_Block(self, b: ir.Block) -> ir.Stmt:
        if b is not self.target:
            return self.generic_visit(b)  # type: ignore[no-any-return]
        self.inside = True
        try:
            return refresh_regions(replace(b, body=self.visit(b.body)))
        finally:
            self.inside = False


def hoist_padding(func: ir.Func, block: str, buffer_index: int) -> Result:
    """Compute ``block``'s inline padding of ``block.reads[buffer_index]`` as a padded copy first.

    Refused when the block reads the buffer other than through one padding
    select (see :func:`autotune.analysis.padding.padded_read`), or when the
    buffer is written in or after the loop nest that holds ``block`` (the copy,
    made before that nest, would miss those writes).
    """
    root = root_block(func)
    blk = get_block(func, block, P)
    buf = _region_buffer(blk, blk.reads, buffer_index, "reads", P)
    if any(w.buffer is buf for w in blk.writes):
        raise ScheduleError(P, f"block '{block}' reads and writes '{buf.name}'")
    try:
        read = padded_read(blk, buf)
    except ValueError as err:
        raise ScheduleError(P, f"block '{block}': {err}") from None
    items = _root_items(root)
    k = _item_of(items, blk)
    for w in writers_of(func, buf):
        if w.name != "root" and _item_of(items, w) >= k:
            raise ScheduleError(
                P, f"block '{w.name}' writes '{buf.name}' in or after the loop nest of '{block}': a copy made before it would be stale"
            )
    name = fresh_name(all_names(func), f"{buf.name}_pad")
    dst = ir.decl_buffer(name, read.shape, read.value.dtype)
    index = tuple(simplify(i - lo) if lo else i for i, lo in zip(read.index, read.lo))
    moved = _Unpad(blk, read.select, E.BufferLoad(dst, index)).visit(items[k])
    body = _with_items(root, [*items[:k], _pad_nest(func, read, dst), moved, *items[k + 1 :]], dst)
    return replace(func, body=body), (name,)
