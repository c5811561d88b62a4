"""The cores and the vector units: the parallel parts of the tile loop, the last stage's vector mark."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...analysis.chain import Cascade
from ...schedule import Schedule
from ..space_family import Domain, choice_domain
from ..target import Target
from .base import Chain, Nest, Rule, register_tiled

__all__ = ["COPY_PADS", "Parallel", "Vectorize"]

COPY_PADS = (0, 4096)
"""``copy_pad`` choices: none, or a page. In processes where a tuned inverted-bottleneck kernel ran
slow, a gap of 0-256 bytes after the copies left it slow, 1 KiB helped a little, and 4, 16 and 44 KiB
all made it fast; padding to 64 KiB was no faster than 4 KiB (results/copy_pad.md)."""


class Parallel(Rule):
    """- ``parallel`` none | outer: run the tile loop's parts (one per core, split by
      :class:`~autotune.search.rules.tiling.RowTiles`) under prange; a buffer computed under it
      has one private copy per part.
    - ``copy_pad`` 0 | 4096: leave that many untouched bytes after each part's private copy of an
      intermediate (``parallel(copy_pad=...)``). Two threads writing within 4 KiB of each other
      (side-by-side copies, or the end of one buffer's copies next to the start of the next's) ran
      up to 1.7x slower in some processes (experiments/copy_pad.py). Conditional: only with
      ``parallel: outer``."""

    name = "parallel"
    off = (("parallel", "none"),)

    def domains(self, chain: Chain) -> list[Domain]:
        rows = chain.cascade.rows
        out = [choice_domain("parallel", ("none", "outer") if rows > 1 else ("none",), kind="parallel")]
        if rows > 1:
            out.append(choice_domain("copy_pad", COPY_PADS, (("parallel", ("outer",)),), kind="parallel"))
        return out

    def apply(
        self, sch: Schedule, c: Cascade, values: Mapping[str, Any], nest: Nest, target: Target
    ) -> Schedule:
        if len(nest.outer) == 2:
            sch = sch.parallel(nest.outer[0], copy_pad=values.get("copy_pad") or None)
        return sch


class Vectorize(Rule):
    """``vectorize`` false | true: mark the innermost non-reduction loop of the last stage (the fused
    one if fused). Conditional: only when the last stage has no register tile (its nest has the SLP
    vectoriser then)."""

    name = "vectorize"
    off = (("vectorize", False),)

    def domains(self, chain: Chain) -> list[Domain]:
        c = chain.cascade
        last_tiled = ((f"regtile_{c.last}", (0,)),) if c.last in dict(c.tileable) else ()
        return [choice_domain("vectorize", (False, True), last_tiled, kind="vectorize")]

    def apply(
        self, sch: Schedule, c: Cascade, values: Mapping[str, Any], nest: Nest, target: Target
    ) -> Schedule:
        # a jam that split the last stage's innermost loop left unrolled copies there: nothing to vectorise
        tiled = c.last in register_tiled(c, values)
        if values["vectorize"] and not tiled and nest.vector_loop in sch.get_loops(c.last):
            sch = sch.vectorize(nest.vector_loop)
        return sch
