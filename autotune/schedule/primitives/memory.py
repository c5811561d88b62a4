"""Memory placement: candidate pools (RFC 0023 ``candidate_memory_pools``) and storage scope."""

from __future__ import annotations

from dataclasses import replace
from math import prod

from ... import ir
from ...analysis.arith import simplify
from ...analysis.region import buffer_users, common_loops, compact_box, region_at_site
from ...errors import ScheduleError
from ..tree import allocating_block, get_block, get_loop, replace_stmt
from .placement import DOUBLE, ROLLING

Result = tuple[ir.Func, tuple[str, ...]]
POOLS_ANNOTATION = "candidate_memory_pools"

REGISTER_LIMIT = 1024
"""The most elements a ``local`` buffer may hold (one scalar each): past the register file, spills cost more than memory."""
UNROLL_LIMIT = ir.UNROLL_LIMIT
"""The longest ``unroll`` loop the code generator writes out as straight-line copies; a longer one stays a loop."""


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
        refuse_view(func, buf, primitive)
        raise ScheduleError(primitive, f"'{buf.name}' is a function parameter; only intermediate allocations can be placed")
    return owner


def refuse_view(func: ir.Func, buf: ir.Buffer, primitive: str) -> None:
    """Refuse ``buf`` if it is a ``DeclBuffer`` view of another buffer's storage: its storage is the other's."""
    group = ir.aliased_buffers(func).get(buf, ())
    if group and group[0] is not buf:
        raise ScheduleError(
            primitive, f"'{buf.name}' is a view (DeclBuffer) of the storage of '{group[0].name}'; {primitive} '{group[0].name}' instead"
        )


def set_pools(func: ir.Func, block: str, buffer: str, pools: tuple[str, ...], per_bank: bool = False) -> Result:
    """Give the allocation of ``buffer`` an ordered list of candidate memory pools.

    Lowering copies it to the ``Allocate`` as ``candidate_memory_pools``; the
    planner puts the buffer in the first candidate where it fits.

    ``per_bank=True`` pins the banks of a buffer with axis separators instead: bank ``k``
    (in the row-major order of the dimensions before the last separator, after compaction and
    double buffering) goes to ``pools[k % len(pools)]`` and nowhere else, as a scratchpad's
    two banks each in its own memory. The annotation then holds one single-pool tuple per entry.
    """
    if not pools or not all(isinstance(p, str) and p for p in pools):
        raise ScheduleError("set_pools", f"pools must be a non-empty list of pool names, got {list(pools)}")
    if len(set(pools)) != len(pools):
        raise ScheduleError("set_pools", f"pools repeated in {list(pools)}")
    if not isinstance(per_bank, bool):
        raise ScheduleError("set_pools", f"argument 'per_bank' must be true or false, got {per_bank!r}")
    buf = find_buffer(func, block, buffer, "set_pools")
    if buf.scope == ir.REGISTER_SCOPE:
        raise ScheduleError("set_pools", f"'{buf.name}' has scope local: it lives in registers, in no pool")
    if per_bank and not buf.axis_separators:
        raise ScheduleError("set_pools", f"'{buf.name}' has no axis separators, so one bank: transform_layout it into banks first")
    owner = _owner(func, buf, "set_pools")
    current = dict(ir.ann_get(owner.annotations, POOLS_ANNOTATION, ()))
    current[buf.name] = tuple((p,) for p in pools) if per_bank else tuple(pools)
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
    if scope == ir.REGISTER_SCOPE:
        problem = register_problem(func, buf) or register_overflow(func, buf)
        if problem is not None:
            raise ScheduleError("set_scope", f"local buffer '{buf.name}' lives in registers, one per element: {problem}")
    return ir.substitute(func, bmap={buf: buf.with_(scope=scope)}), ()


def _accesses(block: ir.Block, buf: ir.Buffer) -> list[tuple[ir.Expr, ...]]:
    nodes = [*ir.collect(block.body, ir.BufferLoad), *ir.collect(block.body, ir.BufferStore)]
    if block.init is not None:
        nodes += [*ir.collect(block.init, ir.BufferLoad), *ir.collect(block.init, ir.BufferStore)]
    return [n.indices for n in nodes if n.buffer is buf]


def register_problem(func: ir.Func, buf: ir.Buffer) -> str | None:
    """Why ``buf`` cannot be a ``local`` buffer (one scalar per element), or None if it can.

    Registers are named, not indexed: after compaction to its site (the innermost loop around
    every block that accesses it, as ``compact_buffers`` places it) each index of ``buf`` must
    be a constant once the unrolled loops are replaced by their values. So every loop whose
    variable is left in an index must be unrolled, a rolling or double buffer (indexed
    modulo its window or slot count by a loop) cannot be local, nor can storage that a
    ``DeclBuffer`` views through another buffer.
    """
    views = [v.name for v in ir.aliased_buffers(func).get(buf, ()) if v is not buf]
    if views:
        return f"its storage is also viewed as '{views[0]}' (DeclBuffer), and registers cannot be viewed"
    users = buffer_users(func.body, buf)
    for b, _ in users:
        for key, what in ((ROLLING, "rolling buffer"), (DOUBLE, "double buffer")):
            info = ir.ann_get(b.annotations, key)
            if info is not None and (key == DOUBLE or info[0] == buf.name) and any(w.buffer is buf for w in b.writes):
                return f"block '{b.name}' makes it a {what}, indexed by a loop"
    if not users:
        return None
    fors = common_loops(users)
    box = compact_box(buf, region_at_site(users, buf, fors[-1] if fors else None))
    offsets = [offset for offset, _ in box]
    for b, path in users:
        loops = {f.loop_var: f for f in path if isinstance(f, ir.For)}
        vmap = {iv.var: binding for iv, binding in zip(b.iter_vars, b.bindings)}
        for indices in _accesses(b, buf):
            for idx, off in zip(indices, offsets):
                e = simplify(ir.Sub(ir.substitute(idx, vmap), off))
                for v in sorted(ir.free_vars(e), key=lambda v: v.name):
                    f = loops.get(v)
                    if f is None or ir.as_int(f.extent) == 1:
                        continue
                    if f.kind != ir.ForKind.UNROLLED:
                        return (
                            f"block '{b.name}' indexes it with {ir.to_text(e)}, which varies with loop "
                            f"'{v.name}' ({f.kind}); unroll the loops over it"
                        )
                    if (ir.as_int(f.extent) or UNROLL_LIMIT + 1) > UNROLL_LIMIT:
                        return (
                            f"block '{b.name}' indexes it with {ir.to_text(e)}, which varies with loop "
                            f"'{v.name}' (unroll, {ir.to_text(f.extent)} iterations: the code generator writes out "
                            f"at most {UNROLL_LIMIT}); split it and unroll the inner loops"
                        )
    return None


def register_overflow(func: ir.Func, buf: ir.Buffer) -> str | None:
    """Why ``buf`` is too large for registers, or None: compacted to its site (the innermost loop
    around every block that accesses it) it must hold at most :data:`REGISTER_LIMIT` elements."""
    users = buffer_users(func.body, buf)
    if not users:
        return None
    fors = common_loops(users)
    site = fors[-1] if fors else None
    extents = [e for _, e in compact_box(buf, region_at_site(users, buf, site))]
    if prod(extents) <= REGISTER_LIMIT:
        return None
    where = f"loop '{site.loop_var.name}'" if site is not None else "the function body"
    return (
        f"at its site ({where}) it holds [{', '.join(map(str, extents))}], {prod(extents)} elements, "
        f"over the limit of {REGISTER_LIMIT}"
    )


def register_overflows(func: ir.Func) -> dict[str, str]:
    """The ``local`` buffers of ``func`` that would live in registers (``register_problem`` finds
    nothing) but hold more than :data:`REGISTER_LIMIT` elements, each with its ``register_overflow``."""
    found: dict[str, str] = {}
    for block in ir.statements(func.body):
        for buf in block.alloc_buffers if isinstance(block, ir.Block) else ():
            if buf.scope == ir.REGISTER_SCOPE and register_problem(func, buf) is None:
                reason = register_overflow(func, buf)
                if reason is not None:
                    found[buf.name] = reason
    return found


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
    problem = _outline_problem(func, node)
    if problem is not None:
        raise ScheduleError("set_vectorizer", f"loop '{loop}' cannot be outlined: {problem}")
    return replace_stmt(func, node, replace(node, annotations=ir.ann_set(node.annotations, ir.VECTORIZER_ATTR, mode))), ()


def _outline_problem(func: ir.Func, loop: ir.For) -> str | None:
    """Why the nest of ``loop`` cannot become a function of its own, or None.

    Its arguments are arrays, tuples of arrays (a banked buffer, the two slots of a double
    buffer) and loop variables (compaction allocates the buffers used only inside it above it),
    so it may not use registers allocated outside it (a local buffer accessed outside too, or the
    accumulator of a reduction whose loop it is).
    """
    inside = ir.collect(loop, ir.Block)
    names = {b.name for b in inside}
    params = set(func.params)
    users: dict[ir.Buffer, list[ir.Block]] = {}
    for b in ir.collect(func.body, ir.Block):
        for r in (*b.reads, *b.writes):
            users.setdefault(r.buffer, []).append(b)
    for buf, blocks in users.items():
        touched = [b for b in blocks if b.name in names]
        if not touched or buf in params:
            continue
        if buf.scope == ir.REGISTER_SCOPE and len(touched) < len(blocks):
            return f"local buffer '{buf.name}' is also used outside it (registers cannot be passed)"
    for b in inside:
        for iv, binding in zip(b.iter_vars, b.bindings):
            if iv.kind == "reduce" and loop.loop_var in ir.free_vars(binding):
                return f"it runs reduction axis '{iv.var.name}' of block '{b.name}', whose accumulator is kept outside it"
    return None
