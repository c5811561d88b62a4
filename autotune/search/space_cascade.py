"""The ``cascade`` family: a chain of stages computed tile by tile at the row loop of its last stage.

The stages come from the function, in program order. The *last stage* is the
latest block with a *row axis*: a spatial loop (extent > 1) whose iter var
indexes exactly one dimension of each intermediate it reads, and so on back
through every earlier stage (a pooling or convolution chain carries its rows
from stage to stage; a global pool does not, so a classifier cascades up to the
stage before its global pool). Later blocks stay where they are. Knobs::

    tile_rows       rows of the last stage's output per tile (divisors of the rows and powers of two)
    at_<stage>      root | tile: compute an intermediate stage at the tile loop. Conditional: only
                    while every movable stage that reads it is at the tile loop too (a reader at
                    root runs outside the loop, and compute_at would refuse); otherwise at root
    mode_<stage>    recompute | rolling: keep the overlapping rows (rolling_buffer); only when at tile
    pool_<stage>    the pool of the stage's buffer (set_pools) for every intermediate buffer
    strip           0 | columns of the last stage's output per strip: the strip loop goes above
                    the tile loop, so intermediates hold tile x strip windows (0: whole rows)
    parallel        none | outer: split the tile loop in two halves run by prange
    copy_pad        0 | 4096: leave that many untouched bytes after each half's private copy of an
                    intermediate (``parallel(copy_pad=...)``). On this machine two threads writing
                    within 4 KiB of each other (side-by-side copies, or the end of one buffer's copies
                    next to the start of the next's) ran up to 1.7x slower in some processes
                    (experiments/copy_pad.py). Conditional: only with parallel outer
    fuse_<stage>    false | true: fuse the stage's two innermost spatial loops (columns x channels)
                    into one loop; over a row-major buffer it is one long contiguous loop, which
                    LLVM vectorises far better than a short channel loop (measured 2x on two 3x3 max
                    pools, experiments/knob_variants.py).
                    Conditional: only without regtile_<stage>
    unroll_<stage>  false | true: unroll the stage's reduction loops (a 3x3 window, a short channel
                    sum; only where they total at most codegen.UNROLL_LIMIT iterations); the code
                    generator writes the accumulation as a balanced tree (measured 1.6x on two 3x3 max
                    pools, experiments/knob_variants.py).
                    Conditional: only without regtile_<stage>
    jam_<stage>     1 | 2 | 4: unroll-and-jam that many neighbouring output columns (at most: the
                    largest divisor of the column loop) below the channel loop, the window's columns
                    outside its rows; the unrolled copies share their loads and each column's partial
                    result (a 3x3 max over 4 columns: 18 loads and 18 max instead of 36 and 32).
                    Conditional: only with unroll_<stage> and without fuse_<stage> (the tuner samples
                    it only then; elsewhere it changes nothing)
    jamrows_<stage> 1 | 2 | 4: unroll-and-jam that many neighbouring output rows too (at most: the
                    largest divisor of the stage's row loop in a tile, and for a rolling buffer of
                    the rows that consecutive tiles share: 2 for a 3x3 window), outside the jammed
                    columns. The copies of a row share its window's rows with the next: a 3x3 max
                    takes one max per column after the first row (codegen's ``Partials`` reuses
                    the pair of rows that both windows hold). Two 3x3 max pools on the Zen 3 host:
                    jamrows 2 on both ran 0.774x the tuned time, in one process
                    (experiments/knob_variants.py, results/knob_variants_pool_chain.md).
                    Conditional like jam_.
    pack_<stage>    block | root: for a register-tiled stage that reads an operand across its channels
                    with a stride (a dense layer's weight [O, K], a matmul's K[j, d]), copy that operand
                    with the channel dimension last per block of channels (a [K, block] copy, made again
                    for every row tile) or whole, first (a [K, O] copy, made once; more workspace).
                    MLP 128x512->2048->512 on the AVX-512 host, loaded: tile 4 rows x 64 channels over
                    block copies with 32-row tiles 1.9x faster than without a tile (ad hoc, one process)
    regtile_<stage> 0 | 1 | 2 | 4 | 8 | 16: a register tile of that many output columns (at most: the
                    largest divisor of the column loop whose accumulators fit the registers) by a
                    block of the stage's channels (chblock_<stage>), for a contraction
                    (a convolution of any kernel size, depthwise or not; a dense layer or a matmul,
                    whose own rows stand for the columns, with at least 2 rows per tile:
                    :func:`~autotune.analysis.stage_loops._tile_plan`). The
                    reduction loops go above the unrolled columns and channels, the accumulators live
                    in registers over the whole reduction, and the nest is outlined and compiled with
                    the SLP vectoriser (``set_vectorizer(loop=...)``), while the rest of the kernel
                    keeps the loop vectoriser.
                    Where the stage's columns are guarded (a strip's halo at the image border), a
                    one-column tile keeps its guard on the column loop, above the reduction
                    (``hoist_guards``); a wider tile guards each unrolled column in its updates and
                    its copy-out, its accumulators still in registers (``promote_accumulators``).
                    A 1x1 expand convolution under 28-column strips on the Zen 3 host: 1.0 ms with
                    a one-column tile against 1.14-1.5 ms without, in the same process
                    (results/knob_variants_bottleneck.md).
                    Offered up to as many accumulators as the host's vector registers hold
                    (``Target.register_floats``: 128 float32 on AVX2, 512 on
                    AVX-512). A tiled stage is neither fused nor
                    unrolled: fuse_<stage> and unroll_<stage> are conditional on regtile_<stage> 0.
                    (It was the other way round, regtile conditional on unroll off; TPE then
                    learnt early that unrolling beats the plain loop and seldom drew a tile: in
                    one 280-trial run, 238 unrolled the expand stage, 32 drew its tile, 6 of those
                    ran and none of the 6 was parallel.)
    chblock_<stage> the channels of a register tile: the largest divisor of the stage's channels up to
                    codegen's UNROLL_LIMIT (48 of 96; the default), or a smaller divisor that fills
                    whole float32 vectors of the target (16 channels, one 512-bit register). A
                    narrower block leaves room for more columns, and makes a packed operand's panel
                    ([reduction, block]) smaller: a dense 2048->512's 64-channel panel is 512 KiB, its
                    16-channel one 128 KiB. Conditional: only with regtile_<stage> above 0
    pad_<stage>     inline | copy: for a stage that pads a read inline (a select on the bounds of
                    the buffer it reads, as the operator library writes a padded convolution or
                    pool), keep the select in the stage's reduction, or compute a padded copy of
                    the buffer first (``hoist_padding``) and read it with plain loads. Offered for
                    every cascade stage with such a read.
    padat_<stage>   tile | root: where the padded copy is computed: at the tile loop (a window of
                    the tile's rows and their halo, recomputed per tile) or whole, first.
                    Conditional: only with pad_<stage> copy, the stage at the tile loop, and every
                    movable producer of the padded buffer at root; otherwise the copy goes where
                    it must (with the stage when the stage is at root, at the tile loop when its
                    producer is)
    vectorize       mark the innermost non-reduction loop of the last stage (the fused one if fused);
                    conditional: only when the last stage has no register tile

``parallel: outer`` splits the row loop as ``[2, None, tile_rows]`` before any
stage moves, so each half has its own tile loop and rolling windows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .. import ir
from ..analysis.chain import Cascade, analyze_cascade
from ..analysis.stage_loops import (
    _block,
    _fusable_pair,
    _jam_plan,
    _reduction_loops,
    _row_loop,
    _shared_rows,
    _tile_plan,
)
from ..errors import ScheduleError
from ..schedule import Schedule
from .space_family import Domain, Family, choice_domain, divisors, int_domain
from .target import Target

__all__ = ["Cascade", "CascadeFamily", "analyze_cascade"]


def _jam(sch: Schedule, stage: str, row_dim: int, columns: int, rows: int = 1) -> Schedule:
    """Unroll-and-jam: ``columns`` neighbouring output columns and ``rows`` neighbouring output rows of
    ``stage`` (at most; the largest divisors of the column loop's and the row loop's extents not above
    them, and for a rolling buffer of the rows that consecutive tiles share too) as unrolled copies
    below the channel loop, rows outside columns, with the window's columns outside its rows, so that
    the copies share loads and partial results (codegen's ``Partials``)."""
    block = _block(sch.func, stage)
    plan = _jam_plan(sch.func, block, row_dim)
    if plan is None:
        raise ScheduleError("jam", f"stage '{stage}' has no column loop that its window slides along")
    extent = ir.as_int(sch.get_loop(plan.column).extent) or 1
    factor = max(d for d in divisors(extent) if d <= columns)
    row_loop = _row_loop(sch.func, block, row_dim) if rows > 1 else None
    if row_loop is not None and any(b.name != stage for b in ir.collect(row_loop.body, ir.Block)):
        row_loop = None  # the tile loop itself (one row per tile): other stages share it
    row_factor = 1
    if row_loop is not None:
        shared = _shared_rows(block)
        row_factor = max(
            d
            for d in divisors(ir.as_int(row_loop.extent) or 1)
            if d <= rows and (shared is None or shared % d == 0)
        )
    if factor == 1 and row_factor == 1:
        return sch
    inner: list[str] = []
    if row_factor > 1:
        assert row_loop is not None
        sch = sch.split(row_loop.loop_var.name, [None, row_factor])
        inner.append(sch.last[1])
    column = plan.column
    if factor > 1:
        sch = sch.split(plan.column, [None, factor])
        column = sch.last[0]
        inner.append(sch.last[1])
    sch = sch.reorder(column, *plan.below, *inner, *plan.sliding, *plan.others)
    for loop in inner:
        sch = sch.unroll(loop)
    return sch


COPY_PADS = (0, 4096)
"""``copy_pad`` choices: none, or a page. In processes where a tuned inverted-bottleneck kernel ran
slow, a gap of 0-256 bytes after the copies left it slow, 1 KiB helped a little, and 4, 16 and 44 KiB
all made it fast; padding to 64 KiB was no faster than 4 KiB (results/copy_pad.md)."""


REGISTER_COLUMNS = (1, 2, 4, 8, 16)
"""Output columns a register tile may hold (``regtile_<stage>``), as many as fit the registers beside
the smallest channel block."""


def channel_blocks(channels: int, largest: int, target: Target) -> tuple[int, ...]:
    """Channels a register tile may hold, most first: ``largest`` (the most codegen unrolls) and
    the smaller divisors of ``channels`` that fill whole float32 vectors of ``target``."""
    lanes = target.vector_bits // 32
    return tuple(
        sorted({largest, *(d for d in divisors(channels) if d < largest and d % lanes == 0)}, reverse=True)
    )


def _register_tile(
    sch: Schedule,
    stage: str,
    row_dim: int,
    columns: int,
    pack: str = "block",
    channels: int | None = None,
    accumulators: int | None = None,
) -> Schedule:
    """``columns`` output columns by ``channels`` channels of ``stage`` (a divisor of its channel
    loop; default ``_TilePlan.block``, all of them when codegen unrolls that many), accumulated in
    registers over its reduction loops; the nest from the column loop down is compiled with SLP.
    The columns are at most the largest divisor of the column loop with ``columns x channels``
    within ``accumulators`` (the registers' floats). An operand read across the channels with a
    stride (a dense weight) is first copied with its channel dimension last, per channel block
    (``pack="block"``: a [reduction, block] panel) or whole (``"root"``)."""
    block = _block(sch.func, stage)
    plan = _tile_plan(sch.func, block, row_dim)
    if plan is None:
        raise ScheduleError("regtile", f"stage '{stage}' is not a contraction over columns and channels")
    width = plan.block if channels is None else channels
    if plan.channels % width:
        raise ScheduleError("regtile", f"stage '{stage}': {width} channels do not divide its {plan.channels}")
    room = accumulators or columns * width
    factor = max(d for d in divisors(plan.columns) if d <= columns and (d == 1 or d * width <= room))
    outer, above, tile = plan.column, [], [plan.channel]
    if width < plan.channels:
        sch = sch.split(plan.channel, [None, width])
        above, tile = [sch.last[0]], [sch.last[1]]
    if factor > 1:
        sch = sch.split(plan.column, [None, factor])
        outer, inner = sch.last
        tile.insert(0, inner)
    # an operand read across the channels with a stride is copied per channel block with the channel
    # dimension last, once for all the columns: the channel block loop goes above them
    order = [*above, outer] if plan.packed else [outer, *above]
    sch = sch.reorder(*order, *plan.reductions, *tile)
    for loop in tile:
        sch = sch.unroll(loop)
    for index in plan.packed:
        sch = _pack(sch, stage, index, above[0] if above and pack == "block" else None)
    return sch.set_vectorizer(
        "slp", loop=outer
    )  # the copy stays outside the outlined nest, allocated per block


def _pack(sch: Schedule, stage: str, index: int, loop: str | None) -> Schedule:
    """A copy of ``stage``'s read ``index`` with the dimension its channel variable indexes moved last,
    made at ``loop`` (the channel block: compaction keeps that block's rows) or, without one, first."""
    block = _block(sch.func, stage)
    buffer = block.reads[index].buffer
    load = next(ld for ld in ir.collect(block.body, ir.BufferLoad) if ld.buffer is buffer)
    store = next(st for st in ir.collect(block.body, ir.BufferStore) if st.buffer is block.writes[0].buffer)
    channel = ir.free_vars(store.indices[-1])
    dim = next(d for d, i in enumerate(load.indices) if channel & ir.free_vars(i))
    perm = [d for d in range(len(load.indices)) if d != dim] + [dim]
    sch = sch.cache_read(stage, index)
    copy = sch.last[0]
    if loop is not None:
        sch = sch.compute_at(copy, loop)
    return sch.transform_layout(copy, copy, lambda *idx: [idx[d] for d in perm])


def _locations(c: Cascade, values: Mapping[str, Any]) -> dict[str, str]:
    """Where each movable stage is computed: ``at_<stage>``, except that a stage whose reader stays
    at root stays at root too (its ``at_`` knob is inactive then, and holds its default)."""
    readers = dict(c.consumers)
    where: dict[str, str] = {}
    for stage in reversed(c.movable):
        at_tile = values[f"at_{stage}"] == "tile" and all(where[r] == "tile" for r in readers.get(stage, ()))
        where[stage] = "tile" if at_tile else "root"
    return where


def _hoist_padding(
    sch: Schedule, c: Cascade, values: Mapping[str, Any], at: Mapping[str, str]
) -> tuple[Schedule, dict[str, list[str]]]:
    """The padded copies that ``pad_<stage>`` asks for, made at root; returns, per stage, the copies
    that go to the tile loop (``padat_<stage>``, or where the stage and the producers force them)."""
    at_tile: dict[str, list[str]] = {}
    for stage, buffers, producers in c.padded:
        if values.get(f"pad_{stage}", "inline") != "copy":
            continue
        if at.get(stage, "tile") == "root":
            where = "root"
        elif any(at[p] == "tile" for p in producers):
            where = "tile"
        else:
            where = values[f"padat_{stage}"]
        for name in buffers:
            reads = [r.buffer.name for r in _block(sch.func, stage).reads]
            sch = sch.hoist_padding(stage, reads.index(name))
            if where == "tile":
                at_tile.setdefault(stage, []).append(sch.last[0])
    return sch, at_tile


def tile_choices(rows: int, cap: int) -> list[int]:
    """Divisors of ``rows`` and powers of two, both up to ``min(rows, cap)``."""
    top = min(rows, cap)
    powers = [1 << k for k in range(top.bit_length()) if 1 << k <= top]
    return sorted({*(d for d in divisors(rows) if d <= top), *powers})


class CascadeFamily(Family):
    """Tile a chain over the rows of its last stage (see the module docstring)."""

    name = "cascade"
    patterns = (
        "at_*", "mode_*", "pool_*", "fuse_*", "unroll_*", "jam_*", "jamrows_*", "regtile_*", "chblock_*", "pack_*", "pad_*", "padat_*",
    )  # fmt: skip
    max_tile = 32

    def domains(self, func: ir.Func, pools: Sequence[str], max_tile: int, target: Target) -> tuple[Domain, ...]:
        c = analyze_cascade(func)
        row_tiles = tile_choices(c.rows, max_tile)
        out = [int_domain("tile_rows", row_tiles, 1, c.rows)]
        readers = dict(c.consumers)
        out += [
            choice_domain(
                f"at_{s}", ("tile", "root"), tuple((f"at_{r}", ("tile",)) for r in readers.get(s, ())), kind="location"
            )
            for s in c.movable
        ]
        out += [
            choice_domain(
                f"mode_{s}",
                ("recompute", "rolling") if s in c.rollable else ("recompute",),
                ((f"at_{s}", ("tile",)),),
                kind="window",
            )
            for s in c.movable
        ]
        if pools:
            out += [choice_domain(f"pool_{block}", tuple(pools), kind="pool") for block, _ in c.buffers]
        if c.col_loop is not None:
            strips = [t for t in tile_choices(c.cols, c.cols // 2) if t >= 4]
            out.append(int_domain("strip", [0, *strips], 0, c.cols))
        tileable = dict(c.tileable)
        for s, block in c.tileable:
            blocks = channel_blocks(dict(c.tile_channels)[s], block, target)
            tiles = tuple(t for t in REGISTER_COLUMNS if t * blocks[-1] <= target.register_floats)
            # a tile over the rows needs rows in the tile loop
            rows = (("tile_rows", tuple(t for t in row_tiles if t > 1)),) if s in c.row_tiled else ()
            out.append(choice_domain(f"regtile_{s}", (0, *tiles), rows, kind="tile"))
            if len(blocks) > 1:
                out.append(choice_domain(f"chblock_{s}", blocks, ((f"regtile_{s}", tiles),), kind="tile"))
            if s in c.packable and blocks[-1] < dict(c.tile_channels)[s]:
                out.append(
                    choice_domain(f"pack_{s}", ("block", "root"), ((f"regtile_{s}", tiles),), kind="location")
                )
        untiled = {s: ((f"regtile_{s}", (0,)),) if s in tileable else () for s in {*c.fusable, *c.unrollable}}
        out += [choice_domain(f"fuse_{s}", (False, True), untiled[s], kind="unroll") for s in c.fusable]
        out += [choice_domain(f"unroll_{s}", (False, True), untiled[s], kind="unroll") for s in c.unrollable]
        for knob in ("jam", "jamrows"):
            out += [
                choice_domain(
                    f"{knob}_{s}",
                    (1, 2, 4),
                    ((f"unroll_{s}", (True,)), *(((f"fuse_{s}", (False,)),) if s in c.fusable else ())),
                    kind="unroll",
                )
                for s in c.jammable
            ]
        for stage, _, producers in c.padded:
            out.append(choice_domain(f"pad_{stage}", ("inline", "copy"), kind="layout"))
            where = (
                (f"pad_{stage}", ("copy",)),
                *(((f"at_{stage}", ("tile",)),) if stage in c.movable else ()),
                *((f"at_{p}", ("root",)) for p in producers),
            )
            out.append(choice_domain(f"padat_{stage}", ("tile", "root"), where, kind="location"))
        out.append(choice_domain("parallel", ("none", "outer") if c.rows > 1 else ("none",), kind="parallel"))
        if c.rows > 1:
            out.append(choice_domain("copy_pad", COPY_PADS, (("parallel", ("outer",)),), kind="parallel"))
        last_tiled = ((f"regtile_{c.last}", (0,)),) if c.last in dict(c.tileable) else ()
        out.append(choice_domain("vectorize", (False, True), last_tiled, kind="vectorize"))
        return tuple(out)

    def apply(self, sch: Schedule, values: Mapping[str, Any], target: Target) -> Schedule:
        c = analyze_cascade(sch.func)
        tile = values["tile_rows"]
        if values["parallel"] == "outer":
            sch = sch.split(c.row_loop, [target.parallel_parts, None, tile])
        else:
            sch = sch.split(c.row_loop, [None, tile])
        outer, inner = sch.last[:-1], sch.last[-1]
        if c.above:
            sch = sch.reorder(*outer, *c.above)
        strip = values.get("strip", 0)
        if strip and c.col_loop is not None and strip < c.cols:
            sch = sch.split(c.col_loop, [None, strip])
            col_outer, col_inner = sch.last
            # the strip loop goes between the halves (prange) and the tile loop
            sch = sch.reorder(*outer[:-1], col_outer, outer[-1], inner, col_inner)
        at = _locations(c, values)
        sch, copies = _hoist_padding(sch, c, values, at)
        tiled = [s for s in c.movable if at[s] == "tile"]
        for pad in copies.get(c.last, ()):
            sch = sch.compute_at(pad, outer[-1])
        for stage in reversed(tiled):
            sch = sch.compute_at(stage, outer[-1])
            for pad in copies.get(stage, ()):
                sch = sch.compute_at(pad, outer[-1])
        for stage in tiled:
            if values[f"mode_{stage}"] == "rolling":
                sch = sch.rolling_buffer(stage, 0)
        vector_loop = inner if c.vector_loop == c.row_loop else c.vector_loop
        registers = {
            stage
            for stage, _ in c.tileable
            if values.get(f"regtile_{stage}", 0) and (stage not in c.row_tiled or tile > 1)
        }  # (a tile over the rows is inactive with one row per tile)
        # a register-tiled stage is neither fused nor unrolled (those knobs are inactive then)
        for stage in c.fusable:
            if stage in registers or not values.get(f"fuse_{stage}", False):
                continue
            pair = _fusable_pair(sch.func, _block(sch.func, stage), dict(c.row_dims)[stage])
            if pair is None:
                raise ScheduleError("fuse", f"stage '{stage}' has no two adjacent spatial loops left to fuse")
            sch = sch.fuse(*pair)
            if vector_loop in pair:
                vector_loop = sch.last[0]
        for stage in c.unrollable:
            if stage not in registers and values.get(f"unroll_{stage}", False):
                if stage in c.jammable and not values.get(f"fuse_{stage}", False):
                    rows = values.get(f"jamrows_{stage}", 1)
                    sch = _jam(sch, stage, dict(c.row_dims)[stage], values.get(f"jam_{stage}", 1), rows)
                for loop in _reduction_loops(sch.func, _block(sch.func, stage)) or ():
                    sch = sch.unroll(loop)
        for stage, _ in c.tileable:
            if stage in registers:
                sch = _register_tile(
                    sch,
                    stage,
                    dict(c.row_dims)[stage],
                    values[f"regtile_{stage}"],
                    values.get(f"pack_{stage}", "block"),
                    values.get(f"chblock_{stage}", dict(c.tileable)[stage]),
                    target.register_floats,
                )
        if len(outer) == 2:
            sch = sch.parallel(outer[0], copy_pad=values.get("copy_pad") or None)
        # a jam that split the last stage's innermost loop left unrolled copies there: nothing to vectorise
        if values["vectorize"] and c.last not in registers and vector_loop in sch.get_loops(c.last):
            sch = sch.vectorize(vector_loop)
        for block, buffer in c.buffers:
            if f"pool_{block}" in values:
                sch = sch.set_pools(block, buffer, [values[f"pool_{block}"]])
        return sch
