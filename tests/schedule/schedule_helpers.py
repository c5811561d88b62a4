"""Schedules and instrumentation shared by the schedule tests."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from autotune import ir


def count_computations(func: ir.Func, block: str) -> tuple[ir.Func, np.ndarray]:
    """Instrument ``block`` (a reduction) to count how often each of its elements is initialised.

    Returns the function with an extra int32 parameter (just before the outputs)
    and a zeroed counter array to pass for it.
    """
    target = next(b for b in ir.collect(func.body, ir.Block) if b.name == block)
    out = target.writes[0].buffer
    counter = ir.decl_buffer(f"{block}_count", out.const_shape(), "int32")
    store = next(s for s in ir.collect(target.init, ir.BufferStore))
    bump = ir.BufferStore(counter, ir.Add(ir.BufferLoad(counter, store.indices), ir.IntImm(1)), store.indices)

    class _Instrument(ir.Transformer):
        def visit_Block(self, b: ir.Block) -> ir.Stmt:
            b = self.generic_visit(b)
            return replace(b, init=ir.seq(b.init, bump)) if b.name == block else b

    body = _Instrument().visit(func.body)
    n_in = len(func.params) - func.num_outputs
    params = (*func.params[:n_in], counter, *func.params[n_in:])
    return replace(func, body=body, params=params), np.zeros(out.const_shape(), np.int32)
