"""Features of a lowered program for the cost model (MetaSchedule's per-store features, small).

:func:`features` walks a lowered :class:`~autotune.ir.Func` once and returns a
dict with the keys of :data:`FEATURE_NAMES`, in that order, every value a
float. Loop trip counts that depend on outer loops (a rolling buffer's first
tile) are averaged over the outer iterations when there are few of them and
taken at the middle of their range otherwise; a guard ``if cond`` scales the
executions below it by an estimate of how often ``cond`` holds (uniform
variables). So the figures are estimates, deterministic and cheap (a walk of
the tree, no compile)::

    lowered = lower(sch.func, pools=pools)
    x = features(lowered.func, lowered.plan, original=workload.func)
    x["halo_max"]        # 1.5: the intermediate is computed 1.5 times over

Bytes per cache level (:func:`~autotune.search.features_estimate.memory_levels`): each loop around
an access reuses the elements that more than one of its iterations touch, at the distance of the
bytes the nest touches in one iteration, and each cache level of ``target`` serves the share of
those reuses that its size holds of that distance; the elements a run touches first come from the
first level that holds the whole buffer (where repeated runs leave it; memory when none does).
Vector lanes used compare a vectorised innermost loop's trip count with the target's lanes for the
stored dtype.

The run time estimated from the store statements, the bytes per level and the target's lanes and
cores (:func:`~autotune.search.features_roofline.roofline`): ``log2_estimate_ns`` and its compute
and memory parts, the share of operations in statements that vectorise and of cycles bound by an
accumulator's chain of updates. ``ops_ratio``: operations against those of the unscheduled
function (``original``; 1 without it): what recomputed halos and padding add.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from math import prod

from .. import ir
from ..analysis import Interval, eval_interval, sum_form
from ..memory import MemoryPlan
from ..memory.lowering import in_registers
from .features_estimate import Access, Chunks, Loop, memory_levels, operands
from .features_estimate import probability as _probability
from .features_estimate import trip as _trip
from .features_roofline import SCALAR_CALLS, Operation, Statement, roofline
from .target import Target

__all__ = ["FEATURE_NAMES", "L1_BYTES", "L2_BYTES", "L3_BYTES", "feature_vector", "features"]

L1_BYTES = 48 << 10
L2_BYTES = 2 << 20

FEATURE_NAMES: tuple[str, ...] = (
    # loops
    "n_loops", "n_serial", "n_parallel", "n_vectorized", "n_unrolled", "max_depth", "n_nests",
    "n_stores", "log2_iterations", "log2_ops",
    # innermost loops (weighted by the executions of the stores they hold)
    "inner_log2_extent", "inner_const_frac", "inner_vectorized_frac", "inner_contig_frac",
    "inner_guards", "guarded_frac", "mod_index_frac",
    # bytes and reuse per buffer class
    "log2_param_bytes", "log2_param_accesses", "param_reuse",
    "log2_inter_bytes", "log2_inter_accesses", "inter_reuse",
    # intermediates and the memory plan
    "n_allocations", "n_banked", "largest_inter_l1", "largest_inter_l2", "largest_fits_l1",
    "largest_fits_l2", "halo_max", "halo_mean", "intensity_param", "intensity_access",
    "log2_workspace_peak", "n_pools_used", "parallel",
    # bytes by the cache level that serves them, vector lanes, parallel and unrolled work, reductions
    "log2_bytes_l1", "log2_bytes_l2", "log2_bytes_l3", "log2_bytes_mem", "log2_reuse_distance",
    "vector_lanes_used", "log2_parallel_extent", "parallel_frac", "log2_unrolled_work",
    "inner_reduction_frac",
    # the roofline estimate (features_roofline.roofline) and the work against the unscheduled function
    "log2_estimate_ns", "log2_compute_ns", "log2_memory_ns", "vector_op_frac", "latency_bound_frac",
    "ops_ratio",
)  # fmt: skip
L3_BYTES = 32 << 20
"""Cache sizes used when the target does not know its own (0 in :class:`~autotune.search.target.Target`)."""
VECTOR_BITS = 256

_OPS = (ir.Add, ir.Sub, ir.Mul, ir.Div, ir.FloorDiv, ir.FloorMod, ir.Min, ir.Max, ir.Select, ir.Call)


@dataclass
class _Walk:
    """Mutable state of one walk; the results are read by :func:`features`."""

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
        names, has_mod = _index_info(node.indices)
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


def _index_info(indices: tuple[ir.Expr, ...]) -> tuple[frozenset[ir.Var], bool]:
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


def _log2(x: float) -> float:
    return math.log2(1.0 + max(x, 0.0))


def _weighted(accesses: Sequence[Access], flag: list[float]) -> float:
    total = sum(a.iters for a in accesses)
    return sum(a.iters * f for a, f in zip(accesses, flag)) / total if total else 0.0


def _contiguous(a: Access) -> float:
    """1.0 when the innermost loop walks the last index with stride 0 or 1."""
    if not a.loops or not a.indices:
        return 1.0
    form = sum_form(a.indices[-1])
    if form is None:
        return 0.0
    inner = a.loops[-1].var
    if any(t is not inner and inner in _index_info((t,))[0] for t in form.terms):
        return 0.0
    return 1.0 if form.coeff(inner) in (0, 1) else 0.0


def _logical_sizes(original: ir.Func | None) -> dict[str, int]:
    """Elements of every intermediate of the unscheduled function, by buffer name."""
    if original is None:
        return {}
    sizes: dict[str, int] = {}
    for block in ir.collect(original.body, ir.Block):
        for buf in block.alloc_buffers:
            sizes[buf.name] = prod(buf.const_shape())
    return sizes


def _halo(walk: _Walk, inter: set[ir.Var], sizes: dict[str, int]) -> list[float]:
    """Per intermediate: elements stored (reduction loops divided out) / elements of the buffer.

    A buffer of the unscheduled function (``sizes``) is compared with its
    logical size; a buffer made by scheduling, with its allocation.
    """
    alloc_elems = {a.data: prod(ir.as_int(e) or 1 for e in a.extents) for a in walk.allocs}
    stored: dict[ir.Var, tuple[str, float]] = {}
    for a in walk.accesses:
        if not a.store or a.buffer.data not in inter:
            continue
        inside = a.loops[walk.alloc_depth.get(a.buffer.data, 0) :]
        reduce = prod(lp.trip for lp in inside if lp.var not in a.index_vars)
        elems = a.iters / reduce if reduce else 0.0
        name, best = stored.get(a.buffer.data, (a.buffer.name, 0.0))
        stored[a.buffer.data] = (name, max(best, elems))
    ratios = []
    for data, (name, elems) in stored.items():
        size = sizes.get(name, alloc_elems.get(data, 0))
        if size:
            ratios.append(elems / size)
    return ratios


def _alloc_bytes(a: ir.Allocate) -> int:
    return prod(ir.as_int(e) or 1 for e in a.extents) * ir.dtype_bytes(a.dtype)


def _work(stores: Sequence[Access], vector_bits: int) -> dict[str, float]:
    """Vector lanes used, parallel extent and share, unrolled work and innermost reductions."""
    inner = [a for a in stores if a.loops]
    vec = [a for a in inner if a.loops[-1].kind == ir.ForKind.VECTORIZED]
    lanes = [max(vector_bits // (8 * ir.dtype_bytes(a.buffer.dtype)), 1) for a in vec]
    parallel = [lp.trip for a in inner for lp in a.loops if lp.kind == ir.ForKind.PARALLEL]
    unrolled = [prod(lp.trip for lp in a.loops if lp.kind == ir.ForKind.UNROLLED) for a in inner]
    return {
        "vector_lanes_used": _weighted(vec, [min(a.loops[-1].trip / n, 1.0) for a, n in zip(vec, lanes)]),
        "log2_parallel_extent": _log2(max(parallel, default=0.0)),
        "parallel_frac": _weighted(
            inner, [float(any(lp.kind == ir.ForKind.PARALLEL for lp in a.loops)) for a in inner]
        ),
        "log2_unrolled_work": _weighted(inner, [_log2(u) for u in unrolled]),
        "inner_reduction_frac": _weighted(inner, [float(a.loops[-1].var not in a.index_vars) for a in inner]),
    }


def features(
    lowered_func: ir.Func, plan: MemoryPlan, original: ir.Func | None = None, target: Target | None = None
) -> dict[str, float]:
    """The features of a lowered function and its memory plan, keyed and ordered by ``FEATURE_NAMES``.

    ``original`` (the unscheduled function) gives the intermediates' logical
    sizes for the halo recompute ratio; without it they are compared with
    their allocations. ``target`` gives the cache sizes and the vector width (without it, or
    where it records 0: :data:`L1_BYTES`, :data:`L2_BYTES`, :data:`L3_BYTES`, :data:`VECTOR_BITS`).
    """
    cores = (target and target.cores) or 1
    walk = _Walk(slp=ir.ann_get(lowered_func.attrs, ir.VECTORIZER_ATTR) == "slp", cores=cores)
    walk.stmt(lowered_func.body, (), 1.0, False)
    params = {p.data for p in lowered_func.params}
    inter = {a.data for a in walk.allocs}
    acc = walk.accesses
    stores = [a for a in acc if a.store]
    p_acc = sum(a.iters for a in acc if a.buffer.data in params)
    i_acc = sum(a.iters for a in acc if a.buffer.data in inter)
    acc_bytes = sum(a.iters * ir.dtype_bytes(a.buffer.dtype) for a in acc)
    p_bytes = sum(p.nbytes for p in lowered_func.params)
    i_bytes = sum(_alloc_bytes(a) for a in walk.allocs)
    largest = max((_alloc_bytes(a) for a in walk.allocs), default=0)
    halo = _halo(walk, inter, _logical_sizes(original))
    inner = [a for a in stores if a.loops]
    k = walk.kinds
    values: dict[str, float] = {
        "n_loops": sum(k.values()),
        "n_serial": k.get(ir.ForKind.SERIAL, 0),
        "n_parallel": k.get(ir.ForKind.PARALLEL, 0),
        "n_vectorized": k.get(ir.ForKind.VECTORIZED, 0),
        "n_unrolled": k.get(ir.ForKind.UNROLLED, 0),
        "max_depth": walk.max_depth,
        "n_nests": walk.nests,
        "n_stores": len(stores),
        "log2_iterations": _log2(sum(a.iters for a in stores)),
        "log2_ops": _log2(walk.ops),
        "inner_log2_extent": _weighted(inner, [_log2(a.loops[-1].trip) for a in inner]),
        "inner_const_frac": _weighted(inner, [float(a.loops[-1].const) for a in inner]),
        "inner_vectorized_frac": _weighted(
            inner, [float(a.loops[-1].kind == ir.ForKind.VECTORIZED) for a in inner]
        ),
        "inner_contig_frac": _weighted(acc, [_contiguous(a) for a in acc]),
        "inner_guards": walk.inner_guards,
        "guarded_frac": _weighted(stores, [float(a.guarded) for a in stores]),
        "mod_index_frac": _weighted(acc, [float(a.has_mod) for a in acc]),
        "log2_param_bytes": _log2(p_bytes),
        "log2_param_accesses": _log2(p_acc),
        "param_reuse": 4.0 * p_acc / p_bytes if p_bytes else 0.0,
        "log2_inter_bytes": _log2(i_bytes),
        "log2_inter_accesses": _log2(i_acc),
        "inter_reuse": 4.0 * i_acc / i_bytes if i_bytes else 0.0,
        "n_allocations": len(walk.allocs),
        "n_banked": sum(len(a.extents) > 1 for a in walk.allocs),
        "largest_inter_l1": largest / L1_BYTES,
        "largest_inter_l2": largest / L2_BYTES,
        "largest_fits_l1": float(largest <= L1_BYTES),
        "largest_fits_l2": float(largest <= L2_BYTES),
        "halo_max": max(halo, default=1.0),
        "halo_mean": sum(halo) / len(halo) if halo else 1.0,
        "intensity_param": walk.ops / p_bytes if p_bytes else 0.0,
        "intensity_access": walk.ops / acc_bytes if acc_bytes else 0.0,
        "log2_workspace_peak": _log2(plan.total_peak),
        "n_pools_used": sum(peak > 0 for peak in plan.pool_peaks.values()),
        "parallel": float(k.get(ir.ForKind.PARALLEL, 0) > 0),
    }
    caches = (
        (target and target.l1d_bytes) or L1_BYTES,
        (target and target.l2_bytes) or L2_BYTES,
        (target and target.l3_bytes) or L3_BYTES,
    )
    levels, values["log2_reuse_distance"] = memory_levels(acc, caches)
    for name, nbytes in zip(("log2_bytes_l1", "log2_bytes_l2", "log2_bytes_l3", "log2_bytes_mem"), levels):
        values[name] = _log2(nbytes)
    bits = (target and target.vector_bits) or VECTOR_BITS
    values.update(_work(stores, bits))
    served = memory_levels(acc, caches, registers=True)[0][1:]
    values.update(roofline(walk.statements, served, max(bits // 32, 1), cores))
    written = _ops(original) if original is not None else 0.0
    values["ops_ratio"] = walk.ops / written if written else 1.0
    return {name: float(values[name]) for name in FEATURE_NAMES}


_WRITTEN_OPS: dict[int, tuple[ir.Func, float]] = {}
""":func:`_ops` by the function's identity (a search asks it of its one workload for every candidate)."""


def _ops(func: ir.Func) -> float:
    """The arithmetic operations of a function as it is written (before any schedule)."""
    known = _WRITTEN_OPS.get(id(func))
    if known is not None and known[0] is func:
        return known[1]
    walk = _Walk()
    walk.stmt(func.body, (), 1.0, False)
    if len(_WRITTEN_OPS) >= 16:  # a process tunes few workloads; keep the cache small all the same
        _WRITTEN_OPS.clear()
    _WRITTEN_OPS[id(func)] = (func, walk.ops)
    return walk.ops


def feature_vector(values: dict[str, float]) -> list[float]:
    """The values of a :func:`features` dict in ``FEATURE_NAMES`` order."""
    return [values[name] for name in FEATURE_NAMES]
