"""Buffer primitives: annotate_buffer_access, rolling_buffer, double_buffer.

``rolling_buffer`` and ``double_buffer`` check every precondition here and tag
the producing block; the rewrites themselves are lowering passes
(``autotune.lowering.rolling``, ``autotune.lowering.double_buffer``), as in
TVM's InjectRollingBuffer / InjectDoubleBuffer.
"""

from __future__ import annotations

import itertools
from dataclasses import replace

from ... import ir
from ...analysis.arith import Analyzer, simplify
from ...analysis.linear import to_linear
from ...analysis.region import block_access_regions, relax_region
from ...errors import ScheduleError
from ...te import FULL_REGION_ANNOTATION
from ..exprjson import expr_from_json
from ..regions import EXPLICIT
from ..tree import block_path, readers_of, replace_stmt
from .compute_at import scope_root
from .placement import DOUBLE, ROLLING, ROLLING_LOOP

Result = tuple[ir.Func, tuple[str, ...]]


def annotate_buffer_access(func: ir.Func, block: str, buffer_index: int, access: str, region: tuple) -> Result:  # type: ignore[type-arg]
    """Give ``block`` an explicit read or write region, overriding inference.

    For a resize whose index is ``floor(v * 2.0 + 0.5)`` the inferred read is the
    whole input; ``(2 * v - 3, 2 * v + 3)`` per spatial axis tells compute_at and
    compaction what a tile really needs.
    """
    if access not in EXPLICIT:
        raise ScheduleError("annotate_buffer_access", f"access must be 'read' or 'write', got {access!r}")
    blk = block_path(func, block, "annotate_buffer_access")[-1]
    assert isinstance(blk, ir.Block)
    regions = blk.reads if access == "read" else blk.writes
    if not isinstance(buffer_index, int) or not 0 <= buffer_index < len(regions):
        raise ScheduleError("annotate_buffer_access", f"block '{block}' has {len(regions)} {access} buffers, index {buffer_index!r} is out of range")
    buf = regions[buffer_index].buffer
    if len(region) != buf.ndim:
        raise ScheduleError("annotate_buffer_access", f"the region has {len(region)} entries, buffer '{buf.name}' has {buf.ndim} dimensions")
    variables = [iv.var for iv in blk.iter_vars]
    ranges = []
    for entry in region:
        if isinstance(entry, (list, tuple)) and len(entry) == 3 and entry[0] == "range":
            lo = expr_from_json(entry[1], variables, "annotate_buffer_access")
            hi = expr_from_json(entry[2], variables, "annotate_buffer_access")
            extent = simplify(ir.Sub(hi, lo))
            if ir.as_int(extent) is None or ir.as_int(extent) <= 0:  # type: ignore[operator]
                raise ScheduleError("annotate_buffer_access", f"range ({lo}, {hi}) must have a positive constant extent")
            ranges.append(ir.Range(simplify(lo), extent))
        else:
            ranges.append(ir.Range(simplify(expr_from_json(entry, variables, "annotate_buffer_access")), ir.const(1)))
    new_region = ir.BufferRegion(buf, tuple(ranges))
    if access == "write":
        _check_write_region(blk, new_region)
    else:
        _check_read_region(blk, new_region)
    new_region = _clipped(blk, new_region)
    key = EXPLICIT[access]
    marked = tuple(sorted({*ir.ann_get(blk.annotations, key, ()), buffer_index}))
    ann = ir.ann_set(blk.annotations, key, marked)
    full = tuple(n for n in ir.ann_get(ann, FULL_REGION_ANNOTATION, ()) if n != buf.name)
    ann = ir.ann_set(ann, FULL_REGION_ANNOTATION, full or None)
    new_regions = tuple(new_region if i == buffer_index else r for i, r in enumerate(regions))
    if access == "read":
        new_blk = replace(blk, annotations=ann, reads=new_regions)
    else:
        new_blk = replace(blk, annotations=ann, writes=new_regions)
    return replace_stmt(func, blk, new_blk), ()


def _clipped(blk: ir.Block, region: ir.BufferRegion) -> ir.BufferRegion:
    """``region`` with each constant range cut to the buffer (a symbolic one is kept: it may leave the
    buffer at its edges, as a window annotated around ``2 * v`` does). A range that lies wholly outside
    the buffer for some value of the block's iter vars is refused."""
    an = Analyzer()
    for iv in blk.iter_vars:
        an.bind(iv.var, iv.dom)
    ranges = []
    for dim, (rng, size) in enumerate(zip(region.region, region.buffer.const_shape())):
        lo, ext = an.interval(rng.min), ir.as_int(rng.extent)
        if ext is not None and ((lo.hi is not None and lo.hi >= size) or (lo.lo is not None and lo.lo + ext <= 0)):
            raise ScheduleError(
                "annotate_buffer_access",
                f"the region {ir.to_text(region)} of block '{blk.name}' lies outside '{region.buffer.name}' "
                f"(dimension {dim}, extent {size}) for some of its iterations",
            )
        first = ir.as_int(rng.min)
        if first is not None and ext is not None and (first < 0 or first + ext > size):
            rng = ir.Range(ir.const(max(first, 0)), ir.const(min(first + ext, size) - max(first, 0)))
        ranges.append(rng)
    return ir.BufferRegion(region.buffer, tuple(ranges))


def _check_write_region(blk: ir.Block, claimed: ir.BufferRegion) -> None:
    """Refuse a write region that is not exactly what ``blk`` writes, where inference can tell.

    Compaction sizes the buffer from it and reverse_compute_at runs the consumer over it: a wider
    region has the consumer read elements no iteration wrote, a narrower one loses writes.
    """
    _, writes, fallback = block_access_regions(replace(blk, annotations=()))
    buf = claimed.buffer
    if buf.name in fallback:
        return  # the block's indices need float math: the annotation is all there is
    written = next(w for w in writes if w.buffer is buf)
    for dim, (c, w) in enumerate(zip(claimed.region, written.region)):
        offset = ir.as_int(simplify(ir.Sub(c.min, w.min)))
        c_ext, w_ext = ir.as_int(simplify(c.extent)), ir.as_int(simplify(w.extent))
        if offset == 0 and c_ext is not None and c_ext == w_ext:
            continue
        how, why = "is not", "a write region must be exactly what the block writes"
        if offset is not None and c_ext is not None and w_ext is not None:
            if offset <= 0 and offset + c_ext >= w_ext:
                how, why = "is wider than", "a consumer computed over it would read elements that no iteration wrote"
            elif offset >= 0 and offset + c_ext <= w_ext:
                how, why = "is narrower than", "compaction and reverse_compute_at would lose the writes outside it"
        raise ScheduleError(
            "annotate_buffer_access",
            f"the write region {ir.to_text(claimed)} of block '{blk.name}' {how} what it writes, "
            f"{ir.to_text(written)} (dimension {dim}): {why}",
        )


def _check_read_region(blk: ir.Block, claimed: ir.BufferRegion) -> None:
    """Refuse a read region that provably misses elements ``blk`` reads.

    compute_at and compaction trust it: the elements outside it would never be computed or
    kept. A wider region only costs work; where inference cannot compare, the annotation is trusted.
    """
    reads, _, fallback = block_access_regions(replace(blk, annotations=()))
    buf = claimed.buffer
    if buf.name in fallback:
        return
    # a block instance reads one window of a reduction: compare the whole windows
    reduce = {iv.var: iv.dom for iv in blk.iter_vars if iv.kind == "reduce"}
    claimed = relax_region(claimed, reduce)
    needed = relax_region(next(r for r in reads if r.buffer is buf), reduce)
    for dim, (c, r) in enumerate(zip(claimed.region, needed.region)):
        offset = ir.as_int(simplify(ir.Sub(c.min, r.min)))
        c_ext, r_ext = ir.as_int(simplify(c.extent)), ir.as_int(simplify(r.extent))
        if offset is None or c_ext is None or r_ext is None or (offset <= 0 and offset + c_ext >= r_ext):
            continue
        raise ScheduleError(
            "annotate_buffer_access",
            f"the read region {ir.to_text(claimed)} of block '{blk.name}' misses elements it reads, "
            f"{ir.to_text(needed)} (dimension {dim}): compute_at and compaction would leave them uncomputed",
        )


def _computed_at_loop(func: ir.Func, block: str, primitive: str) -> tuple[ir.Block, ir.For]:
    """The block and the loop of its consumer it was computed at (the loop just above its own nest)."""
    path = block_path(func, block, primitive)
    blk = path[-1]
    assert isinstance(blk, ir.Block)
    top = scope_root(path)
    above = [s for s in path[: path.index(top)] if isinstance(s, ir.For)]
    if not above:
        raise ScheduleError(primitive, f"block '{block}' is not inside any loop of its consumer (use compute_at first)")
    return blk, above[-1]


def _intermediate(func: ir.Func, blk: ir.Block, buffer_index: int, primitive: str) -> ir.Buffer:
    if not isinstance(buffer_index, int) or not 0 <= buffer_index < len(blk.writes):
        raise ScheduleError(primitive, f"block '{blk.name}' writes {len(blk.writes)} buffers, index {buffer_index!r} is out of range")
    buf = blk.writes[buffer_index].buffer
    if any(p is buf for p in func.params):
        raise ScheduleError(primitive, f"'{buf.name}' is a function parameter, not an intermediate buffer")
    return buf


def rolling_buffer(func: ir.Func, block: str, buffer_index: int = 0) -> Result:
    """Keep the rows that consecutive iterations share instead of recomputing them.

    After ``compute_at(B, ho)`` under a 4-row tile of a 3x3 pool, B computes rows
    ``ho*4 .. ho*4+5`` each iteration. Rolling: B computes only rows it has not
    computed before (all 6 at the first iteration, then 4), and its buffer is
    folded to 6 rows indexed ``row % 6``.

    The loop that carries the overlap may be any loop above the block, not only the one it
    was computed at: with h, w and c tiled and B computed at the channel tile loop ``oc``,
    B rolls over ``ow``, and its buffer keeps the tile's columns for every ``oc``. The
    innermost loop that carries an overlap rolls, over the first dimension it overlaps.
    """
    blk, inner = _computed_at_loop(func, block, "rolling_buffer")
    buf = _intermediate(func, blk, buffer_index, "rolling_buffer")
    others = [b.name for b in ir.collect(func.body, ir.Block) if b is not blk and any(w.buffer is buf for w in b.writes)]
    if others:
        raise ScheduleError("rolling_buffer", f"'{buf.name}' has other writers besides '{block}': {others}")
    found = _carrier(func, blk, buf, inner)
    if found is None:  # named by the loop it was computed at; the loops around it were tried too
        raise ScheduleError(
            "rolling_buffer", f"no dimension of '{buf.name}' overlaps between consecutive iterations of loop '{inner.loop_var.name}'"
        )
    loop, dim, window, stride = found
    if loop.kind == ir.ForKind.PARALLEL:
        raise ScheduleError("rolling_buffer", f"loop '{loop.loop_var.name}' is parallel: iterations must run in order to roll")
    info = (buf.name, dim, loop.loop_var.name, window, stride)
    ann = ir.ann_set(blk.annotations, ROLLING, info)
    ann = ir.ann_set(ann, ROLLING_LOOP, loop.loop_var.name)
    return replace_stmt(func, blk, replace(blk, annotations=ann)), ()


def _carrier(func: ir.Func, blk: ir.Block, buf: ir.Buffer, inner: ir.For) -> tuple[ir.For, int, int, int] | None:
    """``(loop, dim, window, stride)``: the innermost loop above the block whose consecutive iterations
    compute overlapping rows of ``buf``, and the first such dimension.

    ``window`` is what one iteration of the loop computes along ``dim`` (the block's own loops
    relaxed), ``stride`` how far the next iteration moves. A loop qualifies for ``dim`` only if no
    loop between it and the block moves ``dim`` too: the rows of one iteration must be one window.
    A row index that is not linear in the loop (``oi * 3 // 2 + y`` under an upscale) qualifies
    when its first row never decreases: ``stride`` is then its smallest step (:func:`_steps`).
    """
    store = next(s for s in ir.collect(blk.body, ir.BufferStore) if s.buffer is buf)
    binding = {iv.var: b for iv, b in zip(blk.iter_vars, blk.bindings)}
    path = block_path(func, blk.name, "rolling_buffer")
    cut = path.index(inner) + 1
    above = [f for f in path[:cut] if isinstance(f, ir.For)]
    own = [f for f in path[cut:] if isinstance(f, ir.For)]
    dims = []
    for dim, idx in enumerate(store.indices):
        expr = binding.get(idx) if isinstance(idx, ir.Var) else None
        if expr is not None:
            base = simplify(ir.substitute(expr, {f.loop_var: f.min for f in own}))
            rows = to_linear(simplify(ir.Sub(expr, base)))
            if rows is None:
                continue
            window = 1 + sum(abs(rows.coeff(f.loop_var)) * ((ir.as_int(f.extent) or 1) - 1) for f in own)
            # a first row that is not linear slides one row loop over the whole window
            if to_linear(base) is not None or any(rows.coeff(f.loop_var) == 1 and ir.as_int(f.extent) == window > 1 for f in own):
                dims.append((dim, base, window))
    for k in reversed(range(len(above))):
        loop, outer = above[k], {f.loop_var for f in above[: k + 1]}
        for dim, base, window in dims:
            if not ir.free_vars(base) <= outer or loop.loop_var not in ir.free_vars(base):
                continue  # a loop inside this one moves the rows, or this one does not
            steps = _steps(base, above[: k + 1])
            if steps and min(steps) >= 0 and min(steps) < window:
                return loop, dim, window, min(steps)
    return None


def _steps(base: ir.Expr, loops: list[ir.For]) -> list[int]:
    """How far the first row ``base`` moves from each iteration of the last of ``loops`` to the next,
    over every value of the others (empty when an extent is not constant or a step is not a constant)."""
    loop, others = loops[-1], loops[:-1]
    lin = to_linear(base)
    if lin is not None:  # the loops around stay put between two iterations of this one
        return [lin.coeff(loop.loop_var)]
    extent = ir.as_int(loop.extent)
    if extent is None or any(ir.as_int(f.extent) != 1 for f in others):
        return []  # a non-linear first row is stepped through only under loops of one iteration
    fixed = {f.loop_var: f.min for f in others}
    values = [ir.as_int(simplify(ir.substitute(base, {**fixed, loop.loop_var: ir.Add(loop.min, ir.const(i))}))) for i in range(extent)]
    if any(v is None for v in values):
        return []
    return [b - a for a, b in itertools.pairwise(values)]  # type: ignore[operator]


def double_buffer(func: ir.Func, block: str) -> Result:
    """Stage the buffer ``block`` writes in two slots: fill slot ``(i+1)%2`` while ``i%2`` is read.

    Applies to a staging block computed at a loop (``cache_read`` + ``compute_at``).
    """
    blk, loop = _computed_at_loop(func, block, "double_buffer")
    buf = _intermediate(func, blk, 0, "double_buffer")
    writers = [b.name for b in ir.collect(func.body, ir.Block) if any(w.buffer is buf for w in b.writes)]
    if writers != [blk.name]:
        raise ScheduleError("double_buffer", f"'{buf.name}' has other writers besides '{block}': {[w for w in writers if w != blk.name]}")
    inside = {b.name for b in ir.collect(loop, ir.Block)}
    outside = [b.name for b in readers_of(func, buf) if b.name not in inside]
    if outside:
        raise ScheduleError("double_buffer", f"'{buf.name}' is read outside loop '{loop.loop_var.name}' by {outside}")
    if loop.kind == ir.ForKind.PARALLEL:
        raise ScheduleError(
            "double_buffer",
            f"loop '{loop.loop_var.name}' is parallel: on several threads the prefetch of iteration i+1 of block "
            f"'{block}' overwrites the slot that iteration i-1 reads",
        )
    if ir.ann_get(blk.annotations, ROLLING) is not None:
        raise ScheduleError("double_buffer", f"'{blk.writes[0].buffer.name}' is already a rolling buffer")
    _check_sources_ready(loop, blk)
    ann = ir.ann_set(blk.annotations, DOUBLE, loop.loop_var.name)
    return replace_stmt(func, blk, replace(blk, annotations=ann)), ()


def _check_sources_ready(loop: ir.For, blk: ir.Block) -> None:
    """Refuse when a buffer ``blk`` copies from is produced inside ``loop``.

    The prefetch of iteration i+1 runs during iteration i, before that iteration's producer
    has computed the next tile.
    """
    read = {r.buffer for r in blk.reads}
    for producer in ir.collect(loop.body, ir.Block):
        for w in producer.writes:
            if producer is not blk and w.buffer in read:
                raise ScheduleError(
                    "double_buffer",
                    f"block '{producer.name}' produces '{w.buffer.name}', which '{blk.name}' reads, inside loop "
                    f"'{loop.loop_var.name}': the prefetch of iteration i+1 would read it before it is computed",
                )
