"""What one stage's loops allow, for the schedules of a chain tiled over its rows (the ``cascade``
family, :mod:`autotune.search.space_cascade`).

:func:`loops_of`: the loops around a block; :func:`bound_var`: the iter var a loop binds;

:func:`_fusable_pair`: two innermost spatial loops that fuse into one contiguous
loop; :func:`_reduction_loops`: reduction loops short enough to unroll;
:func:`_jam_plan`: the column loop a window slides along (unroll-and-jam), :func:`_row_loop`
and :func:`_shared_rows`: the row loop it jams too;
:func:`_tile_plan`: the column and channel loops of a contraction (a register tile).
:mod:`~autotune.analysis.chain` reads the chain as a whole with them.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod

from .. import ir
from .linear import to_linear
from .stages import contraction_operands


def loops_of(func: ir.Func, block: ir.Block) -> list[ir.For]:
    """The loops around ``block``, outermost first."""
    path: list[ir.For] = []

    def walk(stmt: ir.Stmt, above: list[ir.For]) -> bool:
        if stmt is block:
            path.extend(above)
            return True
        if isinstance(stmt, ir.For):
            return walk(stmt.body, [*above, stmt])
        if isinstance(stmt, ir.SeqStmt):
            return any(walk(s, above) for s in stmt.seq)
        if isinstance(stmt, (ir.Block, ir.Allocate, ir.DeclBuffer)):
            return walk(stmt.body, above)
        return False

    walk(func.body, [])
    return path


def bound_var(block: ir.Block, loop: ir.For) -> ir.IterVar | None:
    """The iter var of ``block`` bound to exactly ``loop``'s variable, if any."""
    for iv, binding in zip(block.iter_vars, block.bindings):
        if binding is loop.loop_var:
            return iv
    return None


def _written(block: ir.Block) -> ir.Buffer | None:
    return block.writes[0].buffer if len(block.writes) == 1 else None


def _dim_var(block: ir.Block, dim: int) -> ir.Var | None:
    buf = _written(block)
    store = next((s for s in ir.collect(block.body, ir.BufferStore) if s.buffer is buf), None)
    if store is None or dim >= len(store.indices) or not isinstance(store.indices[dim], ir.Var):
        return None
    return store.indices[dim]  # type: ignore[return-value]


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


def _row_loop(func: ir.Func, block: ir.Block, row_dim: int) -> ir.For | None:
    """The innermost loop around ``block`` that moves its rows (the rows of one tile)."""
    row_var = _dim_var(block, row_dim)
    moving = [f for f in loops_of(func, block) if row_var is not None and row_var in _bound_vars(block, f)]
    return moving[-1] if moving else None


def _shared_rows(block: ir.Block) -> int | None:
    """For a rolling buffer, the rows its window shares with the previous tile's (``window - stride``)."""
    info = ir.ann_get(block.annotations, ir.ROLLING_ATTR)
    return None if info is None else info[3] - info[4]


@dataclass(frozen=True)
class _TilePlan:
    """How to register-tile a stage: its column and channel loops, their extents, its reduction loops."""

    column: str
    channel: str
    columns: int
    channels: int
    reductions: tuple[str, ...]
    packed: tuple[int, ...] = ()
    """Read regions of operands to copy with the channel dimension last (:func:`_packed_operands`)."""
    rows: bool = False
    """The column loop is the stage's own row loop (a dense layer or a matmul has no other)."""
    dot: bool = False
    """Every operand is contiguous along the innermost reduction loop (:func:`_dot_form`): the tile
    can keep one vector accumulator per output and vectorise that loop, with no copy."""

    @property
    def block(self) -> int:
        """Channels per tile: the largest divisor of the channels that codegen unrolls (ir.UNROLL_LIMIT)."""
        return max(d for d in range(1, min(self.channels, ir.UNROLL_LIMIT) + 1) if self.channels % d == 0)


def _tile_plan(func: ir.Func, block: ir.Block, row_dim: int) -> _TilePlan | None:
    """The register tile of ``block``: a reduction whose two innermost spatial loops - columns,
    then channels - sit right above its reduction loops (for a contraction with no column loop, a
    dense layer or a matmul, the stage's own row loop stands for the columns), whose output is contiguous along the
    channels (the last index of its store is the channel variable), and whose reductions slide
    along no channel (no load index mixes a reduction variable with a channel variable) and, unless
    it is a contraction (a convolution of any kernel, depthwise, a dense layer), along no column
    either (a max or average window, which ``jam`` serves). None otherwise."""
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
    if any((ir.as_int(f.extent) or 1) < 2 for f in (column, channel)) or row_var in bound[1]:
        return None
    rows = row_var in bound[0]
    if rows and not _private(column, block):
        return None  # the rows of a stage with no column loop: only its own row loop, not the tile loop
    buf = _written(block)
    store = next((s for s in ir.collect(block.body, ir.BufferStore) if s.buffer is buf), None)
    if store is None or not store.indices or store.indices[-1] not in bound[1]:
        return None
    # a window may slide along the columns of a contraction (a KxK or depthwise convolution: the
    # lowering keeps the tile's accumulators over the whole reduction nest); the channels never
    contraction = contraction_operands(block) is not None
    sliding = bound[1] if contraction and not rows else bound[0] | bound[1]
    if rows and not contraction:
        return None
    for load in ir.collect(block.body, ir.BufferLoad):
        for index in load.indices:
            used = ir.free_vars(index)
            if used & reduce and used & sliding:
                return None
    return _TilePlan(
        column.loop_var.name,
        channel.loop_var.name,
        ir.as_int(column.extent) or 1,
        ir.as_int(channel.extent) or 1,
        tuple(f.loop_var.name for f in reductions),
        _packed_operands(block, bound[1], reduce, {id(b) for b in func.params}),
        rows,
        _dot_form(block, reductions[-1]),
    )


def _dot_form(block: ir.Block, innermost: ir.For) -> bool:
    """Whether every load of ``block`` but its own output's indexes its last dimension with exactly
    the iter var of ``innermost`` (a reduction loop) and no other dimension with it: a dense layer
    with weights ``[O, K]`` (``x[i, k] * w[o, k]``), ``Q K^T`` (``q[i, d] * k[j, d]``). Along that loop
    all operands are unit-stride, so its iterations vectorise as loads of whole vectors."""
    moved = set(_bound_vars(block, innermost))
    out = _written(block)
    loads = [ld for ld in ir.collect(block.body, ir.BufferLoad) if ld.buffer is not out]
    return (
        bool(moved)
        and bool(loads)
        and all(
            ld.indices
            and isinstance(ld.indices[-1], ir.Var)
            and ld.indices[-1] in moved
            and not any(ir.free_vars(i) & moved for i in ld.indices[:-1])
            for ld in loads
        )
    )


def _private(loop: ir.For, block: ir.Block) -> bool:
    """Whether ``loop`` holds ``block`` and nothing else (no other stage shares it)."""
    return all(b is block or b.name == block.name for b in ir.collect(loop.body, ir.Block))


def _packed_operands(
    block: ir.Block, channel: set[ir.Var], reduce: set[ir.Var], params: set[int]
) -> tuple[int, ...]:
    """The read regions (by index) of function-level operands that a register tile reads across
    its channels with a stride: the channel variable indexes one of their dimensions but the last,
    which a reduction variable indexes (a dense weight ``w[o, k]``, a matmul's ``K[j, d]``). The
    tile's loads of them vectorise only from a copy with the channel dimension last."""
    out = []
    for i, region in enumerate(block.reads):
        loads = [ld for ld in ir.collect(block.body, ir.BufferLoad) if ld.buffer is region.buffer]
        if (
            not loads
            or id(region.buffer) not in params
            or any(w.buffer is region.buffer for w in block.writes)
        ):
            continue
        last = [ir.free_vars(ld.indices[-1]) for ld in loads]
        inner = [any(ir.free_vars(i) & channel for i in ld.indices[:-1]) for ld in loads]
        if all(inner) and all(used & reduce and not used & channel for used in last):
            out.append(i)
    return tuple(out)


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
        k for k, f in enumerate(loops) if (ir.as_int(f.extent) or 1) > 1 and not _binds(block, f, excluded)
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
    constant and at most :data:`~autotune.ir.UNROLL_LIMIT` iterations together."""
    loops = [f for f in loops_of(func, block) if _binds(block, f, _reduce_vars(block))]
    extents = [ir.as_int(f.extent) for f in loops]
    if not loops or any(e is None for e in extents) or prod(e or 0 for e in extents) > ir.UNROLL_LIMIT:
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
