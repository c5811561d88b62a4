"""What the ``cascade`` family reads from a function (see :mod:`autotune.search.space_cascade`).

:func:`analyze_cascade` finds the last stage (the latest block with a row axis
that its producers carry), its row loop, the stages that may move to the tile
loop and those whose rows overlap; per stage, whether its two innermost spatial
loops fuse into one contiguous loop (:func:`_fusable_pair`), whether its
reduction loops are short enough to unroll (:func:`_reduction_loops`) and which
loop a window slides along (:func:`_jam_plan`). The family module turns these
into knobs and schedules.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from math import prod

from .. import ir
from ..analysis import to_linear
from ..codegen import UNROLL_LIMIT
from ..errors import ConfigError
from .space_family import bound_var, loops_of

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
    """``(stage, block)``: stages with a register tile (:func:`_tile_plan`) and its channels per tile."""


def _written(block: ir.Block) -> ir.Buffer | None:
    return block.writes[0].buffer if len(block.writes) == 1 else None


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


def _dim_var(block: ir.Block, dim: int) -> ir.Var | None:
    buf = _written(block)
    store = next((s for s in ir.collect(block.body, ir.BufferStore) if s.buffer is buf), None)
    if store is None or dim >= len(store.indices) or not isinstance(store.indices[dim], ir.Var):
        return None
    return store.indices[dim]  # type: ignore[return-value]


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


def analyze_cascade(func: ir.Func) -> Cascade:
    """Find the last stage, its row loop and the stages that may move; ConfigError if there is none."""
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
    below = [f for f in spatial if loops.index(f) > loops.index(loop)]
    col = below[0] if below and (ir.as_int(below[0].extent) or 1) > 1 else None
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
            b.name for b in stages if b.name in (*movable, last.name) and _reduction_loops(func, b) is not None
        ),
        jammable=tuple(
            b.name
            for i, b in enumerate(stages)
            if b.name in (*movable, last.name)
            and _reduction_loops(func, b) is not None
            and _jam_plan(func, b, row_dims[i]) is not None
        ),
        tileable=tuple(
            (b.name, plan.block)
            for i, b in enumerate(stages)
            if b.name in (*movable, last.name) and (plan := _tile_plan(func, b, row_dims[i])) is not None
        ),
    )


@dataclass(frozen=True)
class _JamPlan:
    """How to jam a stage: its column loop, the spatial loops below it and its reduction loops."""

    column: str
    below: tuple[str, ...]
    """Spatial loops between the column loop and the reduction loops (the channels): they go above
    the unrolled columns."""
    sliding: tuple[str, ...]
    """Reduction loops whose variable indexes a load together with the column's (the window's
    columns): outermost in the window, so that the partial over the others is one column's."""
    others: tuple[str, ...]


def _jam_plan(func: ir.Func, block: ir.Block, row_dim: int) -> _JamPlan | None:
    """The jam of ``block``: its innermost spatial loop (longer than 1, not over the rows) whose
    variable indexes a load together with a reduction variable - the loop a window slides along -
    when every loop below it up to the reduction loops is spatial. None if there is no such loop."""
    reduce = _reduce_vars(block)
    row_var = _dim_var(block, row_dim)
    loops = loops_of(func, block)
    reductions = [f for f in loops if _binds(block, f, reduce)]
    if not reductions or loops.index(reductions[0]) != len(loops) - len(reductions):
        return None  # a spatial loop inside the window: the copies would not be straight-line
    windows = [ir.free_vars(i) for ld in ir.collect(block.body, ir.BufferLoad) for i in ld.indices]
    spatial = loops[: len(loops) - len(reductions)]
    for k in reversed(range(len(spatial))):
        f = spatial[k]
        moved = set(_bound_vars(block, f))
        if (ir.as_int(f.extent) or 1) < 2 or (row_var is not None and row_var in moved):
            continue
        slides = {v for used in windows if used & moved for v in used & reduce}
        if not slides:
            continue
        sliding = [r for r in reductions if set(_bound_vars(block, r)) & slides]
        return _JamPlan(
            f.loop_var.name,
            tuple(g.loop_var.name for g in spatial[k + 1 :]),
            tuple(r.loop_var.name for r in sliding),
            tuple(r.loop_var.name for r in reductions if r not in sliding),
        )
    return None


@dataclass(frozen=True)
class _TilePlan:
    """How to register-tile a stage: its column and channel loops, their extents, its reduction loops."""

    column: str
    channel: str
    columns: int
    channels: int
    reductions: tuple[str, ...]

    @property
    def block(self) -> int:
        """Channels per tile: the largest divisor of the channels that codegen unrolls (UNROLL_LIMIT)."""
        return max(d for d in range(1, min(self.channels, UNROLL_LIMIT) + 1) if self.channels % d == 0)


def _tile_plan(func: ir.Func, block: ir.Block, row_dim: int) -> _TilePlan | None:
    """The register tile of ``block``: a contraction (a 1x1 convolution, a dense layer) whose two
    innermost spatial loops - columns, then channels - sit right above its reduction loops, whose
    output is contiguous along the channels (the last index of its store is the channel variable),
    and whose reductions slide along no spatial loop (no load index mixes a reduction variable with
    a column or channel variable: that is a window, which ``jam`` serves). None otherwise."""
    reduce = _reduce_vars(block)
    row_var = _dim_var(block, row_dim)
    loops = loops_of(func, block)
    reductions = [f for f in loops if _binds(block, f, reduce)]
    if not reductions or loops.index(reductions[0]) != len(loops) - len(reductions):
        return None
    spatial = loops[: len(loops) - len(reductions)]
    if len(spatial) < 2 or any(ir.as_int(f.extent) is None or ir.as_int(f.min) != 0 for f in spatial[-2:]):
        return None
    column, channel = spatial[-2], spatial[-1]
    bound = [set(_bound_vars(block, f)) for f in (column, channel)]
    if any((ir.as_int(f.extent) or 1) < 2 for f in (column, channel)) or row_var in bound[0] | bound[1]:
        return None
    buf = _written(block)
    store = next((s for s in ir.collect(block.body, ir.BufferStore) if s.buffer is buf), None)
    if store is None or not store.indices or store.indices[-1] not in bound[1]:
        return None
    for load in ir.collect(block.body, ir.BufferLoad):
        for index in load.indices:
            used = ir.free_vars(index)
            if used & reduce and used & (bound[0] | bound[1]):
                return None
    return _TilePlan(
        column.loop_var.name,
        channel.loop_var.name,
        ir.as_int(column.extent) or 1,
        ir.as_int(channel.extent) or 1,
        tuple(f.loop_var.name for f in reductions),
    )


def _fusable_pair(func: ir.Func, block: ir.Block, row_dim: int) -> tuple[str, str] | None:
    """The names of ``block``'s two innermost spatial loops when one directly holds the other.

    Spatial: the loop binds no reduction iter var; both must be longer than 1,
    and neither may be over the rows (output dimension ``row_dim``): the tile
    loop and the rolling buffer work on those (NCHW stages fuse nothing).
    """
    excluded: set[ir.Var] = _reduce_vars(block)
    row_var = _dim_var(block, row_dim)
    if row_var is not None:
        excluded.add(row_var)
    loops = loops_of(func, block)
    spatial = [
        k
        for k, f in enumerate(loops)
        if (ir.as_int(f.extent) or 1) > 1 and not _binds(block, f, excluded)
    ]
    if len(spatial) < 2 or spatial[-1] != spatial[-2] + 1:
        return None
    outer, inner = loops[spatial[-2]], loops[spatial[-1]]
    if outer.body is not inner or not _contiguous(block, outer, inner):
        return None
    return outer.loop_var.name, inner.loop_var.name


def _contiguous(block: ir.Block, outer: ir.For, inner: ir.For) -> bool:
    """Whether every access of ``block`` stays affine when ``outer`` and ``inner`` fuse.

    Row-major offsets: an access moves by ``a`` per step of the outer loop and
    ``b`` per step of the inner one; fused into ``f`` (``outer = f // n``,
    ``inner = f % n``), the offset is ``a * (f // n) + b * (f % n)``, which is
    affine (``b * f``) only when ``a == b * n`` - true of ``X[x, c]`` with ``n``
    channels, false of a weight ``W[c]`` that only the inner loop moves: fusing
    would leave a ``%`` in its index and the fused loop would gather.
    """
    n = ir.as_int(inner.extent) or 0
    loops = (outer.loop_var, inner.loop_var)
    # how far each iter var moves per step of each loop (its binding is affine in the loops)
    moves: dict[ir.Var, tuple[int, int]] = {}
    for iv, binding in zip(block.iter_vars, block.bindings):
        form = to_linear(binding)
        if form is None:
            if ir.free_vars(binding) & set(loops):
                return False
            continue
        moves[iv.var] = (form.coeff(loops[0]), form.coeff(loops[1]))
    accesses = [(s.buffer, s.indices) for s in ir.collect(block.body, ir.BufferStore)]
    accesses += [(ld.buffer, ld.indices) for ld in ir.collect(block.body, ir.BufferLoad)]
    for buf, indices in accesses:
        try:
            shape = buf.const_shape()
        except ValueError:
            return False
        step = [0, 0]
        stride = 1
        for dim in reversed(range(len(indices))):
            form = to_linear(indices[dim])
            if form is None:
                if ir.free_vars(indices[dim]) & moves.keys():
                    return False
            else:
                for var, (by_outer, by_inner) in moves.items():
                    step[0] += form.coeff(var) * by_outer * stride
                    step[1] += form.coeff(var) * by_inner * stride
            stride *= shape[dim] if dim < len(shape) else 1
        if step[0] != step[1] * n:
            return False
    return True


def _reduction_loops(func: ir.Func, block: ir.Block) -> tuple[str, ...] | None:
    """The names of ``block``'s loops that bind reduction iter vars, when there are some, all
    constant and at most :data:`~autotune.codegen.UNROLL_LIMIT` iterations together."""
    loops = [f for f in loops_of(func, block) if _binds(block, f, _reduce_vars(block))]
    extents = [ir.as_int(f.extent) for f in loops]
    if not loops or any(e is None for e in extents) or prod(e or 0 for e in extents) > UNROLL_LIMIT:
        return None
    return tuple(f.loop_var.name for f in loops)


def _block(func: ir.Func, name: str) -> ir.Block:
    return next(b for b in ir.collect(func.body, ir.Block) if b.name == name)


def _reduce_vars(block: ir.Block) -> set[ir.Var]:
    return {iv.var for iv in block.iter_vars if iv.kind == "reduce"}


def _binds(block: ir.Block, loop: ir.For, iter_vars: set[ir.Var]) -> bool:
    """Whether ``loop``'s variable appears in the binding of one of ``iter_vars``."""
    return any(v in iter_vars for v in _bound_vars(block, loop))


def _bound_vars(block: ir.Block, loop: ir.For) -> list[ir.Var]:
    """The iter vars whose binding uses ``loop``'s variable."""
    return [iv.var for iv, b in zip(block.iter_vars, block.bindings) if loop.loop_var in ir.free_vars(b)]
