"""A roofline estimate of a lowered program's run time, for :mod:`autotune.search.features`.

The estimate (:func:`roofline`) is made from a program's store statements (:class:`Statement`: a
store, the loads of its value and its arithmetic instructions, a multiply that feeds a float add
fused into it as the kernels' fast-math flags let LLVM do): per statement, the cycles of one
execution are the larger of its issue cost and its dependence chain. The loop the compiled statement
steps through is the innermost one that is neither unrolled by the code generator nor short enough
for LLVM to unroll whole, counting every statement in its body (:func:`iterating`, :class:`Nests`).
With LLVM's loop vectoriser its steps share vector lanes when it holds no other stepped loop, the
store moves by 0 or 1 element per step and every load by a constant stride (a larger one is
gathered: a load per lane, :func:`gathered`); with SLP (``autotune.vectorizer``), an unrolled loop
inside it along which the store moves by 1 and every load by 0 or 1 does (:func:`vector_loop`).
Issue: two arithmetic operations or loads and one store per cycle and lane, over the lanes, plus a
loop overhead per step shared by the executions in it. The executions of one unrolled step that meet
equal values compute (or load) them once, as LLVM's value numbering does (:func:`distinct_share`); a
value that does not move along the lanes is made once for them, or hoisted out of the loop
vectoriser's loop; a :data:`SCALAR_CALLS` intrinsic is a call per lane. A register tile's element
that no stepped loop indexes costs nothing. Chain: an accumulator that the stepped loop carries
waits :data:`FMA_LATENCY` cycles per update in a register, :data:`FORWARD_LATENCY` in memory, shared
by the accumulators that the loops inside it index (and the vector lanes). Pages: a load that moves
a page or more per step of the stepped loop, over more pages than the first-level TLB holds, waits
:data:`TLB_MISS` cycles per page, shared by the executions of the step: the third bound, beside
issue and chain. Below a parallel loop a statement takes the cycles of its executions on the core
that runs the most of them (``Statement.busiest``). The bytes that L2, L3 and memory serve
(:func:`~autotune.search.features_estimate.memory_levels`, unrolled copies sharing a register) take
their time at :data:`BANDWIDTH_GBS`, and the estimate is the larger of the two times (a core
computes while its caches fetch). The constants are the DESIGN's figures for this host kind, or
measured by the experiment their docstring names; only the order of the estimates matters to the
cost model.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from math import prod

import numpy as np

from .. import ir
from ..analysis import sum_form
from .features_estimate import Access, Loop, operands, stride

__all__ = [
    "CYCLES_PER_NS", "SCALAR_CALLS", "TLB_MISS", "Nests", "Operation", "Statement", "distinct_share",
    "gathered", "iterating", "loop_bodies", "roofline", "statement_cycles", "vector_loop",
]  # fmt: skip

CYCLES_PER_NS = 3.0
"""Clock rate the estimate converts cycles with (a ranking needs only a constant)."""
ISSUE = 0.5
"""Cycles per arithmetic operation, load or store on one lane: two of each per cycle."""
STORE_ISSUE = 1.0
"""Cycles per store on one lane: one store per cycle."""
LOOP_CYCLES = 1.0
"""Cycles a loop iteration costs beyond its body (increment, compare, branch, index math)."""
FMA_LATENCY = 4.0
"""Cycles before an accumulator in a register can take its next update."""
FORWARD_LATENCY = 6.0
"""Cycles before an accumulator in memory can take its next update (store-to-load forwarding)."""
REDUCTION_INTERLEAVE = 4.0
"""Copies of a vectorised reduction that LLVM's loop vectoriser interleaves (each with its own
accumulator) when the kernel's fast-math flags let it reassociate: x86's largest interleave count."""
SCALAR_REDUCTION_INTERLEAVE = 2.0
"""Copies of a reduction left on one lane that LLVM interleaves in a nested loop (its limit for them)."""
FULL_UNROLL = 128
"""A loop of a constant trip count whose whole unrolled body, every statement in it, has at most this
many instructions (:func:`loop_bodies`) is taken as unrolled by LLVM (so the loop around it is the
one that vectorises)."""
BANDWIDTH_GBS = (75.0, 25.0, 20.0)
"""Bytes per ns one core reads from L2, L3 and memory (the DESIGN's figures for this host kind)."""
SCALAR_CALLS = {"exp": 6.0, "log": 7.0, "tanh": 31.0}
"""Cycles of one call per lane of the intrinsics that LLVM calls once per lane (numba maps them to
no vector math library here): the libm calls' throughput in a loop, as ``experiments/scalar_calls.py``
measures it on an AVX-512 host, rounded."""
PAGE_BYTES = 4096
"""Bytes of a page: a load that moves a page or more per step touches a new one at each."""
DTLB_ENTRIES = 64
"""Pages the first-level data TLB holds (Intel cores since Skylake)."""
TLB_MISS = 4.5
"""Cycles per load that misses the first-level TLB and finds its page in the second level: about 9
cycles each, two in flight (Intel cores since Skylake)."""
MAX_SHARED_POINTS = 4096
"""Above this many executions in one unrolled step, :func:`distinct_share` takes every one as new."""


@dataclass(frozen=True)
class Operation:
    """One arithmetic instruction of a stored value. ``exprs``: the integer expressions its value
    depends on (the indices of the loads under it, the operands of the comparisons under it);
    ``shared``: whether executions with equal values of ``exprs`` compute one value (False when it
    depends on a load of the buffer its statement stores, which changes between them); ``call``: the
    name of the :data:`SCALAR_CALLS` intrinsic it calls, if it calls one."""

    exprs: frozenset[ir.Expr]
    shared: bool = True
    call: str = ""


@dataclass(frozen=True)
class Statement:
    """A store, the loads of its value and the arithmetic instructions of its value (a multiply that
    feeds a float add is fused into it); ``slp``: compiled with LLVM's SLP vectoriser instead of its
    loop vectoriser (``autotune.vectorizer``); ``depth``: how many of the store's loops are outside
    the allocation of the buffer it stores to; ``busiest``: below a parallel loop, its executions on
    the core that runs the most of them (:class:`~autotune.search.features_estimate.Chunks`), else
    None."""

    store: Access
    loads: tuple[Access, ...]
    operations: tuple[Operation, ...]
    slp: bool = False
    depth: int = 0
    busiest: float | None = None

    @property
    def ops(self) -> float:
        return float(len(self.operations))


def _instructions(s: Statement) -> float:
    """The instructions of one execution of ``s``: its operations and accesses, but a register tile's
    access that only unrolled loops index (a register once the code generator unrolls them)."""
    unrolled = {lp.var for lp in s.store.loops if lp.kind == ir.ForKind.UNROLLED}
    return s.ops + sum(not (a.register and a.index_vars <= unrolled) for a in (s.store, *s.loads))


def loop_bodies(statements: Sequence[Statement]) -> dict[ir.Var, float]:
    """By loop variable, the instructions of one iteration of the loop's body once every loop inside
    it is unrolled: those of every statement under it, each times the trips of its loops inside."""
    bodies: dict[ir.Var, float] = {}
    for s in statements:
        n = _instructions(s)
        for lp in reversed(s.store.loops):
            bodies[lp.var] = bodies.get(lp.var, 0.0) + n
            n *= lp.trip
    return bodies


@dataclass(frozen=True)
class Nests:
    """What one statement's estimate needs to know of the statements around it: ``bodies``, by loop
    variable, the instructions of one iteration once every loop inside it is unrolled
    (:func:`loop_bodies`); ``outer``, the loops that hold a loop that another statement steps through
    (not innermost, so the loop vectoriser leaves them)."""

    bodies: Mapping[ir.Var, float]
    outer: frozenset[ir.Var] = frozenset()

    @staticmethod
    def of(statements: Sequence[Statement]) -> Nests:
        bodies = loop_bodies(statements)
        outer: set[ir.Var] = set()
        for s in statements:
            pos = iterating(s, bodies)
            outer.update(lp.var for lp in s.store.loops[: 0 if pos is None else pos])
        return Nests(bodies, frozenset(outer))


def iterating(s: Statement, bodies: Mapping[ir.Var, float] | None = None) -> int | None:
    """The position of the loop the compiled statement steps through: the innermost loop that is
    neither unrolled by the code generator nor short enough for LLVM to unroll whole (a constant
    trip count and at most :data:`FULL_UNROLL` instructions once unrolled, counted over every
    statement in it by ``bodies``, :func:`loop_bodies`; without it, over ``s`` alone); None when
    every loop is unrolled."""
    table = bodies if bodies else loop_bodies([s])
    own: Mapping[ir.Var, float] | None = None if bodies else table
    for i in range(len(s.store.loops) - 1, -1, -1):
        lp = s.store.loops[i]
        if lp.var in table:
            body = table[lp.var]
        else:  # a loop the nest's table lacks: the statement's own table, made once
            own = own if own is not None else loop_bodies([s])
            body = own[lp.var]
        if lp.kind != ir.ForKind.UNROLLED and not (lp.const and body * lp.trip <= FULL_UNROLL):
            return i
    return None


def _moves_by_one(s: Statement, var: ir.Var) -> bool:
    return all(stride(a, var) in (0, 1) and not a.guarded for a in (s.store, *s.loads))


def _gathers(s: Statement, var: ir.Var) -> bool:
    """Whether the loop vectoriser vectorises ``s`` along ``var`` with gathers: its store moves by 0
    or 1 element per step and every load by a constant stride (one of more than 1 is gathered),
    none under a guard."""
    return (
        stride(s.store, var) in (0, 1)
        and all(stride(a, var) is not None for a in s.loads)
        and not any(a.guarded for a in (s.store, *s.loads))
    )


def gathered(step: int | None) -> bool:
    """Whether a load that moves by ``step`` elements per step of the vector loop (its
    :func:`stride` along it) is a gather: more than one element per step, a load per lane."""
    return step is not None and abs(step) > 1


def vector_loop(s: Statement, nests: Nests | None = None) -> int | None:
    """The position of the loop whose steps share vector lanes (None: the statement runs on one lane).
    Loop vectoriser: the loop the statement steps through (:func:`iterating`), when it holds no loop
    another statement steps through (``nests.outer``: LLVM vectorises innermost loops), its store
    moves by 0 or 1 element per step of it and every load by a constant stride (:func:`_gathers`),
    none under a guard inside it. SLP: the innermost unrolled loop inside that one along which the
    store moves by 1 and every load by 0 or 1."""
    pos = iterating(s, None if nests is None else nests.bodies)
    loops = s.store.loops
    if not s.slp:
        if pos is None or (nests is not None and loops[pos].var in nests.outer):
            return None
        return pos if _gathers(s, loops[pos].var) else None
    for i in range(len(loops) - 1, -1 if pos is None else pos, -1):
        if stride(s.store, loops[i].var) == 1 and _moves_by_one(s, loops[i].var):
            return i
    return None


def _new_page(a: Access, lp: Loop) -> bool:
    """Whether load ``a`` misses the first-level TLB at each step of ``lp``: it moves by a page or more
    per step, over more pages than that TLB holds."""
    step = stride(a, lp.var)
    if step is None or lp.trip <= DTLB_ENTRIES:
        return False
    return abs(step) * ir.dtype_bytes(a.buffer.dtype) >= PAGE_BYTES


def _in_register(a: Access, pos: int | None) -> bool:
    """A register tile's element stays in a register when no loop the code steps through (at or
    outside ``pos``) indexes it."""
    outer = a.loops[: (pos + 1) if pos is not None else 0]
    return a.register and all(lp.var not in a.index_vars for lp in outer)


@lru_cache(maxsize=8192)  # a search lowers the same index expressions in many candidates
def _projections(e: ir.Expr, loop_vars: tuple[ir.Var, ...]) -> frozenset[tuple[int, ...]]:
    """The coefficients of ``loop_vars`` in the affine sums that make up integer expression ``e``:
    its own sum, and those of the operands of its non-affine terms (the numerator of a rolling
    buffer's ``(y + r) % 3``). Two points of the loops that agree on every one give ``e`` one value."""
    form = sum_form(e) if not ir.is_float(e.dtype) else None
    if form is None:
        return _projections_of_operands(e, loop_vars)
    rows = {tuple(form.coeff(v) for v in loop_vars)}
    for term in form.terms:
        if not isinstance(term, ir.Var):
            rows |= _projections_of_operands(term, loop_vars)
    return frozenset(r for r in rows if any(r))


def _projections_of_operands(e: ir.Expr, loop_vars: tuple[ir.Var, ...]) -> frozenset[tuple[int, ...]]:
    return frozenset().union(*(_projections(c, loop_vars) for c in operands(e)))


@lru_cache(maxsize=4096)
def _distinct_points(rows: tuple[tuple[int, ...], ...], trips: tuple[int, ...]) -> int:
    """How many distinct values the linear maps ``rows`` take over the grid of ``trips``."""
    if not rows:
        return 1
    grid = np.indices(trips).reshape(len(trips), -1)
    return len(np.unique(np.array(rows, dtype=np.int64) @ grid, axis=1).T)


def distinct_share(exprs: Iterable[ir.Expr], loops: Sequence[Loop]) -> float:
    """The share of the executions in one unrolled step (every point of ``loops``, the loops inside
    the stepped one but the vector lanes') that meet a value of ``exprs`` no other execution of the
    step met: LLVM's value numbering computes (or loads) the same value once. Points are told apart
    by the affine sums of :func:`_projections`, so the share may be high, never low; 1 for more than
    :data:`MAX_SHARED_POINTS` points."""
    trips = tuple(max(round(lp.trip), 1) for lp in loops)
    points = prod(trips)
    if not loops or points > MAX_SHARED_POINTS:
        return 1.0
    loop_vars = tuple(lp.var for lp in loops)
    rows = frozenset().union(*(_projections(e, loop_vars) for e in exprs))
    return _distinct_points(tuple(sorted(rows)), trips) / points


def _operation_cycles(
    op: Operation, unrolled: Sequence[Loop], lanes: Loop | None, stepped: bool, width: float
) -> float:
    """Cycles of one execution of ``op`` times the vector width: its :func:`distinct_share` of one
    unrolled step; along the vector loop ``lanes``, a :data:`SCALAR_CALLS` call is made per lane. An
    operation whose value does not move along that loop is made once for all its iterations: once
    before it when they are the steps of the loop (``stepped``, the loop vectoriser's), on one lane
    for them when the loop is unrolled (SLP)."""
    share = distinct_share(op.exprs, unrolled) if op.shared else 1.0
    cycles = SCALAR_CALLS[op.call] * width if op.call else ISSUE
    if lanes is not None and op.shared and not any(_projections(e, (lanes.var,)) for e in op.exprs):
        if stepped:
            return 0.0
        cycles = (SCALAR_CALLS[op.call] if op.call else ISSUE) * width / max(lanes.trip, 1.0)
    return share * cycles


def statement_cycles(s: Statement, lanes: int, nests: Nests | None = None) -> tuple[float, bool, bool]:
    """``(cycles on one core per execution, vectorised, latency-bound)``: the larger of the issue
    cost (operations, loads and stores not in registers over the vector lanes, and the loop's
    overhead over the executions in one of its steps) and the chain of updates of one accumulator
    that the stepped loop carries (a store that reads itself at the same place, allocated outside
    that loop, which does not index it). An operation or load counts at its :func:`distinct_share`
    of one unrolled step, a gathered one at a load per lane; a :data:`SCALAR_CALLS` call takes its
    cycles per lane. Larger than both when so: the pages the loads step onto past the first-level
    TLB (:data:`TLB_MISS` each), shared by the executions of one step."""
    st = s.store
    pos, vec = iterating(s, None if nests is None else nests.bodies), vector_loop(s, nests)
    width = 1.0 if vec is None else float(max(1.0, min(lanes, st.loops[vec].trip)))
    per_step = prod(lp.trip for lp in st.loops[pos + 1 :]) if pos is not None else 1.0
    steps = 1.0 if pos is None else (width if vec == pos else 1.0)
    first = 0 if pos is None else pos + 1
    unrolled = [lp for i, lp in enumerate(st.loops[first:], first) if i != vec]
    along = [(a, None if vec is None else stride(a, st.loops[vec].var)) for a in s.loads]
    moving = [(a, step) for a, step in along if vec is None or step]  # the others: once
    memory = sum(
        ISSUE
        * (1.0 if a.buffer.data is st.buffer.data else distinct_share(a.indices, unrolled))
        * (width if gathered(step) else 1.0)
        for a, step in moving
        if not _in_register(a, pos)
    )
    memory += 0.0 if _in_register(st, pos) else STORE_ISSUE
    overhead = 0.0 if pos is None else LOOP_CYCLES / (steps * max(per_step, 1.0))  # None: straight-line code
    lanes_loop = None if vec is None else st.loops[vec]
    arithmetic = sum(_operation_cycles(op, unrolled, lanes_loop, vec == pos, width) for op in s.operations)
    issue = (arithmetic + memory) / width + overhead
    pages = 0.0  # a page per step (each lane's, when the lanes are the steps), shared by its executions
    if pos is not None:
        pages = sum(TLB_MISS for a in s.loads if _new_page(a, st.loops[pos])) / max(per_step, 1.0)
    latency = 0.0
    accumulates = any(a.buffer.data is st.buffer.data and a.indices == st.indices for a in s.loads)
    if pos is not None and accumulates and st.loops[pos].var not in st.index_vars and s.depth <= pos:
        register = _in_register(st, pos)
        chain = FMA_LATENCY if register else FORWARD_LATENCY
        chains = prod(lp.trip for lp in st.loops[pos + 1 :] if lp.var in st.index_vars)
        copies = 1.0  # a reduction in a register, reassociated, is split into interleaved copies
        if register:
            most = REDUCTION_INTERLEAVE if vec == pos else SCALAR_REDUCTION_INTERLEAVE
            copies = max(1.0, min(most, st.loops[pos].trip / steps))
        latency = chain / (max(chains, 1.0) * steps * copies)
    return max(issue, latency, pages), vec is not None, max(latency, pages) > issue


def roofline(
    statements: Sequence[Statement], level_bytes: Sequence[float], lanes: int, cores: int
) -> dict[str, float]:
    """The estimated run time (ns) of a program: per statement its cycles (:func:`statement_cycles`)
    times its executions, or below a parallel loop those of the busiest core; or, when longer, the bytes
    that L2, L3 and memory serve (``level_bytes``) over their bandwidth, on the cores that the
    parallel share of the work uses. Also the share of operations that vectorise and of cycles that
    are latency-bound."""
    compute = ops = vector_ops = latency_bound = parallel_cycles = all_cycles = 0.0
    nests = Nests.of(statements)
    for s in statements:
        cycles, vectorised, bound = statement_cycles(s, lanes, nests)
        total = cycles * s.store.iters
        all_cycles += total
        if s.busiest is not None:
            parallel_cycles += total
        compute += total if s.busiest is None else cycles * s.busiest
        ops += s.ops * s.store.iters
        vector_ops += s.ops * s.store.iters * vectorised
        latency_bound += total * bound
    share = parallel_cycles / all_cycles if all_cycles else 0.0
    memory = sum(b / bw for b, bw in zip(level_bytes, BANDWIDTH_GBS)) / (1.0 + share * (max(cores, 1) - 1))
    compute_ns = compute / CYCLES_PER_NS
    return {
        "log2_estimate_ns": math.log2(1.0 + max(compute_ns, memory)),
        "log2_compute_ns": math.log2(1.0 + compute_ns),
        "log2_memory_ns": math.log2(1.0 + memory),
        "vector_op_frac": vector_ops / ops if ops else 0.0,
        "latency_bound_frac": latency_bound / all_cycles if all_cycles else 0.0,
    }
