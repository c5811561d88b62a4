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
from math import prod

from .. import ir
from ..analysis import sum_form
from ..memory import MemoryPlan
from .features_estimate import Access, memory_levels
from .features_roofline import roofline
from .features_walk import Walk, index_info
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
    if any(t is not inner and inner in index_info((t,))[0] for t in form.terms):
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


def _halo(walk: Walk, inter: set[ir.Var], sizes: dict[str, int]) -> list[float]:
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
    walk = Walk(slp=ir.ann_get(lowered_func.attrs, ir.VECTORIZER_ATTR) == "slp", cores=cores)
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
    walk = Walk()
    walk.stmt(func.body, (), 1.0, False)
    if len(_WRITTEN_OPS) >= 16:  # a process tunes few workloads; keep the cache small all the same
        _WRITTEN_OPS.clear()
    _WRITTEN_OPS[id(func)] = (func, walk.ops)
    return walk.ops


def feature_vector(values: dict[str, float]) -> list[float]:
    """The values of a :func:`features` dict in ``FEATURE_NAMES`` order."""
    return [values[name] for name in FEATURE_NAMES]
