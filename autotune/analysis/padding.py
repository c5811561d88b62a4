"""Padding written inline: a block's reads of a buffer guarded by a select on the buffer's bounds.

The operator library writes a padded window as a lazy select inside the reduction::

    conv[y, x, o] += select(0 <= y + rh - 1 < H and 0 <= x + rw - 1 < W,
                            relu(data[y + rh - 1, x + rw - 1, rc]), 0.0) * w[rh, rw, rc, o]

:func:`padded_read` recognises that shape for one buffer: every load of the buffer
sits in the true value of such a select, all at one index tuple, the select's
condition is exactly "each index that can leave its dimension stays inside it",
and the true value depends on nothing but those loads (an activation around
them is kept). It also gives the range of each index over the block's domain:
the shape of a padded copy that holds every element the block reads. The
schedule primitive ``hoist_padding`` builds that copy; search rules ask
:func:`padded_reads` which reads of a block can be hoisted.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import ir
from ..ir import expr as E
from .interval import Interval, eval_interval

__all__ = ["PaddedRead", "padded_read", "padded_reads"]


@dataclass(frozen=True)
class PaddedRead:
    """The padding select around a block's reads of ``buffer``.

    ``lo[d]`` and ``shape[d]`` are the first value and the number of values of
    ``index[d]`` over the block's domain; ``low[d]``/``high[d]`` say whether it can
    fall below 0 or reach the buffer's extent (the sides the padding covers).
    """

    buffer: ir.Buffer
    select: E.Select
    index: tuple[E.Expr, ...]
    value: E.Expr
    pad: E.Expr
    lo: tuple[int, ...]
    shape: tuple[int, ...]
    low: tuple[bool, ...]
    high: tuple[bool, ...]

    def value_at(self, indices: tuple[E.Expr, ...]) -> E.Expr:
        """The padded value with its loads of ``buffer`` at ``indices`` instead."""
        return _Reindex(self.buffer, E.BufferLoad(self.buffer, indices)).visit(self.value)  # type: ignore[no-any-return]


def _domain(block: ir.Block) -> dict[ir.Var, Interval]:
    out: dict[ir.Var, Interval] = {}
    for iv in block.iter_vars:
        lo, ext = ir.as_int(iv.dom.min), ir.as_int(iv.dom.extent)
        out[iv.var] = Interval(lo, lo + ext - 1) if lo is not None and ext is not None else Interval.everything()
    return out


def _conjuncts(cond: E.Expr) -> list[E.Expr]:
    if isinstance(cond, E.And):
        return [*_conjuncts(cond.a), *_conjuncts(cond.b)]
    return [cond]


def _bound(atom: E.Expr, index: tuple[E.Expr, ...], shape: tuple[int, ...]) -> tuple[int, str] | None:
    """``(d, "low")`` for ``index[d] >= 0``, ``(d, "high")`` for ``index[d] < shape[d]`` (in any of
    their equivalent spellings); None for any other condition."""
    if not isinstance(atom, (E.GE, E.GT, E.LE, E.LT)):
        return None
    # write every comparison as `e >= k` (low) or `e < k` (high) with e an index expression
    flipped = {E.GE: E.LE, E.GT: E.LT, E.LE: E.GE, E.LT: E.GT}
    for expr, const, kind in ((atom.a, atom.b, type(atom)), (atom.b, atom.a, flipped[type(atom)])):
        k = ir.as_int(const)
        if k is None or expr not in index:
            continue
        d = index.index(expr)
        if (kind is E.GE and k == 0) or (kind is E.GT and k == -1):
            return d, "low"
        if (kind is E.LT and k == shape[d]) or (kind is E.LE and k == shape[d] - 1):
            return d, "high"
    return None


class _Reindex(ir.Transformer):
    """Every load of ``buffer`` replaced by ``new``."""

    def __init__(self, buffer: ir.Buffer, new: E.Expr) -> None:
        self.buffer, self.new = buffer, new

    def visit_BufferLoad(self, load: E.BufferLoad) -> E.Expr:
        return self.new if load.buffer is self.buffer else load


def _check_value(value: E.Expr, buffer: ir.Buffer, index: tuple[E.Expr, ...]) -> None:
    """The select's true value may read ``buffer`` at ``index`` only, and nothing else that varies."""
    for load in ir.collect(value, E.BufferLoad):
        if load.buffer is not buffer:
            raise ValueError(f"the padded value also reads '{load.buffer.name}'")
        if load.indices != index:
            raise ValueError(f"the padded value reads '{buffer.name}' at two different indices")
    stray = ir.free_vars(_Reindex(buffer, ir.const(0, buffer.dtype)).visit(value))
    if stray:
        names = ", ".join(sorted(v.name for v in stray))
        raise ValueError(f"the padded value uses {names} outside its load of '{buffer.name}'")


def _selects_of(block: ir.Block, buffer: ir.Buffer) -> tuple[list[E.Select], int]:
    """The selects whose true value reads ``buffer``, and the number of loads of it outside them."""
    selects = [s for s in ir.collect(block.body, E.Select) if any(ld.buffer is buffer for ld in ir.collect(s.true_value, E.BufferLoad))]
    inside = sum(1 for s in selects for ld in ir.collect(s.true_value, E.BufferLoad) if ld.buffer is buffer)
    total = sum(1 for ld in ir.collect(block.body, E.BufferLoad) if ld.buffer is buffer)
    return selects, total - inside


def _check_condition(
    cond: E.Expr,
    buffer: ir.Buffer,
    index: tuple[E.Expr, ...],
    extents: tuple[int, ...],
    low: tuple[bool, ...],
    high: tuple[bool, ...],
) -> None:
    """``cond`` must be "each index that can leave its dimension stays inside it", no more, no less."""
    found: set[tuple[int, str]] = set()
    for atom in _conjuncts(cond):
        bound = _bound(atom, index, extents)
        if bound is None:
            raise ValueError(f"the select's condition `{atom}` is not a bound of an index of '{buffer.name}'")
        found.add(bound)
    needed = {(d, "low") for d in range(len(index)) if low[d]} | {(d, "high") for d in range(len(index)) if high[d]}
    missing = sorted(needed - found)
    if missing:
        d, side = missing[0]
        raise ValueError(f"the select does not test the {side} bound of index {d} of '{buffer.name}' ({index[d]})")


def padded_read(block: ir.Block, buffer: ir.Buffer) -> PaddedRead:
    """The padding of ``block``'s reads of ``buffer``; ValueError saying why they are not one."""
    if block.init is not None and any(ld.buffer is buffer for ld in ir.collect(block.init, E.BufferLoad)):
        raise ValueError(f"the init of block '{block.name}' reads '{buffer.name}'")
    selects, bare = _selects_of(block, buffer)
    if not selects:
        raise ValueError(f"block '{block.name}' reads '{buffer.name}' under no select")
    if bare:
        raise ValueError(f"block '{block.name}' reads '{buffer.name}' outside its padding select too")
    first = selects[0]
    if any(s != first for s in selects[1:]):
        raise ValueError(f"block '{block.name}' reads '{buffer.name}' under selects that differ")
    if ir.as_int(first.false_value) is None and not isinstance(first.false_value, E.FloatImm):
        raise ValueError("the padding value is not a constant")
    index = next(ld for ld in ir.collect(first.true_value, E.BufferLoad) if ld.buffer is buffer).indices
    _check_value(first.true_value, buffer, index)
    try:
        extents = buffer.const_shape()
    except ValueError:
        raise ValueError(f"buffer '{buffer.name}' has a symbolic shape") from None
    dom = _domain(block)
    spans = [eval_interval(i, dom) for i in index]
    if not all(s.is_bounded for s in spans):
        raise ValueError(f"an index of '{buffer.name}' is unbounded over the block's domain")
    low = tuple(s.lo is not None and s.lo < 0 for s in spans)
    high = tuple(s.hi is not None and s.hi >= n for s, n in zip(spans, extents))
    _check_condition(first.cond, buffer, index, extents, low, high)
    lo = tuple(int(s.lo) for s in spans)  # type: ignore[arg-type]
    shape = tuple(int(s.hi) - int(s.lo) + 1 for s in spans)  # type: ignore[arg-type]
    return PaddedRead(buffer, first, index, first.true_value, first.false_value, lo, shape, low, high)


def padded_reads(block: ir.Block) -> tuple[PaddedRead, ...]:
    """Every read of ``block`` that is padded inline, in the order of its read regions."""
    out = []
    for region in block.reads:
        if any(w.buffer is region.buffer for w in block.writes):
            continue
        try:
            out.append(padded_read(block, region.buffer))
        except ValueError:
            continue
    return tuple(out)
