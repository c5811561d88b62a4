"""A chain of stages as a whole, as the ``cascade`` family reads it (:mod:`autotune.search.space_cascade`).

:func:`analyze_cascade` finds the last stage (the latest block with a row axis
that its producers carry), its row loop, the stages that may move to the tile
loop and those whose rows overlap; per stage, what
:mod:`~autotune.analysis.stage_loops` finds in its loops (a fusable pair, short
reduction loops, a window's column loop, a register tile). The family module turns
these into knobs and schedules.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass

from .. import ir
from ..errors import ConfigError
from .padding import padded_reads
from .stage_loops import (
    _binds,
    _dim_var,
    _fusable_pair,
    _jam_plan,
    _reduce_vars,
    _reduction_loops,
    _tile_plan,
    _written,
    bound_var,
    loops_of,
)

__all__ = ["Cascade", "analyze_cascade"]


@dataclass(frozen=True)
class Cascade:
    """What the knobs of a cascade act on, read from the function."""

    last: str
    movable: tuple[str, ...]
    """Intermediate stages, in program order, that only cascade stages read: they may move to the tile loop."""
    rollable: tuple[str, ...]
    """Movable stages whose rows overlap from tile to tile (a later stage reads through a window)."""
    row_loop: str
    rows: int
    above: tuple[str, ...]
    """The last stage's loops above its row loop; the tile loop moves above them when one is longer than 1."""
    vector_loop: str
    col_loop: str | None
    """The last stage's spatial loop right below the row loop (strips split it), if longer than 1."""
    cols: int
    buffers: tuple[tuple[str, str], ...]
    """``(block, buffer)`` for every block that writes an intermediate buffer, in program order."""
    row_dims: tuple[tuple[str, int], ...]
    """``(stage, dimension)``: the output dimension of each cascade stage that carries the rows."""
    fusable: tuple[str, ...]
    """Cascade stages (movable and last) whose two innermost spatial loops are adjacent, longer than 1
    and not over rows."""
    unrollable: tuple[str, ...]
    """Cascade stages whose reduction loops are constant and at most UNROLL_LIMIT iterations in all."""
    jammable: tuple[str, ...] = ()
    """Unrollable stages with a spatial loop that a window slides along (:func:`_jam_plan`)."""
    tileable: tuple[tuple[str, int], ...] = ()
    """``(stage, block)``: stages with a register tile (:func:`_tile_plan`) and the most channels a
    tile may hold (the largest divisor of the channels that codegen unrolls)."""
    tile_channels: tuple[tuple[str, int], ...] = ()
    """``(stage, channels)``: the extent of each tileable stage's channel loop (a tile holds a divisor)."""
    row_tiled: tuple[str, ...] = ()
    """Tileable stages whose tile's columns are their rows: a tile needs at least 2 rows per tile."""
    packable: tuple[str, ...] = ()
    """Tileable stages whose tile copies an operand with its channel dimension last (a dense weight,
    :attr:`_TilePlan.packed`), per block of channels or whole."""
    dot_tileable: tuple[str, ...] = ()
    """Tileable stages whose operands are all contiguous along the innermost reduction loop
    (:attr:`_TilePlan.dot`): a tile may vectorise that loop instead of the channels, with no copy."""
    consumers: tuple[tuple[str, tuple[str, ...]], ...] = ()
    """``(stage, readers)``: for each movable stage, the movable stages that read its buffer (it can
    be computed at the tile loop only where they are: a reader at root runs outside the loop)."""
    stageable: tuple[tuple[str, str], ...] = ()
    """``(stage, buffer)``: cascade stages that read a function input, which no other block reads,
    through their rows (each load of it indexed by the stage's row variable: a convolution's or a
    pool's input window, a dense layer's rows): a tile's part of it can be staged at the tile loop
    (:func:`_stageable`)."""
    padded: tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...] = ()
    """``(stage, buffers, producers)``: cascade stages that pad some reads inline
    (:func:`~autotune.analysis.padding.padded_reads`), the buffers they pad, and the movable
    stages that write those buffers."""


def _store_dim(block: ir.Block, var: ir.Var) -> int | None:
    """The dimension of its output that ``block`` stores at iter var ``var``."""
    buf = _written(block)
    store = next((s for s in ir.collect(block.body, ir.BufferStore) if s.buffer is buf), None)
    if store is None:
        return None
    dims = [d for d, idx in enumerate(store.indices) if idx is var]
    return dims[0] if len(dims) == 1 else None


def _carried(block: ir.Block, var: ir.Var, buf: ir.Buffer) -> tuple[int, bool] | None:
    """The one dimension of ``buf`` whose index in ``block``'s loads uses ``var``, and whether it is a window.

    A window: the index also uses a reduction iter var (``v_y + v_rh``), so the
    rows that consecutive tiles read overlap.
    """
    reduce = _reduce_vars(block)
    dims: set[int] = set()
    window = False
    for load in ir.collect(block.body, ir.BufferLoad):
        if load.buffer is not buf:
            continue
        for d, idx in enumerate(load.indices):
            used = ir.free_vars(idx)
            if var in used:
                dims.add(d)
                window = window or bool(used & reduce)
    return (dims.pop(), window) if len(dims) == 1 else None


def _carries_rows(
    stages: Sequence[ir.Block], dim: int, intermediates: set[int]
) -> tuple[set[int], dict[int, int]] | None:
    """Whether output dimension ``dim`` of the last stage maps back through every earlier stage.

    Returns the stages whose rows a later stage reads through a window, and each
    stage's row dimension (None: not a row axis).
    """
    writer = {id(_written(b)): i for i, b in enumerate(stages) if id(_written(b)) in intermediates}
    want: dict[int, int] = {len(stages) - 1: dim}
    windowed: set[int] = set()
    for i in reversed(range(len(stages))):
        if i not in want:
            return None
        block = stages[i]
        var = _dim_var(block, want[i])
        if var is None:
            return None
        for region in block.reads:
            j = writer.get(id(region.buffer))
            if j is None or j == i:
                continue
            found = _carried(block, var, region.buffer)
            if found is None or want.setdefault(j, found[0]) != found[0]:
                return None
            if found[1]:
                windowed.add(j)
    return windowed, want


def _row_loop(
    func: ir.Func, stages: Sequence[ir.Block], intermediates: set[int]
) -> tuple[ir.For, set[int], dict[int, int]] | None:
    """The outermost loop of the last stage that is a row axis of the whole chain, the windowed
    stages and each stage's row dimension."""
    last = stages[-1]
    for loop in loops_of(func, last):
        iv = bound_var(last, loop)
        if iv is None or iv.kind != "spatial" or (ir.as_int(loop.extent) or 1) < 2:
            continue
        dim = _store_dim(last, iv.var)
        carried = _carries_rows(stages, dim, intermediates) if dim is not None else None
        if carried is not None:
            return loop, *carried
    return None


_ANALYSED: dict[int, tuple[ir.Func, Cascade]] = {}
""":func:`analyze_cascade` of the last few functions, keyed on ``id(func)``.

Safe because a function is immutable and its :class:`Cascade` (strings, numbers and tuples of
them) is a pure function of it, and each entry holds its function, so the id cannot be reused by
another object while the entry is there. The search applies every candidate to the one workload
function, which this analysis reads first (:meth:`~autotune.search.space_cascade.CascadeFamily.apply`).
At most :data:`_ANALYSED_LIMIT` entries: the oldest goes first."""
_ANALYSED_LIMIT = 8
_ANALYSED_LOCK = threading.Lock()


def analyze_cascade(func: ir.Func) -> Cascade:
    """Find the last stage, its row loop and the stages that may move; ConfigError if there is none."""
    hit = _ANALYSED.get(id(func))
    if hit is not None and hit[0] is func:
        return hit[1]
    cascade = _analyze(func)
    with _ANALYSED_LOCK:
        if len(_ANALYSED) >= _ANALYSED_LIMIT:
            del _ANALYSED[next(iter(_ANALYSED))]
        _ANALYSED[id(func)] = (func, cascade)
    return cascade


def _analyze(func: ir.Func) -> Cascade:
    blocks = [b for b in ir.collect(func.body, ir.Block) if b.name != "root"]
    params = {id(p) for p in func.params}
    intermediates = {
        id(_written(b)) for b in blocks if _written(b) is not None and id(_written(b)) not in params
    }
    for end in reversed(range(len(blocks))):
        stages = blocks[: end + 1]
        if _written(stages[-1]) is None:
            continue
        found = _row_loop(func, stages, intermediates)
        if found is not None:
            return _describe(func, blocks, stages, *found, intermediates)
    raise ConfigError(f"cascade: no block of '{func.name}' has a row loop that its producers carry")


def _describe(
    func: ir.Func,
    blocks: list[ir.Block],
    stages: list[ir.Block],
    loop: ir.For,
    windowed: set[int],
    row_dims: dict[int, int],
    inter: set[int],
) -> Cascade:
    last = stages[-1]
    names = {b.name for b in stages}
    movable = []
    last_window = max(windowed, default=-1)  # stages up to it have rows that consecutive tiles share
    for block in stages[:-1]:
        buf = _written(block)
        readers = {b.name for b in blocks if b is not block and any(r.buffer is buf for r in b.reads)}
        if buf is not None and id(buf) in inter and readers and readers <= names:
            movable.append(block.name)
    loops = loops_of(func, last)
    above = tuple(f.loop_var.name for f in loops[: loops.index(loop)])
    spatial = [f for f in loops if not _binds(last, f, _reduce_vars(last))]
    buffers = tuple(
        (b.name, buf.name) for b in blocks if (buf := _written(b)) is not None and id(buf) in inter
    )
    writers = {id(buf): b.name for b in blocks if (buf := _written(b)) is not None}
    consumers = tuple(
        (
            m,
            tuple(
                b.name
                for b in stages
                if b.name in movable and b.name != m and any(writers.get(id(r.buffer)) == m for r in b.reads)
            ),
        )
        for m in movable
    )
    padded = []
    for block in stages:
        if block.name not in (*movable, last.name):
            continue
        reads = padded_reads(block)
        if reads:
            producers = tuple(writers[id(p.buffer)] for p in reads if writers.get(id(p.buffer)) in movable)
            padded.append((block.name, tuple(p.buffer.name for p in reads), producers))
    below = [f for f in spatial if loops.index(f) > loops.index(loop)]
    col = below[0] if below and (ir.as_int(below[0].extent) or 1) > 1 else None
    plans = {
        b.name: plan
        for i, b in enumerate(stages)
        if b.name in (*movable, last.name) and (plan := _tile_plan(func, b, row_dims[i])) is not None
    }  # one register-tile plan per cascade stage that has one, in program order
    return Cascade(
        last=last.name,
        movable=tuple(movable),
        rollable=tuple(b.name for i, b in enumerate(stages[:-1]) if i <= last_window and b.name in movable),
        row_loop=loop.loop_var.name,
        rows=ir.as_int(loop.extent) or 1,
        above=above if any((ir.as_int(f.extent) or 1) > 1 for f in loops[: loops.index(loop)]) else (),
        vector_loop=spatial[-1].loop_var.name if spatial else loop.loop_var.name,
        col_loop=col.loop_var.name if col is not None and col is not spatial[-1] else None,
        cols=(ir.as_int(col.extent) or 1) if col is not None else 1,
        buffers=buffers,
        row_dims=tuple((b.name, row_dims[i]) for i, b in enumerate(stages)),
        fusable=tuple(
            b.name
            for i, b in enumerate(stages)
            if b.name in (*movable, last.name) and _fusable_pair(func, b, row_dims[i])
        ),
        unrollable=tuple(
            b.name
            for b in stages
            if b.name in (*movable, last.name) and _reduction_loops(func, b) is not None
        ),
        jammable=tuple(
            b.name
            for i, b in enumerate(stages)
            if b.name in (*movable, last.name)
            and _reduction_loops(func, b) is not None
            and _jam_plan(func, b, row_dims[i]) is not None
        ),
        tileable=tuple((name, plan.block) for name, plan in plans.items()),
        tile_channels=tuple((name, plan.channels) for name, plan in plans.items()),
        row_tiled=tuple(name for name, plan in plans.items() if plan.rows),
        packable=tuple(name for name, plan in plans.items() if plan.packed),
        dot_tileable=tuple(name for name, plan in plans.items() if plan.dot),
        consumers=consumers,
        stageable=_stageable(func, blocks, stages, row_dims, (*movable, last.name)),
        padded=tuple(padded),
    )


def _stageable(
    func: ir.Func,
    blocks: list[ir.Block],
    stages: list[ir.Block],
    row_dims: dict[int, int],
    cascade: Sequence[str],
) -> tuple[tuple[str, str], ...]:
    """The (stage, input) pairs of :attr:`Cascade.stageable`: a copy of the input made at the tile
    loop holds the rows of one tile (and its window's halo), and no reader outside the loop needs it."""
    out = []
    for i, block in enumerate(stages):
        row_var = _dim_var(block, row_dims[i])
        if block.name not in cascade or row_var is None:
            continue
        for region in block.reads:
            buf = region.buffer
            readers = [b for b in blocks if any(r.buffer is buf for r in b.reads)]
            if not any(buf is p for p in func.inputs) or readers != [block]:
                continue
            loads = [ld for ld in ir.collect(block.body, ir.BufferLoad) if ld.buffer is buf]
            if loads and all(any(row_var in ir.free_vars(i) for i in ld.indices) for ld in loads):
                out.append((block.name, buf.name))
    return tuple(dict.fromkeys(out))
