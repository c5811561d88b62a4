"""InjectDoubleBuffer on N-d buffers: a staged buffer gets two slots and a prologue.

The ``double_buffer`` primitive tags a staging block (a cache block computed at
loop ``L``) with the name of ``L``. After compaction its buffer ``S`` is
allocated around ``L``'s body (or further out). For each tagged block:

- ``S`` becomes ``S2`` of shape ``[2, *S.shape]``, allocated outside ``L``
  (in the block around ``L``, or where ``S`` already was);
- ``S2`` keeps ``S``'s banks: separators ``X`` become ``[x + 1 for x in X]`` (the
  slot joins the first physical axis: ``[2, 4096] | 1`` becomes ``[2, 2, 4096] | 2``,
  physically four banks ``[4][4096]``); without separators ``S2`` gets ``[1]``, one
  bank per slot;
- a prologue before ``L`` stages iteration 0 into slot 0; inside ``L`` the staging
  nest stages iteration ``i + 1`` into slot ``(i + 1) % 2`` (its blocks predicated
  with ``i + 1 < extent``) while the readers read slot ``i % 2``
  (``i = L.loop_var - L.min``).

This works before flattening, so axis separators need nothing special (TVM's
pass runs after flattening and fails with "InjectDoubleBuffer expects flat 1-d buffers").
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from .. import ir
from ..analysis.arith import simplify
from ..errors import LoweringError
from ..ir.names import fresh_name
from ..schedule.regions import refresh_regions
from ..schedule.tree import all_names, allocating_block, replace_stmt

DOUBLE = "double_buffer"


def _path(root: ir.Stmt, match: Callable[[ir.Stmt], bool]) -> list[ir.Stmt] | None:
    """Statements from ``root`` down to the first one ``match`` accepts."""
    if match(root):
        return [root]
    children: tuple[Any, ...] = ()
    if isinstance(root, ir.SeqStmt):
        children = root.seq
    elif isinstance(root, (ir.For, ir.Block, ir.Allocate, ir.DeclBuffer)):
        children = (root.body,)
    for child in children:
        found = _path(child, match)
        if found is not None:
            return [root, *found]
    return None


def _staging_top(path: list[ir.Stmt], loop: ir.For) -> ir.Stmt:
    """The outermost statement strictly inside ``loop`` that holds only the block at the end of ``path``."""
    top = path[-1]
    for stmt in reversed(path[path.index(loop) + 1 : -1]):
        if not (isinstance(stmt, ir.For) and stmt.body is top):
            break
        top = stmt
    return top


class _Slot(ir.Transformer):
    """Accesses of ``old`` become accesses of ``new`` at ``[slot, *indices]``; touched blocks get fresh regions.

    Allocations are left alone (:func:`_move_alloc` moves them).
    """

    def __init__(self, old: ir.Buffer, new: ir.Buffer, slot: ir.Expr) -> None:
        self.old, self.new, self.slot = old, new, slot

    def visit_BufferLoad(self, node: ir.BufferLoad) -> ir.Expr:
        out = self.generic_visit(node)
        return ir.BufferLoad(self.new, (self.slot, *out.indices)) if node.buffer is self.old else out  # type: ignore[no-any-return]

    def visit_BufferStore(self, node: ir.BufferStore) -> ir.Stmt:
        out = self.generic_visit(node)
        return ir.BufferStore(self.new, out.value, (self.slot, *out.indices)) if node.buffer is self.old else out  # type: ignore[no-any-return]

    def visit_BufferRegion(self, node: ir.BufferRegion) -> ir.BufferRegion:
        if node.buffer is not self.old:
            return node
        return ir.BufferRegion(self.new, (ir.Range(self.slot, ir.const(1)), *node.region))

    def visit_Block(self, node: ir.Block) -> ir.Stmt:
        out = self.generic_visit(node)
        touched = any(r.buffer is self.old for r in (*node.reads, *node.writes))
        return refresh_regions(out) if touched and node.name != "root" else out  # type: ignore[no-any-return]


def _guard(stmt: ir.Stmt, cond: ir.Expr) -> ir.Stmt:
    """Conjoin ``cond`` to the predicate of every block under ``stmt``."""

    class _Guard(ir.Transformer):
        def visit_Block(self, b: ir.Block) -> ir.Stmt:
            b = self.generic_visit(b)
            pred = cond if isinstance(b.predicate, ir.IntImm) and b.predicate.value == 1 else ir.And(b.predicate, cond)
            return replace(b, predicate=pred)

    return _Guard().visit(stmt)  # type: ignore[no-any-return]


def _rename(stmt: ir.Stmt, taken: set[str], suffix: str) -> ir.Stmt:
    class _Rename(ir.Transformer):
        def visit_Block(self, b: ir.Block) -> ir.Stmt:
            return replace(self.generic_visit(b), name=fresh_name(taken, b.name + suffix))

    return _Rename().visit(stmt)  # type: ignore[no-any-return]


def _find(func: ir.Func, blk: ir.Block, loop_name: str) -> tuple[list[ir.Stmt], ir.For, ir.Buffer]:
    """The path to ``blk``, its loop ``loop_name`` and the buffer it stages; checks the preconditions."""
    path = _path(func.body, lambda s: s is blk)
    assert path is not None
    loops = [s for s in path if isinstance(s, ir.For) and s.loop_var.name == loop_name]
    if not loops:
        raise LoweringError(f"inject_double_buffer: block '{blk.name}' is tagged to double-buffer over loop '{loop_name}', which is not around it")
    if len(blk.writes) != 1:
        raise LoweringError(f"inject_double_buffer: block '{blk.name}' must write exactly one buffer, it writes {len(blk.writes)}")
    buf = blk.writes[0].buffer
    loop = loops[-1]
    inside = {id(b) for b in ir.collect(loop.body, ir.Block)}
    for b in ir.collect(func.body, ir.Block):
        if any(r.buffer is buf for r in (*b.reads, *b.writes)) and id(b) not in inside:
            raise LoweringError(f"inject_double_buffer: block '{b.name}' accesses '{buf.name}' outside loop '{loop_name}'")
        if b is not blk and any(w.buffer is buf for w in b.writes):
            raise LoweringError(f"inject_double_buffer: block '{b.name}' also writes '{buf.name}', staged by '{blk.name}'")
    if allocating_block(func, buf) is None:
        raise LoweringError(f"inject_double_buffer: '{buf.name}' is not an intermediate allocated by a block")
    return path, loop, buf


def _stage_copies(func: ir.Func, top: ir.Stmt, loop: ir.For, old: ir.Buffer, new: ir.Buffer) -> tuple[ir.Stmt, ir.Stmt]:
    """The prologue (iteration 0 into slot 0) and the in-loop nest (iteration i + 1 into slot (i + 1) % 2)."""
    var, i = loop.loop_var, simplify(ir.Sub(loop.loop_var, loop.min))
    prologue = _Slot(old, new, ir.const(0)).visit(simplify(ir.substitute(top, {var: loop.min})))
    prologue = _rename(prologue, all_names(func), "_prologue")
    ahead = simplify(ir.substitute(top, {var: ir.Add(var, ir.const(1))}))
    ahead = _Slot(old, new, simplify(ir.FloorMod(ir.Add(i, ir.const(1)), ir.const(2)))).visit(ahead)
    ahead = _guard(ahead, simplify(ir.LT(ir.Add(i, ir.const(1)), loop.extent)))
    return prologue, ahead


def _move_alloc(func: ir.Func, old: ir.Buffer, new: ir.Buffer, loop_var: ir.Var) -> ir.Func:
    """Allocate ``new`` instead of ``old``: where ``old`` was if that is outside the loop, else around the loop."""
    owner = allocating_block(func, old)
    assert owner is not None
    lpath = _path(func.body, lambda s: isinstance(s, ir.For) and s.loop_var is loop_var)
    assert lpath is not None
    if owner in lpath:  # outside the loop: swap in place
        allocs = tuple(new if a is old else a for a in owner.alloc_buffers)
        return replace_stmt(func, owner, replace(owner, alloc_buffers=allocs))
    rest = tuple(a for a in owner.alloc_buffers if a is not old)
    unwrap = not rest and not owner.iter_vars and owner.name.startswith("alloc_")
    func = replace_stmt(func, owner, owner.body if unwrap else replace(owner, alloc_buffers=rest))
    lpath = _path(func.body, lambda s: isinstance(s, ir.For) and s.loop_var is loop_var)
    assert lpath is not None
    site = next(s for s in reversed(lpath) if isinstance(s, ir.Block))
    return replace_stmt(func, site, replace(site, alloc_buffers=(*site.alloc_buffers, new)))


def _inject_one(func: ir.Func, blk: ir.Block) -> ir.Func:
    loop_name = ir.ann_get(blk.annotations, DOUBLE)
    untagged = replace(blk, annotations=ir.ann_set(blk.annotations, DOUBLE, None))
    func = replace_stmt(func, blk, untagged)
    path, loop, old = _find(func, untagged, str(loop_name))
    seps = tuple(x + 1 for x in old.axis_separators) if old.axis_separators else (1,)
    # padded strides (spaced private copies) carry over; the slot steps over the first group, or is a group
    strides = (ir.const(old.physical_shape()[0] if old.axis_separators else 1), *old.strides) if old.strides else ()
    new = old.with_(shape=(ir.const(2), *old.shape), axis_separators=seps, strides=strides, data=ir.Var(f"{old.name}_data", "handle"))
    top = _staging_top(path, loop)
    prologue, ahead = _stage_copies(func, top, loop, old, new)
    func = replace_stmt(func, top, ahead)
    loop = next(f for f in ir.collect(func.body, ir.For) if f.loop_var is loop.loop_var)
    slot = simplify(ir.FloorMod(ir.Sub(loop.loop_var, loop.min), ir.const(2)))
    body = _Slot(old, new, slot).visit(loop.body)
    func = replace_stmt(func, loop, ir.seq(prologue, replace(loop, body=body)))
    return _move_alloc(func, old, new, loop.loop_var)


def inject_double_buffer(func: ir.Func) -> ir.Func:
    """Apply every ``double_buffer`` tag (see the module docstring)."""
    while True:
        tagged = [b for b in ir.collect(func.body, ir.Block) if ir.ann_get(b.annotations, DOUBLE) is not None]
        if not tagged:
            return func
        func = _inject_one(func, tagged[0])
