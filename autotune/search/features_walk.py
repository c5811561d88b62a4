"""The walk of a lowered program that :mod:`autotune.search.features` reads: its loads and stores
(:class:`~autotune.search.features_estimate.Access`) in the loops around them, their executions (a
guard scales them by how often it holds, a loop by its mean trip count), the store statements of
the roofline estimate (:class:`~autotune.search.features_roofline.Statement`), with their executions
on the busiest core of a parallel loop, and the allocations, loop kinds and arithmetic operations."""

from __future__ import annotations

from dataclasses import dataclass, field
from math import prod

from .. import ir
from ..analysis import Interval, eval_interval
from ..memory.lowering import in_registers
from .features_estimate import Access, Chunks, Loop, operands
from .features_estimate import probability as _probability
from .features_estimate import trip as _trip
from .features_roofline import SCALAR_CALLS, Operation, Statement

__all__ = ["Walk", "index_info"]

_OPS = (ir.Add, ir.Sub, ir.Mul, ir.Div, ir.FloorDiv, ir.FloorMod, ir.Min, ir.Max, ir.Select, ir.Call)


@dataclass
class Walk:
    """Mutable state of one walk of a lowered program; :func:`~autotune.search.features.features` reads
    its results."""

    bounds: dict[ir.Var, Interval] = field(default_factory=dict)
    accesses: list[Access] = field(default_factory=list)
    ops: float = 0.0
    kinds: dict[str, int] = field(default_factory=dict)
    max_depth: int = 0
    nests: int = 0
    inner_guards: int = 0
    allocs: list[ir.Allocate] = field(default_factory=list)
    alloc_depth: dict[ir.Var, int] = field(default_factory=dict)
    registers: set[ir.Var] = field(default_factory=set)
    statements: list[Statement] = field(default_factory=list)
    slp: bool = False  # the code here is compiled with LLVM's SLP vectoriser (autotune.vectorizer)
    cores: int = 1  # the threads a parallel loop's iterations are shared among
    chunks: Chunks = field(default_factory=Chunks)

    def access(
        self, node: ir.BufferStore | ir.BufferLoad, loops: tuple[Loop, ...], iters: float, guard: bool
    ) -> Access:
        names, has_mod = index_info(node.indices)
        store = isinstance(node, ir.BufferStore)
        reg = node.buffer.data in self.registers
        a = Access(node.buffer, node.indices, loops, iters, store, guard, names, has_mod, reg)
        self.accesses.append(a)
        return a

    def stmt(
        self, s: ir.Stmt, loops: tuple[Loop, ...], prob: float, guard: bool, busy: tuple[float, ...] = ()
    ) -> bool:
        """Walk ``s``; return whether it holds a loop (so the loop around it is not innermost).
        ``busy``: below a parallel loop, the executions of ``s`` per run on each of its
        :class:`~autotune.search.features_estimate.Chunks`."""
        if isinstance(s, ir.For):
            return self.loop(s, loops, prob, busy)
        if isinstance(s, ir.SeqStmt):
            has = [self.stmt(c, loops, prob, guard, busy) for c in s.seq]
            return any(has)
        if isinstance(s, ir.IfThenElse):
            p = _probability(s.condition, self.bounds)
            ps = self.chunks.probabilities(s.condition, busy)
            inner = self.stmt(s.then_case, loops, prob * p, True, tuple(b * q for b, q in zip(busy, ps)))
            if s.else_case is not None:
                rest = tuple(b * (1.0 - q) for b, q in zip(busy, ps))
                inner = self.stmt(s.else_case, loops, prob * (1.0 - p), True, rest) or inner
            if loops and not inner:
                self.inner_guards += 1
            return inner
        if isinstance(s, ir.BufferStore):
            iters = prob * prod(lp.trip for lp in loops)
            store = self.access(s, loops, iters, guard)
            operations, loads = self.value(s.value, loops, iters, guard, s.buffer.data)
            depth, busiest = self.alloc_depth.get(s.buffer.data, 0), max(busy) if busy else None
            statement = Statement(store, tuple(loads), tuple(operations), self.slp, depth, busiest)
            self.statements.append(statement)
            return False
        if isinstance(s, ir.Allocate):
            if in_registers(s):  # register tiles and accumulators are not memory
                self.registers.add(s.data)
            else:
                self.allocs.append(s)
            self.alloc_depth[s.data] = len(loops)
            return self.stmt(s.body, loops, prob, guard, busy)
        if isinstance(s, (ir.DeclBuffer, ir.Block)):
            return self.stmt(s.body, loops, prob, guard, busy)
        return False  # Evaluate: nothing to count

    def loop(self, s: ir.For, loops: tuple[Loop, ...], prob: float, busy: tuple[float, ...]) -> bool:
        if not loops:
            self.nests += 1
        self.kinds[s.kind] = self.kinds.get(s.kind, 0) + 1
        self.max_depth = max(self.max_depth, len(loops) + 1)
        trip, const = _trip(s, self.bounds)
        if busy:
            busy = self.chunks.loop(s, busy)
        elif s.kind == ir.ForKind.PARALLEL:  # the outermost parallel loop: numba runs the others serially
            busy = self.chunks.enter(s, self.bounds, self.cores, prob * prod(lp.trip for lp in loops))
        lo = eval_interval(s.min, self.bounds).lo
        hi = eval_interval(ir.Add(s.min, s.extent), self.bounds).hi
        self.bounds[s.loop_var] = Interval(lo, None if hi is None else hi - 1)
        outer, mode = self.slp, ir.ann_get(s.annotations, ir.VECTORIZER_ATTR)
        self.slp = outer if mode is None else mode == "slp"
        self.stmt(s.body, (*loops, Loop(s.loop_var, s.kind, trip, const)), prob, False, busy)
        self.slp = outer
        return True

    def value(
        self, e: ir.Expr, loops: tuple[Loop, ...], iters: float, guard: bool, stored: ir.Var
    ) -> tuple[list[Operation], list[Access]]:
        """Count the flop-ish operations and the loads of a value stored to buffer ``stored`` (not its
        index math); return the instructions of one execution but those of a select's condition
        (loop indices compared: hoisted, or one mask) and the multiplies fused into an add, and the
        loads."""
        operations: list[Operation] = []
        loads: list[Access] = []
        count = 0

        def visit(node: ir.Expr, condition: bool, fused: bool) -> tuple[frozenset[ir.Expr], bool]:
            """The integer expressions ``node``'s value depends on, and whether it is shared."""
            nonlocal count
            if isinstance(node, ir.BufferLoad):
                loads.append(self.access(node, loops, iters, guard))
                return frozenset(node.indices), node.buffer.data is not stored
            exprs: frozenset[ir.Expr] = frozenset()
            shared = True
            fuse = ir.is_float(node.dtype) and isinstance(node, (ir.Add, ir.Sub)) and not condition
            for child in operands(node):
                into = fuse and isinstance(child, ir.Mul) and ir.is_float(child.dtype)
                fuse = fuse and not into  # one multiply per add
                inner = condition or (isinstance(node, ir.Select) and child is node.cond)
                child_exprs, child_shared = visit(child, inner, into)
                exprs, shared = exprs | child_exprs, shared and child_shared
            if not ir.is_float(node.dtype) and node.dtype != ir.BOOL:
                exprs = frozenset((node,))  # integer math: told apart by its own value
            if isinstance(node, _OPS):
                count += 1
                if not condition and not fused:
                    call = node.op if isinstance(node, ir.Call) and node.op in SCALAR_CALLS else ""
                    operations.append(Operation(exprs, shared, call))
            return exprs, shared

        visit(e, False, False)
        self.ops += count * iters
        return operations, loads


def index_info(indices: tuple[ir.Expr, ...]) -> tuple[frozenset[ir.Var], bool]:
    """The variables of some index expressions, and whether they use ``%``."""
    names: set[ir.Var] = set()
    has_mod = False
    stack = list(indices)
    while stack:
        node = stack.pop()
        if isinstance(node, ir.Var):
            names.add(node)
        elif isinstance(node, ir.BufferLoad):
            stack.extend(node.indices)
        else:
            has_mod = has_mod or isinstance(node, ir.FloorMod)
            stack.extend(operands(node))
    return frozenset(names), has_mod
