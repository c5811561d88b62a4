"""The ``gemm`` family: tiles, loop order and staged operand tiles of a matrix product.

The product is the first block that reduces over one iter var ``k`` and reads
two operands, ``A`` indexed by a spatial ``m`` and ``k`` and ``B`` indexed by
``k`` and a spatial ``n`` (``matmul``; also ``dense``). Knobs::

    tile_m, tile_n, tile_k   tile sizes (divisors of the extents, up to max_tile)
    order                    the order of the three tile loops, e.g. mnk; inside them i, k, j (j innermost)
    cache_a, cache_b         stage the A / B tile in a buffer computed at the k tile loop (cache_read + compute_at)
    double_buffer            double-buffer the staged tiles
    parallel                 none | outer: prange over the m tile loop
    vectorize                mark the innermost (n) loop
    register_tile            none | RXxRY: a micro-kernel instead of the tiles above: the product
                             accumulates an RX x RY tile in registers (cache_write to ``local``,
                             every tile loop unrolled) over the whole k loop, compiled with the SLP
                             vectoriser; ``cache_b`` packs B's RY-column panel (cache_read at
                             the tile's n loop)
    panel_order              mn | nm (with a register tile): the order of the loops over row
                             tiles (m) and column panels (n). With ``nm`` a packed B panel
                             (K x RY) is filled once and reused by every row tile; with ``mn``
                             each tile streams its panel anew (on the AVX2 host: 4x16 tile,
                             packed, nm 17.6 ms against mn unpacked 33.8 ms at 1024^3).
                             ``parallel`` splits the outer of the two in two halves run by
                             prange (each half packs into its own panel)

Without a register tile, the output accumulates in memory (one load and store
per multiply-add): about 25 GFLOP/s per core at best. With one, LLVM keeps the
tile in vector registers (8x32 float32 = 16 zmm), the shape of a BLAS micro-kernel.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from .. import ir
from ..analysis.stage_loops import loops_of
from ..errors import ConfigError
from ..schedule import Schedule
from .space_family import Domain, Family, choice_domain, divisors, int_domain
from .target import Target

__all__ = ["Gemm", "GemmFamily", "analyze_gemm"]

ORDERS = tuple("".join(p) for p in itertools.permutations("mnk"))
REGISTER_TILES = ((4, 16), (8, 16), (4, 32), (8, 32), (4, 48), (8, 48))
"""Register tiles (rows x columns of float32 accumulators) the ``register_tile`` knob offers, where they divide."""
PANEL_ORDERS = ("mn", "nm")
"""``panel_order`` choices: row tiles outside column panels, or column panels outside row tiles."""


@dataclass(frozen=True)
class Gemm:
    """The product block, its loops over m, n and k, their extents and the operand buffers."""

    block: str
    loops: tuple[str, str, str]
    extents: tuple[int, int, int]
    a: str
    b: str


def _single_var(expr: ir.Expr) -> ir.Var | None:
    return expr if isinstance(expr, ir.Var) else None


def _operand_vars(block: ir.Block, buf: ir.Buffer) -> set[ir.Var] | None:
    loads = [ld for ld in ir.collect(block.body, ir.BufferLoad) if ld.buffer is buf]
    if not loads or any(ld.indices != loads[0].indices for ld in loads):
        return None
    found = [_single_var(i) for i in loads[0].indices]
    return {v for v in found if v is not None}


def _match(func: ir.Func, block: ir.Block) -> Gemm | None:
    reduce = [iv.var for iv in block.iter_vars if iv.kind == "reduce"]
    spatial = {iv.var for iv in block.iter_vars if iv.kind == "spatial"}
    if len(reduce) != 1 or len(block.writes) != 1:
        return None
    k = reduce[0]
    operands = [r.buffer for r in block.reads if r.buffer is not block.writes[0].buffer]
    for a, b in itertools.permutations(operands, 2):
        va, vb = _operand_vars(block, a), _operand_vars(block, b)
        if va is None or vb is None or k not in va or k not in vb:
            continue
        ms, ns = (va - vb) & spatial, (vb - va) & spatial
        if len(ms) == 1 and len(ns) == 1:
            return _with_loops(func, block, (ms.pop(), ns.pop(), k), a.name, b.name)
    return None


def _with_loops(func: ir.Func, block: ir.Block, axes: tuple[ir.Var, ...], a: str, b: str) -> Gemm | None:
    by_var = {iv.var: binding for iv, binding in zip(block.iter_vars, block.bindings)}
    loops = {f.loop_var: f for f in loops_of(func, block)}
    found = [loops.get(by_var[v]) if isinstance(by_var[v], ir.Var) else None for v in axes]  # type: ignore[call-overload]
    if any(f is None for f in found):
        return None
    names = tuple(f.loop_var.name for f in found)  # type: ignore[union-attr]
    extents = tuple(ir.as_int(f.extent) or 1 for f in found)  # type: ignore[union-attr]
    return Gemm(block.name, names, extents, a, b)  # type: ignore[arg-type]


def analyze_gemm(func: ir.Func) -> Gemm:
    """The first matrix-product block of ``func``; ConfigError if there is none."""
    for block in ir.collect(func.body, ir.Block):
        if block.name != "root" and (found := _match(func, block)) is not None:
            return found
    raise ConfigError(f"gemm: '{func.name}' has no block computing A[m, k] * B[k, n] summed over k")


def tile_choices(extent: int, cap: int) -> list[int]:
    """Divisors of ``extent`` from 2 to ``cap`` (just the extent when there are none)."""
    return [d for d in divisors(extent) if 2 <= d <= cap] or [min(extent, max(1, cap))]


def _read_index(sch: Schedule, block: str, buffer: str) -> int:
    blk = next(b for b in ir.collect(sch.func.body, ir.Block) if b.name == block)
    return next(i for i, r in enumerate(blk.reads) if r.buffer.name == buffer)


class GemmFamily(Family):
    """Tile and stage a matrix product (see the module docstring)."""

    name = "gemm"
    max_tile = 64

    def domains(
        self, func: ir.Func, pools: Sequence[str], max_tile: int, target: Target
    ) -> tuple[Domain, ...]:
        g = analyze_gemm(func)
        out = [
            int_domain(f"tile_{axis}", tile_choices(n, max_tile), 1, n) for axis, n in zip("mnk", g.extents)
        ]
        out.append(choice_domain("order", ORDERS, kind="layout"))
        out += [
            choice_domain(name, (False, True), kind="layout")
            for name in ("cache_a", "cache_b", "double_buffer")
        ]
        out.append(
            choice_domain("parallel", ("none", "outer") if g.extents[0] > 1 else ("none",), kind="parallel")
        )
        out.append(choice_domain("vectorize", (False, True), kind="vectorize"))
        tiles = [
            f"{rx}x{ry}" for rx, ry in REGISTER_TILES if g.extents[0] % rx == 0 and g.extents[1] % ry == 0
        ]
        out.append(choice_domain("register_tile", ("none", *tiles), kind="tile"))
        if len(out[-1].derived) == 1:
            return tuple(out)
        # a register tile replaces the tiles, order, staged A, double buffering and the vector mark
        tiled = (("register_tile", ("none",)),)
        keep = ("parallel", "cache_b", "register_tile")
        out = [d if d.name in keep else replace(d, requires=tiled) for d in out]
        out.append(
            choice_domain("panel_order", PANEL_ORDERS, (("register_tile", tuple(tiles)),), kind="layout")
        )
        return tuple(out)

    def apply(self, sch: Schedule, values: Mapping[str, Any], target: Target) -> Schedule:
        g = analyze_gemm(sch.func)
        if values.get("register_tile", "none") != "none":
            return _micro_kernel(sch, g, values, target.parallel_parts)
        outer: dict[str, str] = {}
        inner: dict[str, str] = {}
        for axis, loop in zip("mnk", g.loops):
            sch = sch.split(loop, [None, values[f"tile_{axis}"]])
            outer[axis], inner[axis] = sch.last
        sch = sch.reorder(*(outer[a] for a in values["order"]), inner["m"], inner["k"], inner["n"])
        staged = []
        for flag, operand in (("cache_a", g.a), ("cache_b", g.b)):
            if values[flag]:
                sch = sch.cache_read(g.block, _read_index(sch, g.block, operand), "global")
                staged.append(sch.last[0])
        for stage in staged:
            sch = sch.compute_at(stage, outer["k"])
        if values["double_buffer"]:
            for stage in staged:
                sch = sch.double_buffer(stage)
        if values["parallel"] == "outer":
            sch = sch.parallel(outer["m"])
        if values["vectorize"]:
            sch = sch.vectorize(inner["n"])
        return sch


def _micro_kernel(sch: Schedule, g: Gemm, values: Mapping[str, Any], parts_count: int) -> Schedule:
    """The register-tiled product: ``for mo, no: acc[RX, RY] = 0; for k: acc += A[m, k] * B[k, n]; C = acc``
    (``for no, mo`` with ``panel_order: nm``; a packed panel is filled at the ``no`` loop)."""
    rx, ry = (int(v) for v in str(values["register_tile"]).split("x"))
    sch = sch.split(g.loops[0], [None, rx])
    mo, mi = sch.last
    sch = sch.split(g.loops[1], [None, ry])
    no, ni = sch.last
    nm = values.get("panel_order", "mn") == "nm"
    first, tile = (no, mo) if nm else (mo, no)  # tile: the loop the register tile sits under
    tiles = g.extents[1] // ry if nm else g.extents[0] // rx
    parts: tuple[str, ...] = ()
    if values.get("parallel") == "outer" and tiles % parts_count == 0 and tiles > parts_count:
        sch = sch.split(first, [parts_count, None])
        parts, first = sch.last[:1], sch.last[1]
        if nm:
            no = first  # the column panel loop is now the inner part
    sch = sch.reorder(*parts, first, tile, g.loops[2], mi, ni)
    sch = sch.cache_write(g.block, 0, "local")
    out = sch.last[0]
    sch = sch.reverse_compute_at(out, tile)
    if values.get("cache_b"):
        sch = sch.cache_read(g.block, _read_index(sch, g.block, g.b), "global")
        panel = sch.last[0]
        sch = sch.compute_at(panel, no)
    for loop in (mi, ni, *_loops_under(sch, out, tile)):
        sch = sch.unroll(loop)
    if values.get("parallel") == "outer":
        sch = sch.parallel((*parts, first)[0])
    return sch.set_vectorizer("slp")


def _loops_under(sch: Schedule, block: str, loop: str) -> list[str]:
    """The loops between ``loop`` and ``block`` (the copy-out loops of the register tile)."""
    blk = next(b for b in ir.collect(sch.func.body, ir.Block) if b.name == block)
    names = [f.loop_var.name for f in loops_of(sch.func, blk)]
    return names[names.index(loop) + 1 :]
