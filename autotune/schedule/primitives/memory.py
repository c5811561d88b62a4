"""Memory placement: candidate pools (RFC 0023 ``candidate_memory_pools``) and storage scope."""

from __future__ import annotations

from dataclasses import replace

from ... import ir
from ...errors import ScheduleError
from ..tree import allocating_block, get_block, get_loop, replace_stmt

Result = tuple[ir.Func, tuple[str, ...]]
POOLS_ANNOTATION = "candidate_memory_pools"


def find_buffer(func: ir.Func, block: str, name: str, primitive: str) -> ir.Buffer:
    """The buffer called ``name`` that ``block`` reads, writes or allocates."""
    b = get_block(func, block, primitive)
    for region in (*b.reads, *b.writes):
        if region.buffer.name == name:
            return region.buffer
    for buf in b.alloc_buffers:
        if buf.name == name:
            return buf
    raise ScheduleError(primitive, f"block '{block}' does not access a buffer named '{name}'")


def _owner(func: ir.Func, buf: ir.Buffer, primitive: str) -> ir.Block:
    owner = allocating_block(func, buf)
    if owner is None:
        raise ScheduleError(primitive, f"'{buf.name}' is a function parameter; only intermediate allocations can be placed")
    return owner


def set_pools(func: ir.Func, block: str, buffer: str, pools: tuple[str, ...]) -> Result:
    """Give the allocation of ``buffer`` an ordered list of candidate memory pools.

    Lowering copies it to the ``Allocate`` as ``candidate_memory_pools``; the
    planner puts the buffer in the first candidate where it fits.
    """
    if not pools or not all(isinstance(p, str) and p for p in pools):
        raise ScheduleError("set_pools", f"pools must be a non-empty list of pool names, got {list(pools)}")
    if len(set(pools)) != len(pools):
        raise ScheduleError("set_pools", f"pools repeated in {list(pools)}")
    buf = find_buffer(func, block, buffer, "set_pools")
    if buf.scope == ir.REGISTER_SCOPE:
        raise ScheduleError("set_pools", f"'{buf.name}' has scope local: it lives in registers, in no pool")
    owner = _owner(func, buf, "set_pools")
    current = dict(ir.ann_get(owner.annotations, POOLS_ANNOTATION, ()))
    current[buf.name] = tuple(pools)
    ann = ir.ann_set(owner.annotations, POOLS_ANNOTATION, tuple(sorted(current.items())))
    return replace_stmt(func, owner, replace(owner, annotations=ann)), ()


def set_scope(func: ir.Func, block: str, buffer: str, scope: str) -> Result:
    """Set the storage scope of an intermediate buffer (e.g. ``local``, ``global``)."""
    if not scope or not isinstance(scope, str):
        raise ScheduleError("set_scope", f"scope must be a non-empty string, got {scope!r}")
    buf = find_buffer(func, block, buffer, "set_scope")
    owner = _owner(func, buf, "set_scope")
    if scope == ir.REGISTER_SCOPE and buf.name in dict(ir.ann_get(owner.annotations, POOLS_ANNOTATION, ())):
        raise ScheduleError("set_scope", f"'{buf.name}' has candidate pools (set_pools); a local buffer lives in registers")
    return ir.substitute(func, bmap={buf: buf.with_(scope=scope)}), ()


VECTORIZERS = ("loop", "slp")


def set_vectorizer(func: ir.Func, mode: str, loop: str | None = None) -> Result:
    """Choose how LLVM vectorises the kernel, or one loop nest of it: ``loop`` (numba's default) or ``slp``.

    ``loop`` vectorises innermost loops and leaves straight-line code scalar
    (numba turns LLVM's SLP vectoriser off). ``slp`` turns the loop vectoriser off
    and SLP on: a register tile (a ``local`` buffer over unrolled loops) becomes
    vector FMAs on its rows instead of a reduction vectorised along ``k``.

    Without ``loop`` the choice holds for the whole kernel: a function attribute
    that the code generator writes into the kernel's source and
    :func:`autotune.codegen.build` applies while compiling. With ``loop`` it is an
    annotation of that loop: the code generator outlines the nest into a function
    of its own, compiled with its own vectoriser, which the kernel calls. numba
    chooses the vectoriser per compiled function, and a stage chain may need both
    (a depthwise window vectorised along its channel loop, the 1x1 convolutions
    around it as SLP register tiles). An outlined nest runs on the calling thread,
    so it may not hold a parallel loop.
    """
    if mode not in VECTORIZERS:
        raise ScheduleError("set_vectorizer", f"mode must be one of {', '.join(VECTORIZERS)}, got {mode!r}")
    if loop is None:
        return replace(func, attrs=ir.ann_set(func.attrs, ir.VECTORIZER_ATTR, mode)), ()
    node = get_loop(func, loop, "set_vectorizer")
    inner = [f.loop_var.name for f in ir.collect(node, ir.For) if f.kind == ir.ForKind.PARALLEL]
    if inner:
        raise ScheduleError("set_vectorizer", f"loop '{loop}' holds the parallel loop '{inner[0]}'; an outlined nest runs on one thread")
    return replace_stmt(func, node, replace(node, annotations=ir.ann_set(node.annotations, ir.VECTORIZER_ATTR, mode))), ()
