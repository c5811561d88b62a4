"""Schedules built from primitives that tests, experiments and users share."""

from __future__ import annotations

from collections.abc import Sequence

from .. import ir
from .schedule import Schedule


def cascade(func: ir.Func, consumer: str, producers: Sequence[str], tile: int, rolling: Sequence[str] = ()) -> Schedule:
    """Tile ``consumer``'s row loop by ``tile``; compute each producer (nearest first) at the tile loop.

    The producers in ``rolling`` then keep their rows in a rolling buffer instead of recomputing the halo.
    """
    sch = Schedule(func)
    rows = sch.get_loops(consumer)[1]
    sch = sch.split(rows, [None, tile])
    outer = sch.last[0]
    for p in producers:
        sch = sch.compute_at(p, outer)
    for p in rolling:
        sch = sch.rolling_buffer(p, 0)
    return sch
