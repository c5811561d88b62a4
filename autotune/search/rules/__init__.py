"""Schedule rules: one small class per job, each deriving its knobs from the chain's IR analysis
and turning their values into schedule primitives (see :mod:`~autotune.search.rules.base`).

In the order the cascade family applies them:

- :class:`~.tiling.RowTiles`: rows per tile (and the parallel parts' split);
- :class:`~.tiling.Strip`: strips of the last stage's columns;
- :class:`~.location.Inline`: elementwise intermediates computed inside their readers;
- :class:`~.location.Padding`: padded copies of inline-padded reads, and where they go;
- :class:`~.location.Location`: each intermediate at the tile loop or at root;
- :class:`~.location.Window`: rolling buffer or recompute for overlapping tiles;
- :class:`~.staging.Staging`: a tile's rows of a chain input copied at the tile loop, double-buffered;
- :class:`~.unroll.Unroll`: fuse, unroll and unroll-and-jam of short windows;
- :class:`~.tiling.RegisterTile`: multi-level tiling of every contraction;
- :class:`~.parallel.Parallel` and :class:`~.parallel.Vectorize`: the cores and the vector mark;
- :class:`~.pools.Pools`: the memory pool of each allocation.
"""

from .base import Chain, Nest, Rule, register_tiled, tile_choices
from .location import Inline, Location, Padding, Window, kept, locations
from .parallel import COPY_PADS, Parallel, Vectorize
from .pools import Pools
from .staging import Staging, staged_inputs
from .tiling import REGISTER_COLUMNS, RegisterTile, RowTiles, Strip, channel_blocks, register_tile
from .unroll import Unroll, jam

__all__ = [
    "COPY_PADS",
    "REGISTER_COLUMNS",
    "Chain",
    "Inline",
    "Location",
    "Nest",
    "Padding",
    "Parallel",
    "Pools",
    "RegisterTile",
    "RowTiles",
    "Rule",
    "Staging",
    "Strip",
    "Unroll",
    "Vectorize",
    "Window",
    "channel_blocks",
    "jam",
    "kept",
    "locations",
    "register_tile",
    "register_tiled",
    "staged_inputs",
    "tile_choices",
]
