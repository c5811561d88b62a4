"""Operand staging: a tile's part of a chain input copied at the tile loop, in a pool, double-buffered."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...analysis.chain import Cascade
from ...analysis.stage_loops import _block
from ...schedule import Schedule
from ..space_family import Domain, choice_domain
from ..target import Target
from .base import Chain, Nest, Rule
from .location import kept, locations

__all__ = ["Staging", "staged_inputs"]


def staged_inputs(c: Cascade, values: Mapping[str, Any], at: Mapping[str, str]) -> list[tuple[str, str]]:
    """The (stage, input) pairs staged under ``values``: ``stage_<stage>_<input>`` tile, the stage at the
    tile loop (``at``: a stage kept at root runs outside it) and reading the input itself (not a
    padded copy of it, ``pad_<stage>`` copy)."""
    pads = {stage: buffers for stage, buffers, _ in c.padded}
    return [
        (stage, buf)
        for stage, buf in c.stageable
        if values.get(f"stage_{stage}_{buf}", "none") == "tile"
        and at.get(stage, "tile") == "tile"
        and not (buf in pads.get(stage, ()) and values.get(f"pad_{stage}", "inline") == "copy")
    ]


class Staging(Rule):
    """For a stage that reads a chain input through its rows (a convolution's or a pool's input
    window, a dense layer's rows; ``Cascade.stageable``), when the config has pools:

    - ``stage_<stage>_<input>`` none | tile: copy the rows of the input that one tile reads (with its
      window's halo) into a buffer at the tile loop (``cache_read`` + ``compute_at``), which the
      stage reads instead: the tile's operand in a pool of its own (``pool_<stage>_<input>``,
      :class:`~autotune.search.rules.pools.Pools`), a scratchpad next to the compute, while the
      input stays where the caller keeps it. Conditional: only with the stage at the tile loop and
      reading the input itself (``pad_<stage>`` inline: a padded copy is a staged copy already).
    - ``dbuf_<stage>_<input>`` false | true: double-buffer the staged copy (``double_buffer``): two slots,
      the copy for the next tile filled while the current one is read, as a DMA engine would
      overlap them; twice the copy's bytes. Conditional: only with ``stage_<stage>_<input>`` tile. With
      a register tile on the stage, the nest compiled as a function of its own (SLP) takes the two
      slots as a tuple of two arrays.

    On a CPU host the copy is extra work that nothing overlaps; the knobs exist for the memory
    system the config describes (a fast pool too small for the whole input), and the exact peak of
    every candidate counts the copies.
    """

    name = "staging"
    off = (("stage_*", "none"),)

    patterns = ("stage_*", "dbuf_*")

    def domains(self, chain: Chain) -> list[Domain]:
        c = chain.cascade
        if not chain.pools:
            return []
        pads = {stage: buffers for stage, buffers, _ in c.padded}
        out = []
        for stage, buf in c.stageable:
            where = (
                *kept(chain, stage),
                *(((f"at_{stage}", ("tile",)),) if stage in c.movable else ()),
                *(((f"pad_{stage}", ("inline",)),) if buf in pads.get(stage, ()) else ()),
            )
            out.append(choice_domain(f"stage_{stage}_{buf}", ("none", "tile"), where, kind="location"))
            out.append(
                choice_domain(f"dbuf_{stage}_{buf}", (False, True), ((f"stage_{stage}_{buf}", ("tile",)),), kind="location")
            )
        return out

    def apply(
        self, sch: Schedule, c: Cascade, values: Mapping[str, Any], nest: Nest, target: Target
    ) -> Schedule:
        for stage, buf in staged_inputs(c, values, nest.at or locations(c, values)):
            reads = [r.buffer.name for r in _block(sch.func, stage).reads]
            sch = sch.cache_read(stage, reads.index(buf))
            copy = sch.last[0]
            sch = sch.compute_at(copy, nest.outer[-1])
            nest.staged[stage, buf] = copy
            if values.get(f"dbuf_{stage}_{buf}", False):
                sch = sch.double_buffer(copy)
        return sch
