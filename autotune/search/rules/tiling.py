"""Tiles: rows of the last stage per tile, strips of its columns, and register tiles of contractions."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ... import ir
from ...analysis.chain import Cascade
from ...analysis.stage_loops import _block, _tile_plan, _TilePlan
from ...errors import ScheduleError
from ...schedule import Schedule
from ..space_family import Domain, choice_domain, divisors, int_domain
from ..target import Target
from .base import Chain, Nest, Rule, register_tiled, tile_choices

__all__ = [
    "REGISTER_COLUMNS",
    "RegisterTile",
    "RowTiles",
    "Strip",
    "channel_blocks",
    "dot_channels",
    "dot_tile",
]


class RowTiles(Rule):
    """``tile_rows``: rows of the last stage's output per tile (divisors of the rows and powers of
    two). The row loop is split into the tile loop and the rows of a tile, and with ``parallel:
    outer`` first into as many parts as the target has cores (``[parts, None, tile_rows]``) before
    any stage moves, so that each part has its own tile loop and rolling windows. Loops above the
    row loop (a batch of more than one) go inside the tile loop."""

    name = "row_tiles"

    def domains(self, chain: Chain) -> list[Domain]:
        return [int_domain("tile_rows", chain.row_tiles, 1, chain.cascade.rows)]

    def apply(
        self, sch: Schedule, c: Cascade, values: Mapping[str, Any], nest: Nest, target: Target
    ) -> Schedule:
        tile = values["tile_rows"]
        if values["parallel"] == "outer":
            sch = sch.split(c.row_loop, [target.parallel_parts, None, tile])
        else:
            sch = sch.split(c.row_loop, [None, tile])
        nest.outer, nest.inner = tuple(sch.last[:-1]), sch.last[-1]
        if c.above:
            sch = sch.reorder(*nest.outer, *c.above)
        nest.vector_loop = nest.inner if c.vector_loop == c.row_loop else c.vector_loop
        return sch


class Strip(Rule):
    """``strip``: 0 | columns of the last stage's output per strip: the strip loop goes above the
    tile loop (below the parallel parts), so intermediates hold tile x strip windows (0: whole
    rows). Offered where the last stage has a column loop below its row loop."""

    name = "strip"
    off = (("strip", 0),)

    def domains(self, chain: Chain) -> list[Domain]:
        c = chain.cascade
        if c.col_loop is None:
            return []
        strips = [t for t in tile_choices(c.cols, c.cols // 2) if t >= 4]
        return [int_domain("strip", [0, *strips], 0, c.cols)]

    def apply(
        self, sch: Schedule, c: Cascade, values: Mapping[str, Any], nest: Nest, target: Target
    ) -> Schedule:
        strip = values.get("strip", 0)
        if strip and c.col_loop is not None and strip < c.cols:
            sch = sch.split(c.col_loop, [None, strip])
            col_outer, col_inner = sch.last
            sch = sch.reorder(*nest.outer[:-1], col_outer, nest.outer[-1], nest.inner, col_inner)
        return sch


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


class RegisterTile(Rule):
    """Multi-level tiling of every contraction (a convolution of any kernel size, depthwise or not;
    a dense layer or a matmul, whose own rows stand for the columns, with at least 2 rows per tile:
    :func:`~autotune.analysis.stage_loops._tile_plan`):

    - ``regtile_<stage>`` 0 | 1 | 2 | 4 | 8 | 16: a register tile of that many output columns (at
      most: the largest divisor of the column loop whose accumulators fit the registers) by a
      block of the stage's channels. The reduction loops go above the unrolled columns and
      channels, the accumulators live in registers over the whole reduction, and the nest is
      outlined and compiled with the SLP vectoriser (``set_vectorizer(loop=...)``), while the rest
      of the kernel keeps the loop vectoriser. Where the stage's columns are guarded (a strip's
      halo at the image border), a one-column tile keeps its guard on the column loop, above the
      reduction (``hoist_guards``); a wider tile guards each unrolled column in its updates and its
      copy-out, its accumulators still in registers (``promote_accumulators``). A 1x1 expand
      convolution under 28-column strips on the Zen 3 host: 1.0 ms with a one-column tile against
      1.14-1.5 ms without, in the same process (results/knob_variants_bottleneck.md). Offered up
      to as many accumulators as the host's vector registers hold (``Target.register_floats``: 128
      float32 on AVX2, 512 on AVX-512) beside the smallest channel block.
    - ``dot_<stage>`` 0 | 1 | 2 | 4 | 8, where every operand is contiguous along the stage's
      innermost reduction loop (a dense layer's weight [O, K], ``Q K^T``; ``Cascade.dot_tileable``):
      a tile of that many channels (0: the tile over a block of channels below) by the tile's
      columns, vectorised along the reduction instead of the channels (:func:`dot_tile`): one
      vector accumulator per output, no copy of an operand, so no workspace for the weight's
      panels and no copy per row tile. The columns are clamped to what the vector registers hold
      beside the tile's operand vectors. Figures: ``experiments/dot_tiles.py``.
    - ``chblock_<stage>``: the channels of the tile: the largest divisor of the stage's channels up
      to codegen's UNROLL_LIMIT (48 of 96; the default), or a smaller divisor that fills whole
      float32 vectors of the target (16 channels, one 512-bit register). A narrower block leaves
      room for more columns and makes a packed operand's panel ([reduction, block]) smaller: a
      dense 2048->512's 64-channel panel is 512 KiB, its 16-channel one 128 KiB. Conditional: only
      with ``regtile_<stage>`` above 0.
    - ``pack_<stage>`` block | root: for a tile that reads an operand across its channels with a
      stride (a dense layer's weight [O, K], a matmul's K[j, d]), copy that operand with the
      channel dimension last per block of channels (a [K, block] copy, made again for every row
      tile) or whole, first (a [K, O] copy, made once; more workspace). Offered where the smallest
      block is less than all the channels. Where the other operand is contiguous along the
      reduction too, the dot-product tile needs no copy and wins: MLP 128x512->2048->512 under a
      512 KiB limit on the AVX-512 host, 4 rows x 16 channels over block copies 8.7 ms, no tile
      5.4 ms, a 4x4 dot-product tile 1.8 ms (results/dot_tiles.md).

    A tiled stage is neither fused nor unrolled (:class:`~autotune.search.rules.unroll.Unroll`'s
    knobs are conditional on ``regtile_<stage>`` 0: the other way round, TPE learnt early that
    unrolling beats the plain loop and seldom drew a tile: in one 280-trial run, 238 unrolled the
    expand stage, 32 drew its tile, 6 of those ran and none of the 6 was parallel).
    """

    name = "register_tile"
    off = (("regtile_*", 0),)

    patterns = ("regtile_*", "dot_*", "chblock_*", "pack_*")

    def domains(self, chain: Chain) -> list[Domain]:
        c, target = chain.cascade, chain.target
        out = []
        for s, block in c.tileable:
            channels = dict(c.tile_channels)[s]
            blocks = channel_blocks(channels, block, target)
            tiles = tuple(t for t in REGISTER_COLUMNS if t * blocks[-1] <= target.register_floats)
            # a tile over the rows needs rows in the tile loop
            rows = (("tile_rows", tuple(t for t in chain.row_tiles if t > 1)),) if s in c.row_tiled else ()
            out.append(choice_domain(f"regtile_{s}", (0, *tiles), rows, kind="tile"))
            dots = dot_channels(channels, target) if s in c.dot_tileable else ()
            over_channels: tuple[tuple[str, tuple[Any, ...]], ...] = ((f"regtile_{s}", tiles),)
            if dots:
                out.append(choice_domain(f"dot_{s}", (0, *dots), over_channels, kind="tile"))
                over_channels = (*over_channels, (f"dot_{s}", (0,)))
            if len(blocks) > 1:
                out.append(choice_domain(f"chblock_{s}", blocks, over_channels, kind="tile"))
            if s in c.packable and blocks[-1] < channels:
                out.append(choice_domain(f"pack_{s}", ("block", "root"), over_channels, kind="location"))
        return out

    def apply(
        self, sch: Schedule, c: Cascade, values: Mapping[str, Any], nest: Nest, target: Target
    ) -> Schedule:
        tiled = register_tiled(c, values)
        for stage, block in c.tileable:
            if stage not in tiled:
                continue
            row_dim, columns = dict(c.row_dims)[stage], values[f"regtile_{stage}"]
            if values.get(f"dot_{stage}", 0):
                sch = dot_tile(sch, stage, row_dim, columns, values[f"dot_{stage}"], target.vector_registers)
            else:
                sch = register_tile(
                    sch,
                    stage,
                    row_dim,
                    columns,
                    values.get(f"pack_{stage}", "block"),
                    values.get(f"chblock_{stage}", block),
                    target.register_floats,
                )
        return sch


def dot_channels(channels: int, target: Target) -> tuple[int, ...]:
    """Channels a dot-product tile (:func:`dot_tile`) may hold: the divisors of ``channels`` among
    1, 2, 4, 8 whose one-column tile fits the vector registers."""
    return tuple(
        d for d in (1, 2, 4, 8) if channels % d == 0 and _dot_registers(1, d) <= target.vector_registers
    )


def _dot_registers(columns: int, channels: int) -> int:
    """Vector registers a dot-product tile holds: an accumulator per output, a vector per operand row."""
    return columns * channels + columns + channels


def register_tile(
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
    plan = _plan(sch, stage, row_dim, "regtile")
    width = plan.block if channels is None else channels
    room = accumulators or columns * width
    sch, outer, above = _tile_loops(
        sch, stage, plan, columns, width, lambda d: d == 1 or d * width <= room, "regtile"
    )
    for index in plan.packed:
        sch = _pack(sch, stage, index, above if above and pack == "block" else None)
    # the copy stays outside the outlined nest, allocated per block
    return sch.set_vectorizer("slp", loop=outer)


def dot_tile(
    sch: Schedule, stage: str, row_dim: int, columns: int, channels: int, registers: int
) -> Schedule:
    """``columns`` output columns by ``channels`` channels of ``stage`` whose operands are all
    contiguous along its innermost reduction loop (:attr:`~autotune.analysis.stage_loops._TilePlan.dot`:
    a dense layer with weights ``[O, K]``, ``Q K^T``): the reduction loops go above the unrolled
    tile, so that the innermost reduction loop holds ``columns x channels`` accumulators, which
    the loop vectoriser turns into one vector accumulator each, summed across lanes once at the
    end; each iteration loads one vector per column and per channel. No operand is copied (the
    copy-free alternative to :func:`register_tile`'s channels-last panels). The columns are at most
    the largest divisor of the column loop whose tile, with its operand vectors, fits ``registers``."""
    plan = _plan(sch, stage, row_dim, "dot_tile")
    if not plan.dot:
        raise ScheduleError(
            "dot_tile", f"stage '{stage}': an operand is not contiguous along its innermost reduction loop"
        )
    sch, _, _ = _tile_loops(
        sch, stage, plan, columns, channels, lambda d: _dot_registers(d, channels) <= registers, "dot_tile"
    )
    return sch


def _plan(sch: Schedule, stage: str, row_dim: int, primitive: str) -> _TilePlan:
    plan = _tile_plan(sch.func, _block(sch.func, stage), row_dim)
    if plan is None:
        raise ScheduleError(primitive, f"stage '{stage}' is not a contraction over columns and channels")
    return plan


def _tile_loops(
    sch: Schedule,
    stage: str,
    plan: _TilePlan,
    columns: int,
    width: int,
    fits: Callable[[int], bool],
    primitive: str,
) -> tuple[Schedule, str, str | None]:
    """Split ``plan``'s channel loop by ``width`` and its column loop by the largest divisor up to
    ``columns`` that ``fits``; put the reduction loops above the tile's unrolled columns and
    channels. Returns the schedule, the column loop above the tile and the channel-block loop (None
    when the tile holds all the channels)."""
    if plan.channels % width:
        raise ScheduleError(primitive, f"stage '{stage}': {width} channels do not divide its {plan.channels}")
    factor = max(d for d in divisors(plan.columns) if d <= columns and fits(d))
    outer, above, tile = plan.column, [], [plan.channel]
    if width < plan.channels:
        sch = sch.split(plan.channel, [None, width])
        above, tile = [sch.last[0]], [sch.last[1]]
    if factor > 1:
        sch = sch.split(plan.column, [None, factor])
        outer, inner = sch.last
        tile.insert(0, inner)
    # an operand read across the channels with a stride (a packed copy, or the rows of a dot-product
    # tile's operand) is read once for all the columns: the channel block loop goes above them
    order = [*above, outer] if plan.packed else [outer, *above]
    sch = sch.reorder(*order, *plan.reductions, *tile)
    for loop in tile:
        sch = sch.unroll(loop)
    return sch, outer, (above[0] if above else None)


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
