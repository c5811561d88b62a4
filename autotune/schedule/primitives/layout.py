"""Layout primitive: transform_layout, with axis separators (TVM's ``te.AXIS_SEPARATOR``).

The index map is the JSON form of :mod:`autotune.schedule.exprjson`: one entry
per new dimension, an index expression over the buffer's original indices
(``["v", k]``), or the string ``"|"`` between two entries to start a new
physical axis. The new shape is the image of the map over the old shape
(interval analysis), so ``[i // 4096, "|", i % 4096]`` on ``[8192]`` gives
``[2, 4096]`` with ``axis_separators=[1]``: two physical banks.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from math import prod
from typing import Any

import numpy as np

from ... import ir
from ...analysis.arith import Analyzer
from ...analysis.interval import Interval
from ...errors import ScheduleError
from ...ir.names import fresh_name
from ..exprjson import AXIS_SEPARATOR, expr_from_json
from ..regions import EXPLICIT, refresh_regions
from ..tree import all_names, allocating_block, root_block, writers_of
from .cache import stage_in, stage_out
from .memory import find_buffer, refuse_view
from .placement import ROLLING

Result = tuple[ir.Func, tuple[str, ...]]
P = "transform_layout"


def _parse(index_map: Sequence[Any], buf: ir.Buffer) -> tuple[list[ir.Var], list[ir.Expr], tuple[int, ...]]:
    """The map's variables, its index expressions and the separator positions."""
    if not isinstance(index_map, (list, tuple)) or not index_map:
        raise ScheduleError(P, f"index_map of '{buf.name}' must be a non-empty list, got {index_map!r}")
    variables = [ir.Var(f"i{k}") for k in range(buf.ndim)]
    exprs: list[ir.Expr] = []
    seps: list[int] = []
    for entry in index_map:
        if isinstance(entry, str):
            if entry != AXIS_SEPARATOR:
                raise ScheduleError(P, f"unknown string {entry!r} in the index map of '{buf.name}' (the axis separator is {AXIS_SEPARATOR!r})")
            if not exprs:
                raise ScheduleError(P, f"the index map of '{buf.name}' starts with an axis separator")
            if seps and seps[-1] == len(exprs):
                raise ScheduleError(P, f"the index map of '{buf.name}' repeats an axis separator")
            seps.append(len(exprs))
        else:
            exprs.append(expr_from_json(entry, variables, P))
    if not exprs or (seps and seps[-1] == len(exprs)):
        raise ScheduleError(P, f"the index map of '{buf.name}' ends with an axis separator")
    return variables, exprs, tuple(seps)


def _image_shape(variables: list[ir.Var], exprs: list[ir.Expr], buf: ir.Buffer) -> tuple[int, ...]:
    """One extent per new index: one past its largest value over the old shape."""
    try:
        old = buf.const_shape()
    except ValueError:
        raise ScheduleError(P, f"buffer '{buf.name}' has a symbolic shape") from None
    an = Analyzer({v: Interval(0, d - 1) for v, d in zip(variables, old)})
    shape = []
    for k, e in enumerate(exprs):
        box = an.interval(an.simplify(e))
        if box.lo is None or box.hi is None or box.lo < 0:
            raise ScheduleError(P, f"index {k} of the map of '{buf.name}' ({e}) takes values in {box}, it must stay in [0, n)")
        shape.append(box.hi + 1)
    if prod(shape) < prod(old):
        raise ScheduleError(
            P, f"index map is not bijective on '{buf.name}': shape {list(old)} ({prod(old)} elements) maps into {shape} ({prod(shape)})"
        )
    return tuple(shape)


_NUMPY_OPS: dict[type, Callable[[Any, Any], Any]] = {
    ir.Add: np.add,
    ir.Sub: np.subtract,
    ir.Mul: np.multiply,
    ir.FloorDiv: np.floor_divide,
    ir.FloorMod: np.mod,
    ir.Min: np.minimum,
    ir.Max: np.maximum,
}


def _evaluate(e: ir.Expr, grid: dict[ir.Var, np.ndarray], buf: ir.Buffer) -> np.ndarray:
    """The value of index expression ``e`` at every point of ``grid`` (one array per map variable)."""
    if isinstance(e, ir.IntImm):
        return np.int64(e.value)  # type: ignore[return-value]
    if isinstance(e, ir.Var):
        return grid[e]
    a, b = _evaluate(e.a, grid, buf), _evaluate(e.b, grid, buf)  # type: ignore[attr-defined]
    if isinstance(e, (ir.FloorDiv, ir.FloorMod)) and np.any(b == 0):
        raise ScheduleError(P, f"the index map of '{buf.name}' divides by zero in {e}")
    return _NUMPY_OPS[type(e)](a, b)  # type: ignore[no-any-return]


def _check_injective(variables: list[ir.Var], exprs: list[ir.Expr], shape: tuple[int, ...], buf: ir.Buffer) -> None:
    """Refuse a map that sends two elements of ``buf`` to one place: it must be a bijection onto its image.

    The map is evaluated at every element (each point's new position, row-major in ``shape``),
    so any index arithmetic the JSON form allows is checked exactly.
    """
    old = buf.const_shape()
    points = np.indices(old, dtype=np.int64).reshape(len(old), -1)
    grid = dict(zip(variables, points))
    flat = np.zeros(points.shape[1], np.int64)
    for e, extent in zip(exprs, shape):
        flat = flat * extent + np.broadcast_to(_evaluate(e, grid, buf), flat.shape)
    counts = np.bincount(flat, minlength=prod(shape))
    if counts.max(initial=0) <= 1:
        return
    code = int(np.argmax(counts))
    first, second = (_point(int(k), old) for k in np.flatnonzero(flat == code)[:2])
    raise ScheduleError(
        P, f"index map is not injective on '{buf.name}': elements {first} and {second} both map to {_point(code, shape)}"
    )


def _point(flat: int, shape: tuple[int, ...]) -> list[int]:
    """The indices of row-major position ``flat`` in ``shape``."""
    return [int(v) for v in np.unravel_index(flat, shape)]


class _Relayout(ir.Transformer):
    """Replace ``old`` by ``new``, every access ``old[idx]`` by ``new[map(idx)]`` (simplified in its loops)."""

    def __init__(self, old: ir.Buffer, new: ir.Buffer, variables: list[ir.Var], exprs: list[ir.Expr]) -> None:
        self.old, self.new, self.variables, self.exprs = old, new, variables, exprs
        self.an = Analyzer()

    def visit(self, node: Any) -> Any:
        if isinstance(node, ir.Expr) and not ir.collect(node, ir.BufferLoad):
            return node
        return super().visit(node)

    def _map(self, indices: tuple[ir.Expr, ...]) -> tuple[ir.Expr, ...]:
        vmap = dict(zip(self.variables, indices))
        return tuple(self.an.simplify(ir.substitute(e, vmap)) for e in self.exprs)

    def visit_For(self, s: ir.For) -> ir.Stmt:
        with self.an.scoped():
            self.an.bind(s.loop_var, ir.Range(s.min, s.extent))
            return self.generic_visit(s)  # type: ignore[no-any-return]

    def visit_Block(self, b: ir.Block) -> ir.Stmt:
        with self.an.scoped():
            for iv in b.iter_vars:
                self.an.bind(iv.var, iv.dom)
            out = self.generic_visit(b)
        touched = any(r.buffer is self.old for r in (*b.reads, *b.writes))
        return refresh_regions(out) if touched else out  # type: ignore[no-any-return]

    def visit_BufferLoad(self, ld: ir.BufferLoad) -> ir.Expr:
        out = self.generic_visit(ld)
        return ir.BufferLoad(self.new, self._map(out.indices)) if ld.buffer is self.old else out  # type: ignore[no-any-return]

    def visit_BufferStore(self, st: ir.BufferStore) -> ir.Stmt:
        out = self.generic_visit(st)
        return ir.BufferStore(self.new, out.value, self._map(out.indices)) if st.buffer is self.old else out  # type: ignore[no-any-return]

    def visit_buffer(self, buffer: ir.Buffer) -> ir.Buffer:
        return self.new if buffer is self.old else buffer


def _check_no_explicit(func: ir.Func, buf: ir.Buffer) -> None:
    for b in ir.collect(func.body, ir.Block):
        for access, key in EXPLICIT.items():
            regions = b.reads if access == "read" else b.writes
            marked = ir.ann_get(b.annotations, key, ())
            if any(i < len(regions) and regions[i].buffer is buf for i in marked):
                raise ScheduleError(
                    P, f"block '{b.name}' has an explicit {access} region of '{buf.name}' (annotate_buffer_access); transform the layout first"
                )


def _check_not_rolled(func: ir.Func, buf: ir.Buffer) -> None:
    """Refuse a buffer that a rolling buffer folds: its annotation names a dimension of the old layout."""
    for b in ir.collect(func.body, ir.Block):
        info = ir.ann_get(b.annotations, ROLLING)
        if info is not None and info[0] == buf.name:
            raise ScheduleError(
                P, f"'{buf.name}' is a rolling buffer of block '{b.name}' over its dimension {info[1]}; transform the layout before rolling_buffer"
            )


def transform_layout(func: ir.Func, block: str, buffer: str, index_map: Sequence[Any], padding: bool = True) -> Result:
    """Lay ``buffer`` (accessed by ``block``) out through ``index_map``.

    ``A_global[8192]`` with ``[i // 4096, "|", i % 4096]`` becomes
    ``A_global[2, 4096]`` with ``axis_separators=[1]``, and every
    ``A_global[v]`` becomes ``A_global[v // 4096, v % 4096]``.

    The map must send distinct elements to distinct places. A map whose image box is larger
    than the buffer (``[i // 4, "|", i % 4]`` on ``[7]`` gives ``[2, 4]``) pads it: the extra
    places are allocated and never read or written. ``padding=False`` refuses such a map.

    A function parameter keeps the layout its caller passes; the new layout goes to a whole
    staged copy made here at the root (``.last``: its name, also its copy block's). An input
    ``A`` is copied into ``A_layout`` before its first reader and every reader reads the copy;
    an output is written by its writer into the copy, copied out after the writer's loop nest
    (the writer must be its only one and store every element, or the copy-out would overwrite
    what it leaves). The copy block then accesses the copy at mapped indices, so ``compute_at``
    does not move it: a copy made tile by tile is ``cache_read``/``cache_write``, ``compute_at``
    of the cache block, then ``transform_layout`` of the cache:

    ``for i: B[i] = A[i] * 2`` becomes ``for ax0: A_layout[ax0 // 4, ax0 % 4] = A[ax0]``
    then ``for i: B[i] = A_layout[i // 4, i % 4] * 2``.
    """
    root_block(func)
    if not isinstance(padding, bool):
        raise ScheduleError(P, f"argument 'padding' must be true or false, got {padding!r}")
    buf = find_buffer(func, block, buffer, P)
    variables, exprs, seps = _parse(index_map, buf)
    shape = _image_shape(variables, exprs, buf)
    _check_injective(variables, exprs, shape, buf)
    if not padding and prod(shape) > prod(buf.const_shape()):
        raise ScheduleError(
            P,
            f"index map pads '{buf.name}' {list(buf.const_shape())} to {list(shape)} "
            f"({prod(shape)} places for {prod(buf.const_shape())} elements) and padding is off",
        )
    _check_no_explicit(func, buf)
    _check_not_rolled(func, buf)
    outputs: tuple[str, ...] = ()
    if allocating_block(func, buf) is None:
        refuse_view(func, buf, P)
        func, buf = _stage_parameter(func, buf)
        outputs = (buf.name,)
    new = buf.with_(shape=tuple(ir.const(d) for d in shape), axis_separators=seps, data=ir.Var(f"{buf.name}_data", "handle"))
    return _Relayout(buf, new, variables, exprs).visit(func), outputs


def _stage_parameter(func: ir.Func, param: ir.Buffer) -> tuple[ir.Func, ir.Buffer]:
    """``func`` with parameter ``param`` staged through a new intermediate ``<param>_layout``: copied
    in before its readers (an input) or out after its writer (an output); and that intermediate."""
    staged = ir.decl_buffer(fresh_name(all_names(func), f"{param.name}_layout"), param.const_shape(), param.dtype)
    if any(p is param for p in func.inputs):
        return stage_in(func, param, staged, P), staged
    writers = writers_of(func, param)
    if not writers:
        raise ScheduleError(P, f"output '{param.name}' has no writer whose stores a staged copy could take")
    if len(writers) == 1:
        _check_writes_every_element(writers[0], param)
    return stage_out(func, writers[0], param, staged, P), staged


def _check_writes_every_element(blk: ir.Block, buf: ir.Buffer) -> None:
    """Refuse an output whose writer may leave elements unwritten: each of its stores must index
    ``buf`` by distinct spatial iteration variables that run over its whole shape, in order."""
    doms = {iv.var: iv.dom for iv in blk.iter_vars if iv.kind == "spatial"}
    for store in ir.collect(blk, ir.BufferStore):
        if store.buffer is not buf:
            continue
        whole = all(
            isinstance(i, ir.Var) and i in doms and ir.as_int(doms[i].min) == 0 and ir.as_int(doms[i].extent) == d
            for i, d in zip(store.indices, buf.const_shape())
        )
        if not whole or len(set(store.indices)) != len(store.indices):
            raise ScheduleError(
                P,
                f"output '{buf.name}' is stored by block '{blk.name}' at [{', '.join(map(ir.to_text, store.indices))}], "
                "which may not be every element: a staged copy-out would overwrite the rest with what the block never wrote",
            )
