"""The ``cascade`` family: a chain of stages computed tile by tile at the row loop of its last stage.

The stages come from the function, in program order (:mod:`autotune.analysis.chain`). The *last
stage* is the latest block with a *row axis*: a spatial loop (extent > 1) whose iter var indexes
exactly one dimension of each intermediate it reads, and so on back through every earlier stage (a
pooling or convolution chain carries its rows from stage to stage; a global pool does not, so a
classifier cascades up to the stage before its global pool). Later blocks stay where they are.

The knobs come from schedule rules (:mod:`autotune.search.rules`), one class per job, each
documenting its knobs: rows per tile and strips (``tile_rows``, ``strip``), padded copies
(``pad_<stage>``, ``padat_<stage>``), where each intermediate is computed (``at_<stage>``), rolling
or recompute (``mode_<stage>``), fusing, unrolling and jamming short windows (``fuse_``,
``unroll_``, ``jam_``, ``jamrows_<stage>``), register tiles of contractions (``regtile_``,
``dot_``, ``chblock_``, ``pack_<stage>``), staged inputs (``stage_``, ``dbuf_<stage>_<input>``), the cores
and the vector mark (``parallel``, ``copy_pad``, ``vectorize``), and pools (``pool_<stage>``). A per-stage knob is named after the function's
block; a space file may narrow them with glob keys (``at_*``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .. import ir
from ..analysis.chain import Cascade, analyze_cascade
from ..schedule import Schedule
from .rules import (
    Chain,
    Inline,
    Location,
    Nest,
    Padding,
    Parallel,
    Pools,
    RegisterTile,
    RowTiles,
    Rule,
    Staging,
    Strip,
    Unroll,
    Vectorize,
    Window,
    channel_blocks,
)
from .space_family import Domain, Family
from .target import Target

__all__ = ["Cascade", "CascadeFamily", "analyze_cascade", "channel_blocks"]

_ROW_TILES, _STRIP, _PADDING, _LOCATION, _WINDOW = RowTiles(), Strip(), Padding(), Location(), Window()
_INLINE, _STAGING = Inline(), Staging()
_UNROLL, _REGISTER_TILE, _PARALLEL, _VECTORIZE, _POOLS = (
    Unroll(),
    RegisterTile(),
    Parallel(),
    Vectorize(),
    Pools(),
)

APPLY_ORDER: tuple[Rule, ...] = (
    _ROW_TILES, _STRIP, _INLINE, _PADDING, _LOCATION, _WINDOW, _STAGING, _UNROLL, _REGISTER_TILE, _PARALLEL,
    _VECTORIZE, _POOLS,
)  # fmt: skip
"""The order the rules schedule in: the tile loop first, every stage moved to it before the loops
below it are fused, unrolled or register-tiled, the parallel and vector marks and pools last."""

KNOB_ORDER: tuple[Rule, ...] = (
    _ROW_TILES, _INLINE, _LOCATION, _WINDOW, _POOLS, _STRIP, _REGISTER_TILE, _UNROLL, _PADDING, _STAGING, _PARALLEL,
    _VECTORIZE,
)  # fmt: skip
"""The order of the knobs in a space (what a sampler sees; the default assignment's order)."""


class CascadeFamily(Family):
    """Tile a chain over the rows of its last stage (see the module docstring)."""

    name = "cascade"
    patterns = tuple(p for rule in KNOB_ORDER for p in rule.patterns)
    rules = tuple((rule.name, rule.off) for rule in APPLY_ORDER)
    max_tile = 32

    def domains(
        self, func: ir.Func, pools: Sequence[str], max_tile: int, target: Target
    ) -> tuple[Domain, ...]:
        chain = Chain(analyze_cascade(func), target, tuple(pools), max_tile, func)
        return tuple(d for rule in KNOB_ORDER for d in rule.domains(chain))

    def apply(self, sch: Schedule, values: Mapping[str, Any], target: Target) -> Schedule:
        c = analyze_cascade(sch.func)
        nest = Nest()
        for rule in APPLY_ORDER:
            sch = rule.apply(sch, c, values, nest, target)
        return sch
