"""Keep reduction accumulators in registers.

After ``hoist_guards`` a reduction reads and writes one element of its output
on every step of its reduction loops::

    pool2[i] = -inf
    for rh in T.serial(3):
        for rw in T.serial(3):
            pool2[i] = T.max(pool2[i], data[...])

Nothing tells LLVM that ``pool2`` and ``data`` do not overlap (numba arrays
carry no alias information), so every step loads and stores ``pool2[i]``. This
pass gives the element a register::

    pool2_acc = T.allocate([1], "float32", annotations={"scope": "local"})
    pool2_acc[0] = -inf
    for rh ...: pool2_acc[0] = T.max(pool2_acc[0], data[...])
    pool2[i] = pool2_acc[0]

The same for a register tile: when a schedule moves the reduction loop above
unrolled output loops, ``hoist_guards`` leaves the inits in a nest of their own::

    for x in T.unroll(2):
        for o in T.unroll(16):
            out[n * 32 + x * 16 + o] = 0.0
    for rc in T.serial(96):
        for x in T.unroll(2):
            for o in T.unroll(16):
                out[n * 32 + x * 16 + o] = out[n * 32 + x * 16 + o] + ...

and the tile gets a flat ``local`` buffer, one register per element (codegen
makes each a scalar: its indices are constant once the loops are unrolled)::

    out_acc = T.allocate([32], "float32", annotations={"scope": "local"})
    for x in T.unroll(2): for o in T.unroll(16): out_acc[x * 16 + o] = 0.0
    for rc ...: out_acc[x * 16 + o] = out_acc[x * 16 + o] + ...
    for x in T.unroll(2): for o in T.unroll(16): out[n * 32 + x * 16 + o] = out_acc[x * 16 + o]

The patterns, each directly followed (in a sequence) by a loop nest:

- one element: a store ``B[I] = init``; every access to ``B``'s storage in the
  nest is ``B[I]`` and ``I`` uses no variable of the nest;
- a tile: a perfect nest of ``unroll`` loops (min 0, constant extents of at most
  :data:`UNROLL_LIMIT`, :data:`TILE_LIMIT` iterations in all) around one store
  ``B[I] = init``, where ``init`` uses none of the loops and reads no ``B``, and
  distinct iterations store distinct elements. ``if``s without ``else`` may stand
  between the loops (a strip's halo column guarded against the image border):
  they test the tile's loops and the loops around, and the copy-out keeps them. Every access to ``B``'s storage
  in the nest is ``B[I]`` with the loop variables replaced by those of a run of
  enclosing ``unroll`` loops with the same extents in the same order; ``I`` uses
  no other variable of the nest, nor does any ``if`` around an access. The
  accumulators start unguarded; the copy-out repeats the init's nest with its
  guards, so it stores exactly the elements the init stored (an element the
  updates' guards skip keeps its initial value).

In both, at least one access in the nest is a store, no loop of the nest is
parallel (threads would share the accumulator) and the nest allocates nothing.
Anything else is left as it is.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, replace
from math import prod

from .. import ir
from ..analysis import sum_form
from ..ir import names as irnames
from ..schedule.primitives.memory import REGISTER_LIMIT, UNROLL_LIMIT

TILE_LIMIT = REGISTER_LIMIT
"""The most elements of a tile: as many as a ``local`` allocation may hold."""

Indices = tuple[ir.Expr, ...]


def _accesses(node: ir.Stmt | ir.Expr, data: ir.Var) -> list[ir.BufferLoad | ir.BufferStore]:
    found: list[ir.BufferLoad | ir.BufferStore] = []

    def visit(n: object) -> None:
        if isinstance(n, (ir.BufferLoad, ir.BufferStore)) and n.buffer.data is data:
            found.append(n)

    ir.post_order_visit(node, visit)
    return found


def _nest_is_private(nest: ir.For) -> bool:
    """No parallel loop in ``nest`` and no allocation."""
    loops = ir.collect(nest, ir.For)
    return not any(f.kind == ir.ForKind.PARALLEL for f in loops) and not ir.collect(nest, ir.Allocate)


def _promotable(init: ir.Stmt, nest: ir.Stmt) -> ir.BufferStore | None:
    if not isinstance(init, ir.BufferStore) or not isinstance(nest, ir.For) or not _nest_is_private(nest):
        return None
    buf, idx = init.buffer, init.indices
    if buf.scope == ir.REGISTER_SCOPE:
        return None
    nest_vars = {f.loop_var for f in ir.collect(nest, ir.For)}
    if any(ir.free_vars(i) & nest_vars for i in idx):
        return None
    accesses = _accesses(nest, buf.data)
    if not any(isinstance(a, ir.BufferStore) for a in accesses):
        return None
    if any(a.buffer is not buf or a.indices != idx for a in accesses):
        return None
    return init


# ---- register tiles ------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Site:
    """An access to the tile's storage with the loops and ``if`` conditions around it in the nest."""

    access: ir.BufferLoad | ir.BufferStore
    loops: tuple[ir.For, ...]
    guards: tuple[ir.Expr, ...]


class _Sites(ir.Visitor):
    def __init__(self, data: ir.Var) -> None:
        self.data = data
        self.loops: list[ir.For] = []
        self.guards: list[ir.Expr] = []
        self.found: list[_Site] = []

    def visit_For(self, f: ir.For) -> None:
        self.visit(f.min)
        self.visit(f.extent)
        self.loops.append(f)
        self.visit(f.body)
        self.loops.pop()

    def visit_IfThenElse(self, s: ir.IfThenElse) -> None:
        self.visit(s.condition)
        self.guards.append(s.condition)
        self.visit(s.then_case)
        if s.else_case is not None:
            self.visit(s.else_case)
        self.guards.pop()

    def visit_BufferLoad(self, n: ir.BufferLoad) -> None:
        self._site(n)

    def visit_BufferStore(self, n: ir.BufferStore) -> None:
        self._site(n)

    def _site(self, n: ir.BufferLoad | ir.BufferStore) -> None:
        if n.buffer.data is self.data:
            self.found.append(_Site(n, tuple(self.loops), tuple(self.guards)))
        self.generic_visit(n)


@dataclass(frozen=True)
class _Tile:
    """A promotable tile: the init nest (``head``), its loops and store, and the tile loops of each
    access in the nest."""

    head: ir.Stmt
    loops: tuple[ir.For, ...]
    store: ir.BufferStore
    slots: dict[Indices, tuple[ir.Var, ...]]


def _extents(loops: tuple[ir.For, ...]) -> list[int | None]:
    return [ir.as_int(f.extent) for f in loops]


def _conjuncts(e: ir.Expr) -> list[ir.Expr]:
    return [*_conjuncts(e.a), *_conjuncts(e.b)] if isinstance(e, ir.And) else [e]


def _tile_loop(f: ir.For) -> bool:
    extent = ir.as_int(f.extent)
    return f.kind == ir.ForKind.UNROLLED and ir.as_int(f.min) == 0 and extent is not None and 0 < extent <= UNROLL_LIMIT


def _init_nest(head: ir.Stmt) -> tuple[tuple[ir.For, ...], tuple[ir.Expr, ...], ir.Stmt]:
    """The perfect nest of tile loops heading ``head``, the conditions of the ``if``s (without
    ``else``) between them, and its body."""
    loops: list[ir.For] = []
    guards: list[ir.Expr] = []
    while (isinstance(head, ir.For) and _tile_loop(head)) or (
        isinstance(head, ir.IfThenElse) and head.else_case is None
    ):
        if isinstance(head, ir.For):
            loops.append(head)
            head = head.body
        else:
            guards.append(head.condition)
            head = head.then_case
    return tuple(loops), tuple(guards), head


def _injective(indices: Indices, loops: tuple[ir.For, ...]) -> bool:
    """Whether distinct iterations of ``loops`` give distinct ``indices``, each affine in the loop variables."""
    tile_vars = [f.loop_var for f in loops]
    rows: list[list[int]] = []
    for index in indices:
        form = sum_form(index)
        if form is None or any(not isinstance(t, ir.Var) and ir.free_vars(t) & set(tile_vars) for t in form.terms):
            return False
        rows.append([form.coeff(v) for v in tile_vars])
    points = itertools.product(*(range(e or 0) for e in _extents(loops)))
    offsets = {tuple(sum(c * p for c, p in zip(row, point)) for row in rows) for point in points}
    return len(offsets) == prod(e or 0 for e in _extents(loops))


def _slot(site: _Site, tile_loops: tuple[ir.For, ...], store: ir.BufferStore) -> tuple[ir.Var, ...] | None:
    """The variables of the run of loops around ``site`` that stands for ``tile_loops``, or None.

    A run is consecutive tile loops with the init's extents in its order (the innermost is tried
    first), and ``site`` must access ``store``'s element with the init's variables replaced by the run's.
    """
    k, loops = len(tile_loops), site.loops
    if len({f.loop_var for f in loops}) < len(loops):
        return None  # a variable bound twice: the index may not mean the run's
    for p in range(len(loops) - k, -1, -1):
        run = loops[p : p + k]
        if not all(_tile_loop(f) for f in run) or _extents(run) != _extents(tile_loops):
            continue
        vmap = {a.loop_var: b.loop_var for a, b in zip(tile_loops, run)}
        if site.access.indices == tuple(ir.substitute(i, vmap) for i in store.indices):
            return tuple(vmap.values())
    return None


def _slots(nest: ir.For, head: ir.Stmt, tile_loops: tuple[ir.For, ...], store: ir.BufferStore) -> _Tile | None:
    """The tile when every access in ``nest`` is its element of a run of tile loops, guarded by no nest variable."""
    visitor = _Sites(store.buffer.data)
    visitor.visit(nest)
    nest_vars = {f.loop_var for f in ir.collect(nest, ir.For)}
    slots: dict[Indices, tuple[ir.Var, ...]] = {}
    for site in visitor.found:
        run = _slot(site, tile_loops, store) if site.access.buffer is store.buffer else None
        if run is None or any(ir.free_vars(g) & (nest_vars - set(run)) for g in site.guards):
            return None
        slots[site.access.indices] = run
    if not any(isinstance(s.access, ir.BufferStore) for s in visitor.found):
        return None
    return _Tile(head, tile_loops, store, slots)


def _promotable_tile(head: ir.Stmt, nest: ir.Stmt) -> _Tile | None:
    loops, guards, store = _init_nest(head)
    if not loops or not isinstance(store, ir.BufferStore) or not isinstance(nest, ir.For):
        return None
    # a guard (a strip's halo column) may test the tile's loops and the loops around, nothing of the nest
    nest_loops = {f.loop_var for f in ir.collect(nest, ir.For)} - {f.loop_var for f in loops}
    if any(ir.free_vars(g) & nest_loops or _accesses(g, store.buffer.data) for g in guards):
        return None
    # a first-iteration test of a loop around (``rh == 0`` of a reduction loop the inits did not
    # leave) runs the init only once for several runs of the nest: the accumulators would restart
    # on every run, so the element stays in memory
    tile_vars = {f.loop_var for f in loops}
    for term in (t for g in guards for t in _conjuncts(g)):
        if isinstance(term, ir.EQ) and isinstance(term.a, ir.Var) and term.a not in tile_vars:
            return None
    buf = store.buffer
    if buf.scope == ir.REGISTER_SCOPE or prod(e or 0 for e in _extents(loops)) > TILE_LIMIT:
        return None
    if ir.free_vars(store.value) & tile_vars or _accesses(store.value, buf.data):
        return None
    outer = set().union(*(ir.free_vars(i) for i in store.indices)) - tile_vars
    if outer & {f.loop_var for f in ir.collect(nest, ir.For)} or not _nest_is_private(nest):
        return None
    if not _injective(store.indices, loops):
        return None
    return _slots(nest, head, loops, store)


def _flat(tile_vars: tuple[ir.Var, ...], extents: list[int]) -> Indices:
    """The row-major index ``v0 * (e1 * e2) + v1 * e2 + v2`` of a tile element."""
    index: ir.Expr | None = None
    for k, v in enumerate(tile_vars):
        stride = prod(extents[k + 1 :])
        term = v * stride if stride > 1 else v
        index = term if index is None else index + term
    assert index is not None
    return (index,)


def _nest(loops: tuple[ir.For, ...], body: ir.Stmt) -> ir.Stmt:
    for f in reversed(loops):
        body = replace(f, body=body)
    return body


# ---- the rewrite ---------------------------------------------------------------------------------
class _Swap(ir.Transformer):
    """Every access to ``buf`` becomes the accumulator's element ``slots[indices]``."""

    def __init__(self, buf: ir.Buffer, acc: ir.Buffer, slots: dict[Indices, Indices]) -> None:
        self.buf, self.acc, self.slots = buf, acc, slots

    def visit_BufferLoad(self, n: ir.BufferLoad) -> ir.Expr:
        return ir.BufferLoad(self.acc, self.slots[n.indices]) if n.buffer is self.buf else self.generic_visit(n)

    def visit_BufferStore(self, n: ir.BufferStore) -> ir.Stmt:
        if n.buffer is not self.buf:
            return self.generic_visit(n)  # type: ignore[no-any-return]
        return ir.BufferStore(self.acc, self.visit(n.value), self.slots[n.indices])


def _allocate(acc: ir.Buffer, body: ir.Stmt) -> ir.Stmt:
    ann = ir.ann_set((), "scope", ir.REGISTER_SCOPE)
    return ir.Allocate(acc.data, acc.dtype, acc.shape, ir.DeclBuffer(acc, body), ann)


class _CopyOut(ir.Transformer):
    """The init nest with its store replaced: the copy-out stores the elements the init stored."""

    def __init__(self, store: ir.BufferStore, copy: ir.BufferStore) -> None:
        self.store, self.copy = store, copy

    def visit_BufferStore(self, n: ir.BufferStore) -> ir.Stmt:
        return self.copy if n is self.store else n


class _Promote(ir.Transformer):
    def __init__(self, taken: set[str]) -> None:
        self.taken = taken

    def visit_SeqStmt(self, node: ir.SeqStmt) -> ir.Stmt:
        seq = [self.visit(s) for s in node.seq]
        out: list[ir.Stmt] = []
        k = 0
        while k < len(seq):
            promoted = self._promoted(seq[k], seq[k + 1]) if k + 1 < len(seq) else None
            if promoted is None:
                out.append(seq[k])
                k += 1
                continue
            out.append(promoted)
            k += 2
        return ir.seq(*out)

    def _promoted(self, head: ir.Stmt, nest: ir.Stmt) -> ir.Stmt | None:
        init = _promotable(head, nest)
        if init is not None:
            return self._promote(init, nest)
        tile = _promotable_tile(head, nest)
        return None if tile is None else self._promote_tile(tile, nest)

    def _acc(self, buf: ir.Buffer, size: int) -> ir.Buffer:
        name = irnames.fresh_name(self.taken, f"{buf.name}_acc")
        return ir.decl_buffer(name, (size,), buf.dtype, scope=ir.REGISTER_SCOPE)

    def _promote(self, init: ir.BufferStore, nest: ir.Stmt) -> ir.Stmt:
        buf, acc = init.buffer, self._acc(init.buffer, 1)
        zero = (ir.const(0),)
        body = ir.seq(
            ir.BufferStore(acc, init.value, zero),
            _Swap(buf, acc, {init.indices: zero}).visit(nest),
            ir.BufferStore(buf, ir.BufferLoad(acc, zero), init.indices),
        )
        return _allocate(acc, body)

    def _promote_tile(self, tile: _Tile, nest: ir.Stmt) -> ir.Stmt:
        store, loops = tile.store, tile.loops
        extents = [e or 0 for e in _extents(loops)]
        buf, acc = store.buffer, self._acc(store.buffer, prod(extents))
        own = _flat(tuple(f.loop_var for f in loops), extents)
        slots = {idx: _flat(run, extents) for idx, run in tile.slots.items()}
        body = ir.seq(
            _nest(loops, ir.BufferStore(acc, store.value, own)),
            _Swap(buf, acc, slots).visit(nest),
            _CopyOut(store, ir.BufferStore(buf, ir.BufferLoad(acc, own), store.indices)).visit(tile.head),
        )
        return _allocate(acc, body)


def promote_accumulators(func: ir.Func) -> ir.Func:
    """``func`` with every promotable reduction accumulator or tile in registers (see the module docstring)."""
    taken = {b.name for b in ir.collect(func.body, ir.DeclBuffer) for b in (b.buffer,)}
    taken |= {b.name for b in func.params}
    return replace(func, body=_Promote(taken).visit(func.body))
