"""InjectRollingBuffer: sliding window + storage folding (TVM RFC "rolling_buffer").

For every block tagged by the ``rolling_buffer`` primitive with
``(buffer, dim, loop, window, stride)``:

- sliding window: the producer's loop over ``dim`` computes all ``window`` rows in
  the first iteration of ``loop`` and only the ``stride`` new rows afterwards (a row
  loop split by an unroll-and-jam of ``k`` rows skips ``overlap // k`` steps; when ``k``
  does not divide the overlap, the last ``overlap % k`` rows it keeps are computed again,
  to the values they already hold, so every step computes ``k`` whole rows);
- folding: the buffer keeps ``window`` rows along ``dim``, indexed ``row % window``;
  its allocation must stay outside ``loop`` (``ALLOC_OUTSIDE`` on the root block
  tells compaction).
"""

from __future__ import annotations

from dataclasses import replace

from .. import ir
from ..analysis.arith import simplify
from ..analysis.linear import to_linear
from ..errors import LoweringError
from ..schedule.primitives.buffers import ROLLING
from ..schedule.tree import allocating_block, replace_stmt

ALLOC_OUTSIDE = "autotune.alloc_outside"


def _find_loop(func: ir.Func, name: str) -> ir.For:
    for f in ir.collect(func.body, ir.For):
        if f.loop_var.name == name:
            return f
    raise LoweringError(f"inject_rolling_buffer: loop '{name}' of a rolling buffer is gone")


class _Fold(ir.Transformer):
    """Fold ``dim`` of ``old`` to ``window`` rows: indices become ``idx % window``."""

    def __init__(self, old: ir.Buffer, new: ir.Buffer, dim: int, window: int) -> None:
        self.old, self.new, self.dim, self.window = old, new, dim, window

    def _fold(self, indices: tuple[ir.Expr, ...]) -> tuple[ir.Expr, ...]:
        return tuple(ir.FloorMod(i, ir.const(self.window)) if k == self.dim else i for k, i in enumerate(indices))

    def visit_BufferLoad(self, node: ir.BufferLoad) -> ir.Expr:
        node = self.generic_visit(node)
        return ir.BufferLoad(self.new, self._fold(node.indices)) if node.buffer is self.new else node

    def visit_BufferStore(self, node: ir.BufferStore) -> ir.Stmt:
        node = self.generic_visit(node)
        return ir.BufferStore(self.new, node.value, self._fold(node.indices)) if node.buffer is self.new else node

    def visit_BufferRegion(self, node: ir.BufferRegion) -> ir.BufferRegion:
        if node.buffer is not self.old:
            return node
        region = tuple(ir.Range.of(0, self.window) if k == self.dim else r for k, r in enumerate(node.region))
        return ir.BufferRegion(self.new, region)

    def visit_buffer(self, buffer: ir.Buffer) -> ir.Buffer:
        return self.new if buffer is self.old else buffer


def _slide(block: ir.Block, func: ir.Func, dim: int, loop: ir.For, window: int, stride: int) -> tuple[ir.For, ir.For]:
    """The producer's loop over the rolling dim, and its sliding-window replacement."""
    store = next(s for s in ir.collect(block.body, ir.BufferStore) if s.buffer is block.writes[0].buffer)
    idx = store.indices[dim]
    binding = dict(zip((iv.var for iv in block.iter_vars), block.bindings)).get(idx) if isinstance(idx, ir.Var) else None
    lin = to_linear(binding) if binding is not None else None
    if binding is not None and lin is None:
        return _slide_from_index(block, binding, dim, loop, window)
    around = [f for f in ir.collect(loop.body, ir.For) if block in ir.collect(f, ir.Block)] if lin is not None else []
    steps = {f: (lin.coeff(f.loop_var), ir.as_int(f.extent)) for f in around if lin is not None}
    # the row loop steps `step` rows over window // step iterations; a step above 1 (the row loop split
    # by an unroll-and-jam) needs the inner part: a loop of step 1 over `step` rows
    rows = [
        (f, step)
        for f, (step, extent) in steps.items()
        if step >= 1 and extent is not None and step * extent == window and (step == 1 or (1, step) in steps.values())
    ]
    if not rows:
        raise LoweringError(f"inject_rolling_buffer: block '{block.name}' has no loop of extent {window} over dimension {dim}")
    row_loop, step = rows[0]
    # a step that does not divide the overlap starts one step early: the first rows it computes
    # again (overlap % step of them) are already in the window and get the same values
    overlap = window - stride
    first = ir.eq(loop.loop_var, loop.min)
    start = ir.select(first, 0, overlap // step)
    new = replace(row_loop, min=start, extent=ir.Sub(ir.const(window // step), start))
    return row_loop, new


def _slide_from_index(block: ir.Block, binding: ir.Expr, dim: int, loop: ir.For, window: int) -> tuple[ir.For, ir.For]:
    """The sliding window of a row index that is not linear in ``loop`` (``oi * 3 // 2 + y``): each
    iteration after the first starts its row loop past the rows the previous one computed,
    ``max(0, first(oi - 1) + window - first(oi))``, where ``first`` is the index at row 0."""
    around = [f for f in ir.collect(loop.body, ir.For) if block in ir.collect(f, ir.Block)]
    first = simplify(ir.substitute(binding, {f.loop_var: f.min for f in around}))
    rows_lin = to_linear(simplify(ir.Sub(binding, first)))
    rows = [f for f in around if rows_lin is not None and rows_lin.coeff(f.loop_var) == 1 and ir.as_int(f.extent) == window]
    if not rows:
        raise LoweringError(f"inject_rolling_buffer: block '{block.name}' has no loop of extent {window} over dimension {dim}")
    previous = ir.substitute(first, {loop.loop_var: ir.Sub(loop.loop_var, ir.const(1))})
    done = simplify(ir.Min(ir.Max(ir.Sub(ir.Add(previous, ir.const(window)), first), ir.const(0)), ir.const(window)))
    start = ir.select(ir.eq(loop.loop_var, loop.min), 0, done)
    return rows[0], replace(rows[0], min=start, extent=ir.Sub(ir.const(window), start))


def inject_rolling_buffer(func: ir.Func) -> ir.Func:
    """Apply every ``rolling_buffer`` tag."""
    for block in [b for b in ir.collect(func.body, ir.Block) if ir.ann_get(b.annotations, ROLLING) is not None]:
        name, dim, loop_name, window, stride = ir.ann_get(block.annotations, ROLLING)
        block = next(b for b in ir.collect(func.body, ir.Block) if b.name == block.name)
        buf = next(w.buffer for w in block.writes if w.buffer.name == name)
        loop = _find_loop(func, loop_name)
        old_loop, new_loop = _slide(block, func, dim, loop, window, stride)
        func = replace_stmt(func, old_loop, new_loop)
        shape = tuple(ir.const(window) if k == dim else d for k, d in enumerate(buf.shape))
        folded = buf.with_(shape=shape)
        func = _Fold(buf, folded, dim, window).visit(func)
        owner = allocating_block(func, folded)
        if owner is None:
            raise LoweringError(f"inject_rolling_buffer: '{name}' is not allocated by any block")
        outside = dict(ir.ann_get(owner.annotations, ALLOC_OUTSIDE, ()))
        outside[name] = loop_name
        func = replace_stmt(func, owner, replace(owner, annotations=ir.ann_set(owner.annotations, ALLOC_OUTSIDE, tuple(sorted(outside.items())))))
    return func
