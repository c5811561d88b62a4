"""Apply a consumer's clamp where the value is produced.

A chain's activation is part of the consumer's expression: a depthwise stage
after a 1x1 convolution reads ``relu6(conv[...])``, and a 1x1 stage after it
``relu6(depthwise[...])``. A 3x3 window reads each element 9 times and a 1x1
projection onto 16 channels 16 times, so the clamp runs 9 or 16 times per
element; in a register tile it is scalar work between the vector FMAs. This
pass moves it to the stores::

    depthwise[i] = depthwise_acc[0]                     depthwise[i] = T.min(T.max(depthwise_acc[0], 0.0), 6.0)
    ... T.min(T.max(depthwise[j], 0.0), 6.0) * w ...  ->  ... depthwise[j] * w ...

A clamp is a chain of ``min``/``max`` with constants around a load. The pass
moves it for an intermediate allocation when every load of it sits in the same
chain and no store to it reads it (its reductions accumulate in registers:
run after ``promote_accumulators``). Then every element the consumers read was
last written by a store, which now stores the clamped value. Anything else - a
load outside a clamp, two different clamps, a store that accumulates in memory,
a function parameter, storage that a view reinterprets as another dtype - is left
as it is.
"""

from __future__ import annotations

from dataclasses import replace

from .. import ir
from ..ir import expr as E

__all__ = ["clamp_at_producer"]

Clamp = tuple[tuple[type[E.Min] | type[E.Max], E.Expr], ...]
"""The ops of a clamp chain, outermost first: ``((Min, 6.0), (Max, 0.0))`` is ``min(max(x, 0), 6)``."""


def _is_const(e: E.Expr) -> bool:
    return isinstance(e, (E.FloatImm, E.IntImm))


def _chain(e: E.Expr) -> tuple[Clamp, E.BufferLoad] | None:
    """``e`` as a clamp chain around a load, or None."""
    ops: list[tuple[type[E.Min] | type[E.Max], E.Expr]] = []
    while isinstance(e, (E.Min, E.Max)):
        if _is_const(e.b):
            ops.append((type(e), e.b))
            e = e.a
        elif _is_const(e.a):
            ops.append((type(e), e.a))
            e = e.b
        else:
            return None
    return (tuple(ops), e) if ops and isinstance(e, E.BufferLoad) else None


def _apply(clamp: Clamp, value: E.Expr) -> E.Expr:
    for op, const in reversed(clamp):
        value = op(value, const)
    return value


class _Uses(ir.Visitor):
    """Per storage: the clamps its loads sit in (None for a bare load) and whether a store reads it."""

    def __init__(self) -> None:
        self.clamps: dict[E.Var, set[Clamp | None]] = {}
        self.accumulates: set[E.Var] = set()

    def visit(self, node: object) -> None:
        if isinstance(node, (E.Min, E.Max)):
            found = _chain(node)
            if found is not None:
                clamp, load = found
                self.clamps.setdefault(load.buffer.data, set()).add(clamp)
                for index in load.indices:
                    self.visit(index)
                return
        if isinstance(node, E.BufferLoad):
            self.clamps.setdefault(node.buffer.data, set()).add(None)
        if isinstance(node, ir.BufferStore) and any(
            ld.buffer.data is node.buffer.data for ld in ir.collect(node.value, E.BufferLoad)
        ):
            self.accumulates.add(node.buffer.data)
        self.generic_visit(node)


class _Move(ir.Transformer):
    def __init__(self, moved: dict[E.Var, Clamp]) -> None:
        self.moved = moved

    def visit_Min(self, e: E.Min) -> E.Expr:
        return self._peel(e)

    def visit_Max(self, e: E.Max) -> E.Expr:
        return self._peel(e)

    def _peel(self, e: E.Min | E.Max) -> E.Expr:
        found = _chain(e)
        if found is not None and found[1].buffer.data in self.moved:
            return self.visit(found[1])  # type: ignore[no-any-return]
        return self.generic_visit(e)  # type: ignore[no-any-return]

    def visit_BufferStore(self, s: ir.BufferStore) -> ir.Stmt:
        s = self.generic_visit(s)
        clamp = self.moved.get(s.buffer.data)
        return replace(s, value=_apply(clamp, s.value)) if clamp is not None else s


def clamp_at_producer(func: ir.Func) -> ir.Func:
    """``func`` with every movable clamp applied by its producer (see the module docstring)."""
    uses = _Uses()
    uses.visit(func.body)
    moved: dict[E.Var, Clamp] = {}
    dtypes: dict[E.Var, set[str]] = {}
    for decl in ir.collect(func.body, ir.DeclBuffer):
        dtypes.setdefault(decl.buffer.data, set()).add(decl.buffer.dtype)
    for alloc in ir.collect(func.body, ir.Allocate):
        clamps = uses.clamps.get(alloc.data, set())
        if len(clamps) != 1 or alloc.data in uses.accumulates or len(dtypes.get(alloc.data, ())) > 1:
            continue
        (clamp,) = clamps
        if clamp is not None:
            moved[alloc.data] = clamp
    if not moved:
        return func
    return replace(func, body=_Move(moved).visit(func.body))
