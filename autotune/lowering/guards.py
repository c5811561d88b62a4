"""Keep the loads of a select's values inside their buffers, so both values can be computed.

A padded window reads its input through a select::

    T.Select(y + rh - 1 >= 0 and y + rh - 1 < 56 and ..., data[0, y + rh - 1, x + rw - 1, c], 0.0)

Where the condition fails the load's indices leave ``data``, so the load may only run in
its branch: a branch per element, which keeps a register tile of padded loads from being
straight-line code (SLP cannot pack the neighbouring channels; numba's compile time grows
with every branch). This pass clamps each index of a load in a select's value that may
leave its dimension, by interval analysis over the enclosing loops::

    data[0, T.max(y + rh - 1, 0), T.max(T.min(x + rw - 1, 55), 0), c]

Where the select takes that value the index was already inside (a program reads its
buffers only in bounds), so the value is the same; where it does not, the value is not
used. An index that cannot leave its dimension is left as it is, so the channel index of
an NHWC window stays ``c`` and neighbouring channels stay neighbouring addresses. Runs
before flattening, on the logical indices; loads outside selects are not touched.
"""

from __future__ import annotations

from dataclasses import replace

from .. import ir
from ..analysis import Interval, eval_interval, loop_interval
from ..ir import expr as E

__all__ = ["clamp_guarded_loads"]


def _clamped(index: E.Expr, size: int, span: Interval) -> E.Expr:
    if span.hi is None or span.hi > size - 1:
        index = E.Min(index, E.IntImm(size - 1, index.dtype))
    if span.lo is None or span.lo < 0:
        index = E.Max(index, E.IntImm(0, index.dtype))
    return index


class _Clamp(ir.Transformer):
    def __init__(self) -> None:
        self.ranges: dict[E.Var, Interval] = {}
        self.in_value = 0

    def visit_For(self, f: ir.For) -> ir.Stmt:
        self.ranges[f.loop_var] = loop_interval(f.min, f.extent, self.ranges)
        try:
            return self.generic_visit(f)  # type: ignore[no-any-return]
        finally:
            del self.ranges[f.loop_var]

    def visit_Select(self, e: E.Select) -> E.Expr:
        cond = self.visit(e.cond)
        self.in_value += 1
        try:
            true, false = self.visit(e.true_value), self.visit(e.false_value)
        finally:
            self.in_value -= 1
        return replace(e, cond=cond, true_value=true, false_value=false)

    def visit_BufferLoad(self, e: E.BufferLoad) -> E.Expr:
        e = self.generic_visit(e)
        if not self.in_value:
            return e
        try:
            shape = e.buffer.const_shape()
        except ValueError:
            return e
        indices = tuple(
            _clamped(i, size, eval_interval(i, self.ranges)) for i, size in zip(e.indices, shape, strict=True)
        )
        return e if indices == e.indices else replace(e, indices=indices)


def clamp_guarded_loads(func: ir.Func) -> ir.Func:
    """``func`` with every load in a select's value kept inside its buffer (see the module docstring)."""
    return replace(func, body=_Clamp().visit(func.body))
