"""Keep reduction accumulators in registers.

After ``hoist_guards`` a reduction reads and writes one element of its output
on every step of its reduction loops::

    pool2[i] = -inf
    for rh in T.serial(3):
        for rw in T.serial(3):
            pool2[i] = T.max(pool2[i], data[...])

Nothing tells LLVM that ``pool2`` and ``data`` do not overlap (numba arrays
carry no alias information), so every step loads and stores ``pool2[i]``. This
pass gives the element a register::

    pool2_acc = T.allocate([1], "float32", annotations={"scope": "local"})
    pool2_acc[0] = -inf
    for rh ...: pool2_acc[0] = T.max(pool2_acc[0], data[...])
    pool2[i] = pool2_acc[0]

The pattern: a store ``B[I] = init`` directly followed by a loop nest in which
every access to ``B``'s storage is ``B[I]``, at least one is a store, ``I``
uses no variable of the nest, and no loop is parallel (threads would share the
accumulator). Anything else is left as it is.
"""

from __future__ import annotations

from dataclasses import replace

from .. import ir
from ..ir import names as irnames


def _accesses(node: ir.Stmt, data: ir.Var) -> list[ir.BufferLoad | ir.BufferStore]:
    found: list[ir.BufferLoad | ir.BufferStore] = []

    def visit(n: object) -> None:
        if isinstance(n, (ir.BufferLoad, ir.BufferStore)) and n.buffer.data is data:
            found.append(n)

    ir.post_order_visit(node, visit)
    return found


def _promotable(init: ir.Stmt, nest: ir.Stmt) -> ir.BufferStore | None:
    if not isinstance(init, ir.BufferStore) or not isinstance(nest, ir.For):
        return None
    loops = ir.collect(nest, ir.For)
    if any(f.kind == ir.ForKind.PARALLEL for f in loops):
        return None
    buf, idx = init.buffer, init.indices
    if buf.scope == ir.REGISTER_SCOPE or any(isinstance(s, ir.Allocate) for s in ir.collect(nest, ir.Allocate)):
        return None
    nest_vars = {f.loop_var for f in loops}
    if any(ir.free_vars(i) & nest_vars for i in idx):
        return None
    accesses = _accesses(nest, buf.data)
    if not any(isinstance(a, ir.BufferStore) for a in accesses):
        return None
    if any(a.buffer is not buf or a.indices != idx for a in accesses):
        return None
    return init


class _Promote(ir.Transformer):
    def __init__(self, taken: set[str]) -> None:
        self.taken = taken

    def visit_SeqStmt(self, node: ir.SeqStmt) -> ir.Stmt:
        seq = [self.visit(s) for s in node.seq]
        out: list[ir.Stmt] = []
        k = 0
        while k < len(seq):
            init = _promotable(seq[k], seq[k + 1]) if k + 1 < len(seq) else None
            if init is None:
                out.append(seq[k])
                k += 1
                continue
            out.append(self._promote(init, seq[k + 1]))
            k += 2
        return ir.seq(*out)

    def _promote(self, init: ir.BufferStore, nest: ir.Stmt) -> ir.Stmt:
        buf = init.buffer
        name = irnames.fresh_name(self.taken, f"{buf.name}_acc")
        acc = ir.decl_buffer(name, (1,), buf.dtype, scope=ir.REGISTER_SCOPE)
        zero = (ir.const(0),)

        class _Swap(ir.Transformer):
            def visit_BufferLoad(self, n: ir.BufferLoad) -> ir.Expr:
                return ir.BufferLoad(acc, zero) if n.buffer is buf else n

            def visit_BufferStore(self, n: ir.BufferStore) -> ir.Stmt:
                if n.buffer is not buf:
                    return replace(n, value=self.visit(n.value))
                return ir.BufferStore(acc, self.visit(n.value), zero)

        body = ir.seq(
            ir.BufferStore(acc, init.value, zero),
            _Swap().visit(nest),
            ir.BufferStore(buf, ir.BufferLoad(acc, zero), init.indices),
        )
        ann = ir.ann_set((), "scope", ir.REGISTER_SCOPE)
        return ir.Allocate(acc.data, acc.dtype, (ir.const(1),), ir.DeclBuffer(acc, body), ann)


def promote_accumulators(func: ir.Func) -> ir.Func:
    """``func`` with every promotable reduction accumulator in a register (see the module docstring)."""
    taken = {b.name for b in ir.collect(func.body, ir.DeclBuffer) for b in (b.buffer,)}
    taken |= {b.name for b in func.params}
    return replace(func, body=_Promote(taken).visit(func.body))
