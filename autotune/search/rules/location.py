"""Where each intermediate is computed, how a tiled one keeps its overlapping rows, and padded copies."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...analysis.chain import Cascade
from ...analysis.stage_loops import _block
from ...schedule import Schedule
from ..space_family import Domain, Requires, choice_domain
from ..target import Target
from .base import Chain, Nest, Rule

__all__ = ["Inline", "Location", "Padding", "Window", "kept", "locations", "placed"]


def locations(c: Cascade, values: Mapping[str, Any]) -> dict[str, str]:
    """Where each movable stage is computed: ``inline`` (``inline_<stage>``), else ``at_<stage>``,
    except that a stage whose reader stays at root stays at root too (its ``at_`` knob is inactive
    then, and holds its default); an inlined reader counts as its own readers."""
    readers = dict(c.consumers)
    where: dict[str, str] = {}

    def in_tile(stage: str) -> bool:
        if where[stage] == "inline":
            return all(in_tile(r) for r in readers.get(stage, ()))
        return where[stage] == "tile"

    for stage in reversed(c.movable):
        if values.get(f"inline_{stage}", False):
            where[stage] = "inline"
            continue
        at_tile = values[f"at_{stage}"] == "tile" and all(in_tile(r) for r in readers.get(stage, ()))
        where[stage] = "tile" if at_tile else "root"
    return where


def placed(nest: Nest, c: Cascade, values: Mapping[str, Any]) -> dict[str, str]:
    """``nest.at``, the :func:`locations` of ``c``'s movable stages, worked out by the first rule of
    an application that asks (Padding, then Location and Window read it)."""
    if len(nest.at) != len(c.movable):
        nest.at = locations(c, values)
    return nest.at


def kept(chain: Chain, stage: str) -> Requires:
    """The requirement that ``stage`` is not inlined (none for a stage that cannot be)."""
    return ((f"inline_{stage}", (False,)),) if stage in chain.inlinable else ()


class Inline(Rule):
    """``inline_<stage>`` false | true: for an elementwise intermediate (a bias add, an activation,
    a scale written as a stage of its own), compute it inside every reader instead of storing it
    (``compute_inline``, MetaSchedule's AutoInline): no buffer, no pass over it, its expression
    recomputed where it is read. An inlined stage has no location, window or pool: those knobs are
    conditional on ``inline_<stage>`` false."""

    name = "inline"
    off = (("inline_*", False),)

    patterns = ("inline_*",)

    def domains(self, chain: Chain) -> list[Domain]:
        return [choice_domain(f"inline_{s}", (False, True), kind="location") for s in chain.inlinable]

    def apply(
        self, sch: Schedule, c: Cascade, values: Mapping[str, Any], nest: Nest, target: Target
    ) -> Schedule:
        for stage in c.movable:
            if values.get(f"inline_{stage}", False):
                sch = sch.compute_inline(stage)
        return sch


class Padding(Rule):
    """For a stage that pads a read inline (a select on the bounds of the buffer it reads, as the
    operator library writes a padded convolution or pool; every cascade stage with such a read):

    - ``pad_<stage>`` inline | copy: keep the select in the stage's reduction, or compute a padded
      copy of the buffer first (``hoist_padding``) and read it with plain loads;
    - ``padat_<stage>`` tile | root: where the padded copy is computed: at the tile loop (a window
      of the tile's rows and their halo, recomputed per tile) or whole, first. Conditional: only
      with ``pad_<stage>`` copy, the stage at the tile loop, and every movable producer of the
      padded buffer at root; otherwise the copy goes where it must (with the stage when the stage
      is at root, at the tile loop when its producer is).

    The copies are made here at root; :class:`Location` moves those that go to the tile loop.
    """

    name = "padding"
    off = (("pad_*", "inline"),)

    patterns = ("pad_*", "padat_*")

    def domains(self, chain: Chain) -> list[Domain]:
        c = chain.cascade
        out = []
        for stage, _, producers in c.padded:
            out.append(choice_domain(f"pad_{stage}", ("inline", "copy"), kind="layout"))
            where = (
                (f"pad_{stage}", ("copy",)),
                *(((f"at_{stage}", ("tile",)),) if stage in c.movable else ()),
                *((f"at_{p}", ("root",)) for p in producers),
            )
            out.append(choice_domain(f"padat_{stage}", ("tile", "root"), where, kind="location"))
        return out

    def apply(
        self, sch: Schedule, c: Cascade, values: Mapping[str, Any], nest: Nest, target: Target
    ) -> Schedule:
        at = placed(nest, c, values)
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
                    nest.copies.setdefault(stage, []).append(sch.last[0])
        return sch


class Location(Rule):
    """``at_<stage>`` tile | root: compute an intermediate stage at the tile loop, or whole at root.
    Conditional: only while every movable stage that reads it is at the tile loop too (a reader at
    root runs outside the loop, and compute_at would refuse); otherwise at root. The padded copies
    that go to the tile loop (:class:`Padding`) go there with their stage."""

    name = "location"
    off = (("at_*", "root"),)

    patterns = ("at_*",)

    def domains(self, chain: Chain) -> list[Domain]:
        c = chain.cascade
        readers = dict(c.consumers)
        inline = chain.inlinable

        def at_tile(stage: str) -> list[str]:
            """The readers that must be at the tile loop for ``stage`` to be there: an inlinable
            reader and, as it may be inlined, its own readers."""
            out = []
            for r in readers.get(stage, ()):
                out += [r, *(at_tile(r) if r in inline else [])]
            return out

        return [
            choice_domain(
                f"at_{s}",
                ("tile", "root"),
                (*kept(chain, s), *((f"at_{r}", ("tile",)) for r in dict.fromkeys(at_tile(s)))),
                kind="location",
            )
            for s in c.movable
        ]

    def apply(
        self, sch: Schedule, c: Cascade, values: Mapping[str, Any], nest: Nest, target: Target
    ) -> Schedule:
        at = placed(nest, c, values)
        tile_loop = nest.outer[-1]
        for pad in nest.copies.get(c.last, ()):
            sch = sch.compute_at(pad, tile_loop)
        for stage in reversed([s for s in c.movable if at[s] == "tile"]):
            sch = sch.compute_at(stage, tile_loop)
            for pad in nest.copies.get(stage, ()):
                sch = sch.compute_at(pad, tile_loop)
        return sch


class Window(Rule):
    """``mode_<stage>`` recompute | rolling: for an intermediate at the tile loop whose rows overlap
    from tile to tile (a later stage reads it through a window), recompute the overlapping rows in
    every tile or keep them in a rolling buffer (``rolling_buffer``). Conditional: only at tile."""

    name = "window"
    off = (("mode_*", "recompute"),)

    patterns = ("mode_*",)

    def domains(self, chain: Chain) -> list[Domain]:
        c = chain.cascade
        return [
            choice_domain(
                f"mode_{s}",
                ("recompute", "rolling") if s in c.rollable else ("recompute",),
                (*kept(chain, s), (f"at_{s}", ("tile",))),
                kind="window",
            )
            for s in c.movable
        ]

    def apply(
        self, sch: Schedule, c: Cascade, values: Mapping[str, Any], nest: Nest, target: Target
    ) -> Schedule:
        at = placed(nest, c, values)
        for stage in c.movable:
            if at[stage] == "tile" and values[f"mode_{stage}"] == "rolling":
                sch = sch.rolling_buffer(stage, 0)
        return sch
