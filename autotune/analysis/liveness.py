"""Lifetimes of a lowered function's allocations, in one global program order.

Positions number, in a depth-first walk, every ``BufferStore`` and every other
statement that evaluates loads (an ``IfThenElse`` condition, a ``For``'s
bounds, an ``Evaluate``). A loop body is walked once, so a loop covers the
contiguous range of positions of the statements inside it::

    A_data = T.allocate([64])            A: [0, 2]  (accessed inside loop i, allocated outside it)
    for i in range(4):
        A[i] = X[i]                 0
        B_data = T.allocate([16])        B: [1, 2]  (per iteration: only its own accesses)
        B[0] = A[i]                 1
        Y[i] = B[0] + A[i]          2

An allocation is live from its first access (a load or store through any
buffer whose ``data`` is the allocation's variable) to its last. An access
inside a loop that is itself inside the allocation's scope stands for every
iteration of that loop, so it extends the lifetime to the whole range of the
outermost such loop: a rolling or double buffer declared outside its loop is
live for the whole loop. An ``Allocate`` inside a loop body is per iteration;
only its accesses within the body count, so two buffers of one body with
disjoint accesses may share bytes. An allocation never accessed lives at the
position of its ``Allocate`` (the next position to be numbered).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .. import ir

__all__ = ["Lifetime", "allocate_nodes", "allocation_lifetimes"]

#: An inclusive ``(start, end)`` range of program positions.
Lifetime = tuple[int, int]


def allocate_nodes(func: ir.Func) -> list[ir.Allocate]:
    """Every ``Allocate`` of ``func`` in program order (pre-order, outer before inner)."""
    return ir.collect(func.body, ir.Allocate)


@dataclass
class _Walk(ir.Visitor):
    """Numbers positions and records each access with the loops around it."""

    allocated: set[ir.Var]
    counter: int = 0
    loops: list[int] = field(default_factory=list)
    loop_ranges: dict[int, Lifetime] = field(default_factory=dict)
    depth_of: dict[ir.Var, int] = field(default_factory=dict)
    anchor_of: dict[ir.Var, int] = field(default_factory=dict)
    accesses: list[tuple[ir.Var, int, tuple[int, ...]]] = field(default_factory=list)

    def _number(self, data: list[ir.Var]) -> None:
        """Give the next position to one statement that touches ``data``."""
        pos = self.counter
        self.counter += 1
        stack = tuple(self.loops)
        for var in data:
            if var in self.allocated:
                self.accesses.append((var, pos, stack))

    def _number_loads(self, *exprs: ir.Expr) -> None:
        """Number a statement evaluating ``exprs`` if they load anything."""
        loads = [load for e in exprs for load in ir.collect(e, ir.BufferLoad)]
        if loads:
            self._number([load.buffer.data for load in loads])

    def visit_BufferStore(self, node: ir.BufferStore) -> None:
        loads = [load for e in (node.value, *node.indices) for load in ir.collect(e, ir.BufferLoad)]
        self._number([node.buffer.data, *(load.buffer.data for load in loads)])

    def visit_Evaluate(self, node: ir.Evaluate) -> None:
        self._number_loads(node.value)

    def visit_IfThenElse(self, node: ir.IfThenElse) -> None:
        self._number_loads(node.condition)
        self.visit(node.then_case)
        if node.else_case is not None:
            self.visit(node.else_case)

    def visit_For(self, node: ir.For) -> None:
        self._number_loads(node.min, node.extent)
        key = len(self.loop_ranges)
        self.loop_ranges[key] = (self.counter, self.counter)  # placeholder for an empty body
        first = self.counter
        self.loops.append(key)
        self.visit(node.body)
        self.loops.pop()
        self.loop_ranges[key] = (first, max(first, self.counter - 1))

    def visit_Allocate(self, node: ir.Allocate) -> None:
        # The first Allocate of a variable decides its scope (a variable is allocated once).
        self.depth_of.setdefault(node.data, len(self.loops))
        self.anchor_of.setdefault(node.data, self.counter)
        self.visit(node.body)


def allocation_lifetimes(func: ir.Func) -> dict[ir.Var, Lifetime]:
    """The inclusive lifetime of every ``Allocate`` of ``func``, keyed by its data variable.

    Keys are in program order of the ``Allocate`` nodes; positions are
    comparable across the whole function (see the module docstring).
    """
    nodes = allocate_nodes(func)
    walk = _Walk({node.data for node in nodes})
    walk.visit(func.body)
    spans: dict[ir.Var, list[int]] = {}
    for var, pos, stack in walk.accesses:
        depth = walk.depth_of[var]
        lo, hi = walk.loop_ranges[stack[depth]] if len(stack) > depth else (pos, pos)
        span = spans.setdefault(var, [lo, hi])
        span[0], span[1] = min(span[0], lo), max(span[1], hi)
    lifetimes: dict[ir.Var, Lifetime] = {}
    for node in nodes:
        if node.data not in lifetimes:
            anchor = walk.anchor_of[node.data]
            lo, hi = spans.get(node.data, (anchor, anchor))
            lifetimes[node.data] = (lo, hi)
    return lifetimes
