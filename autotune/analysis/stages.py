"""What a stage (one block) computes, read from its IR.

:func:`contraction_operands`: whether a reduction block accumulates products of two operands
(a convolution of any kernel size, depthwise or not, a dense layer, a matmul), and which loads
those operands are. Schedule rules use it to decide which stages get a register tile over their
whole reduction.
"""

from __future__ import annotations

from .. import ir
from ..ir import expr as E


def _loads_other_than(e: E.Expr, out: ir.Buffer) -> list[E.BufferLoad]:
    return [load for load in ir.collect(e, E.BufferLoad) if load.buffer.data is not out.data]


def contraction_operands(block: ir.Block) -> tuple[E.Expr, E.Expr] | None:
    """``(a, b)`` when ``block`` is ``out[I] = out[I] + a * b`` with an init (a reduction), and
    ``a`` and ``b`` each read a buffer other than ``out`` (a padded read is a select around a load,
    a fused activation a clamp around it); None otherwise."""
    if block.init is None or not isinstance(block.body, ir.BufferStore):
        return None
    store = block.body
    value = store.value
    if not isinstance(value, E.Add):
        return None
    for acc, term in ((value.a, value.b), (value.b, value.a)):
        own = isinstance(acc, E.BufferLoad) and acc.buffer.data is store.buffer.data and acc.indices == store.indices
        if own and isinstance(term, E.Mul):
            a, b = term.a, term.b
            if _loads_other_than(a, store.buffer) and _loads_other_than(b, store.buffer):
                return a, b
    return None
