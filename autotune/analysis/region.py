"""Access regions: what a block reads and writes, relaxed over loops, clipped, united.

Within one block instance every iteration variable is fixed, so an access
``A[v_h + 1]`` is a point; the region of a buffer is the bounding box of its
accesses (``A[v_h]`` and ``A[v_h + 1]`` give ``A[v_h:v_h + 2]``). An index that is
not (quasi-)affine in the block variables, such as the float math of a resize
(``T.Cast("int32", T.floor(T.Cast("float32", v_h) * 2.0 + 0.5))``), a select or a
load, makes that dimension the whole buffer, and the buffer is reported as a
fallback so a schedule can ask for an explicit annotation instead.

A consumer's region is then expressed in loop variables (:func:`substitute_bindings`)
and relaxed over the loops inside a tile (:func:`relax_region`): ``A[ho*4 + hi + rh]``
with ``hi < 4`` and ``rh < 3`` needs ``A[ho * 4:ho * 4 + 6]``.
"""

from __future__ import annotations

from collections.abc import Mapping

from autotune.errors import IRError
from autotune.ir import (
    GE,
    LE,
    Add,
    Block,
    Buffer,
    BufferLoad,
    BufferRegion,
    BufferStore,
    DeclBuffer,
    Expr,
    For,
    IntImm,
    Max,
    Min,
    Range,
    Stmt,
    Sub,
    Var,
    Visitor,
    as_int,
    free_vars,
    substitute,
)

from .arith import Analyzer, simplify
from .bounds import DimBound, Relaxer

__all__ = [
    "block_access_regions",
    "buffer_users",
    "clip_region",
    "common_loops",
    "compact_box",
    "region_extents_const",
    "region_at_site",
    "relax_region",
    "substitute_bindings",
    "union_regions",
]

Regions = tuple[BufferRegion, ...]
_Access = tuple[tuple[Range, ...], dict[Var, Range]]  # the ranges and the loops inside the block around them


def _full(buffer: Buffer, dim: int) -> Range:
    return Range(IntImm(0), buffer.shape[dim])


def _mentions(rng: Range, domains: Mapping[Var, Range]) -> bool:
    return any(v in domains for v in free_vars(rng))


# ---- relax, union, clip ----------------------------------------------------
def relax_region(
    region: BufferRegion, var_domains: Mapping[Var, Range], analyzer: Analyzer | None = None
) -> BufferRegion:
    """The part of ``region`` touched while each variable of ``var_domains`` runs over its range.

    Mins become affine in the remaining variables and extents constants:
    ``A[ho*4 + hi + rh]`` with ``hi`` in ``[0, 4)`` and ``rh`` in ``[0, 3)`` is
    ``A[ho * 4:ho * 4 + 6]``. A dimension that cannot be bounded is the whole dimension.
    """
    an = analyzer if analyzer is not None else Analyzer()
    relaxer = Relaxer(var_domains, an)
    ranges = []
    for d, rng in enumerate(region.region):
        if not _mentions(rng, var_domains):
            ranges.append(an.simplify(rng))
            continue
        bound = relaxer.bound(rng.min, rng.extent)
        ranges.append(_full(region.buffer, d) if bound is None else bound.to_range(rng.min.dtype))
    return BufferRegion(region.buffer, tuple(ranges))


def union_regions(a: BufferRegion, b: BufferRegion, analyzer: Analyzer | None = None) -> BufferRegion:
    """The per-dimension bounding box of two regions of one buffer.

    Exact when the mins of a dimension differ by a constant, the whole dimension otherwise.
    """
    if a.buffer is not b.buffer:
        raise IRError(f"union_regions: regions of different buffers '{a.buffer.name}' and '{b.buffer.name}'")
    an = analyzer if analyzer is not None else Analyzer()
    relaxer = Relaxer({}, an)
    ranges = []
    for d, (ra, rb) in enumerate(zip(a.region, b.region)):
        if ra == rb:
            ranges.append(ra)
            continue
        ba, bb = relaxer.bound(ra.min, ra.extent), relaxer.bound(rb.min, rb.extent)
        both = ba.union(bb) if ba is not None and bb is not None else None
        ranges.append(_full(a.buffer, d) if both is None else both.to_range(ra.min.dtype))
    return BufferRegion(a.buffer, tuple(ranges))


def clip_region(region: BufferRegion, analyzer: Analyzer | None = None) -> BufferRegion:
    """``region`` cut to the buffer's shape where it may leave it.

    A dimension that provably stays inside (with the analyzer's bounds) is kept;
    otherwise the min becomes ``T.max(min, 0)`` and/or the end ``T.min(min + extent, dim)``.
    """
    an = analyzer if analyzer is not None else Analyzer()
    ranges = []
    for rng, dim in zip(region.region, region.buffer.shape):
        end = an.simplify(Add(rng.min, rng.extent))
        low_ok = an.can_prove(GE(rng.min, IntImm(0, rng.min.dtype)))
        high_ok = an.can_prove(LE(end, dim))
        if low_ok and high_ok:
            ranges.append(rng)
            continue
        lo = rng.min if low_ok else an.simplify(Max(rng.min, IntImm(0, rng.min.dtype)))
        hi = end if high_ok else an.simplify(Min(end, dim))
        ranges.append(Range(lo, an.simplify(Sub(hi, lo))))
    return BufferRegion(region.buffer, tuple(ranges))


def substitute_bindings(region: BufferRegion, block: Block, analyzer: Analyzer | None = None) -> BufferRegion:
    """``region``, written in ``block``'s iteration variables, rewritten in the loop variables of its bindings."""
    vmap = {iv.var: value for iv, value in zip(block.iter_vars, block.bindings)}
    found = substitute(region, vmap)
    return analyzer.simplify(found) if analyzer is not None else simplify(found)


def region_extents_const(region: BufferRegion) -> tuple[int, ...] | None:
    """The extents as ints, or None when one is not a constant."""
    extents = tuple(as_int(simplify(r.extent)) for r in region.region)
    return None if any(e is None for e in extents) else extents  # type: ignore[return-value]


# ---- block access regions --------------------------------------------------
class _Accesses(Visitor):
    """Every access of a block body, with the loops (inside the block) around it."""

    def __init__(self, local: set[Buffer]) -> None:
        self.local = local
        self.loops: dict[Var, Range] = {}
        self.reads: dict[Buffer, list[_Access]] = {}
        self.writes: dict[Buffer, list[_Access]] = {}

    def add(self, table: dict[Buffer, list[_Access]], buffer: Buffer, ranges: tuple[Range, ...]) -> None:
        if buffer not in self.local:
            table.setdefault(buffer, []).append((ranges, dict(self.loops)))

    def visit_BufferLoad(self, e: BufferLoad) -> None:
        self.add(self.reads, e.buffer, tuple(Range(i, IntImm(1, i.dtype)) for i in e.indices))
        self.generic_visit(e)

    def visit_BufferStore(self, s: BufferStore) -> None:
        self.visit(s.value)
        for i in s.indices:
            self.visit(i)
        self.add(self.writes, s.buffer, tuple(Range(i, IntImm(1, i.dtype)) for i in s.indices))

    def visit_For(self, s: For) -> None:
        self.visit(s.min)
        self.visit(s.extent)
        self.loops[s.loop_var] = Range(s.min, s.extent)
        self.visit(s.body)
        del self.loops[s.loop_var]

    def visit_DeclBuffer(self, s: DeclBuffer) -> None:
        if not any(b.data is s.buffer.data for b in self.local):
            raise IRError(
                f"block_access_regions: buffer '{s.buffer.name}' is declared inside a block on storage "
                f"'{s.buffer.data.name}' that the block does not allocate; declare a view around the blocks that use it"
            )
        self.local.add(s.buffer)
        self.visit(s.body)

    def visit_Block(self, b: Block) -> None:
        """A nested block contributes its declared regions (inferred when it declares none)."""
        for e in (*b.bindings, b.predicate):
            self.visit(e)
        reads, writes = (b.reads, b.writes) if b.reads or b.writes else block_access_regions(b)[:2]
        for table, regions in ((self.reads, reads), (self.writes, writes)):
            for r in regions:
                self.add(table, r.buffer, substitute_bindings(r, b).region)


def _dim_box(accesses: list[tuple[Range, Relaxer]]) -> DimBound | None:
    """The bounding box of one dimension over all accesses; None if one is not quasi-affine."""
    box: DimBound | None = None
    for rng, relaxer in accesses:
        found = relaxer.bound(rng.min, rng.extent)
        if found is None:
            return None
        box = found if box is None else box.union(found)
        if box is None:
            return None
    return box


def _regions(table: dict[Buffer, list[_Access]], an: Analyzer, fallback: dict[str, None]) -> Regions:
    out = []
    for buffer, accesses in table.items():
        relaxers = [Relaxer(loops, an, strict=True) for _, loops in accesses]
        ranges = []
        for d in range(buffer.ndim):
            box = _dim_box([(ranges_[d], relaxer) for (ranges_, _), relaxer in zip(accesses, relaxers)])
            if box is None:
                fallback[buffer.name] = None
                ranges.append(_full(buffer, d))
            else:
                ranges.append(box.to_range(accesses[0][0][d].min.dtype))
        out.append(BufferRegion(buffer, tuple(ranges)))
    return tuple(out)


def block_access_regions(block: Block) -> tuple[Regions, Regions, tuple[str, ...]]:
    """The regions ``block`` reads and writes, and the names of buffers that fell back to their full extent.

    Loads in ``init`` and ``body`` are reads, stores are writes (a reduction's output
    is in both); buffers come in order of first appearance; buffers the block
    allocates itself are left out.
    """
    collector = _Accesses(set(block.alloc_buffers))
    if block.init is not None:
        collector.visit(block.init)
    collector.visit(block.body)
    an = Analyzer()
    for iv in block.iter_vars:
        an.bind(iv.var, iv.dom)
    fallback: dict[str, None] = {}
    reads = _regions(collector.reads, an, fallback)
    writes = _regions(collector.writes, an, fallback)
    return reads, writes, tuple(fallback)


# ---- the region of a buffer at a site ---------------------------------------
User = tuple[Block, tuple[Stmt, ...]]
"""A block that accesses a buffer, with the statements from the function body down to it."""


class _Users(Visitor):
    def __init__(self, buffer: Buffer) -> None:
        self.buffer = buffer
        self.stack: list[Stmt] = []
        self.found: list[User] = []

    def visit(self, node: object) -> None:
        if not isinstance(node, Stmt):
            return  # only statements hold blocks
        self.stack.append(node)
        if isinstance(node, Block) and node.name != "root" and any(r.buffer is self.buffer for r in (*node.reads, *node.writes)):
            self.found.append((node, tuple(self.stack)))
        self.generic_visit(node)
        self.stack.pop()


def buffer_users(body: Stmt, buffer: Buffer) -> list[User]:
    """The blocks under ``body`` (the root block left out) whose regions name ``buffer``, in program
    order, each with its path of statements from ``body``."""
    users = _Users(buffer)
    users.visit(body)
    return users.found


def common_loops(users: list[User]) -> list[For]:
    """The loops around every one of ``users``, outermost first (the last is their innermost common loop)."""
    common: list[Stmt] = []
    for items in zip(*(path for _, path in users)):
        if any(s is not items[0] for s in items):
            break
        common.append(items[0])
    return [s for s in common if isinstance(s, For)]


def region_at_site(users: list[User], buffer: Buffer, site: For | None) -> BufferRegion:
    """The region of ``buffer`` that ``users`` access in one iteration of ``site`` (None: the whole body).

    Each user's regions, written in loop variables, are relaxed over the loops between ``site``
    and the block and united: ``B[ho*4 + hi + rh]`` under ``ho`` (the site), ``hi < 4`` and
    ``rh < 3`` is ``B[ho * 4:ho * 4 + 6]``.
    """
    region: BufferRegion | None = None
    for block, path in users:
        inner = path[next(k for k, s in enumerate(path) if s is site) + 1 :] if site is not None else path
        doms = {f.loop_var: Range(f.min, f.extent) for f in inner if isinstance(f, For)}
        for r in (*block.reads, *block.writes):
            if r.buffer is buffer:
                relaxed = relax_region(substitute_bindings(r, block), doms)
                region = relaxed if region is None else union_regions(region, relaxed)
    if region is None:
        raise IRError(f"region_at_site: no block accesses '{buffer.name}'")
    return region


def compact_box(buffer: Buffer, region: BufferRegion) -> list[tuple[Expr, int]]:
    """Per dimension of ``buffer``, the offset to subtract and the extent that hold ``region``.

    A dimension whose extent is not a constant smaller than the buffer's keeps the whole
    dimension (offset 0).
    """
    box: list[tuple[Expr, int]] = []
    for dim, rng in zip(buffer.const_shape(), region.region):
        extent = as_int(simplify(rng.extent))
        if extent is None or extent >= dim:
            box.append((IntImm(0), dim))
        else:
            box.append((simplify(rng.min), extent))
    return box
