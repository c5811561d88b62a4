"""Reduction primitives: decompose_reduction.

``decompose_reduction(block, loop)`` moves a reduction's init out of the block
into a block of its own, placed just before ``loop``, under copies of the
loops from ``loop`` down that index the block's output; the update keeps no
init (TVM's ``decompose_reduction``)::

    for x_0:                              for x_0:
      for rh: for rc:                       for x_1_init: for o_init:
        for x_1: for o:                       conv_init: conv[x, o] = 0
          conv: (init: conv[x, o] = 0)  ->  for rh: for rc:
                conv[x, o] += ...             for x_1: for o:
                                                conv: conv[x, o] += ...

Decomposed at the outermost reduction loop of a register tile, the init runs
once per tile, above every reduction loop, and the lowering keeps the tile's
accumulators in registers across the whole reduction.
"""

from __future__ import annotations

from dataclasses import replace

from ... import ir
from ...analysis import to_linear
from ...errors import ScheduleError
from ...ir.names import fresh_name
from ..regions import refresh_regions
from ..tree import all_names, block_path, loops_above, replace_in, replace_stmt
from .placement import check_not_tied_to_a_loop

Result = tuple[ir.Func, tuple[str, ...]]

P = "decompose_reduction"


def _vars_of(exprs: tuple[ir.Expr, ...]) -> set[ir.Var]:
    return set().union(set(), *(ir.free_vars(e) for e in exprs))


def _check(blk: ir.Block, path: list[ir.Stmt], loops: list[ir.For], k: int) -> None:
    """Refuse a decomposition that would change what the block computes."""
    name, loop = blk.name, loops[k].loop_var.name
    reduce_vars = _vars_of(tuple(b for iv, b in zip(blk.iter_vars, blk.bindings) if iv.kind == "reduce"))
    spatial_vars = _vars_of(tuple(b for iv, b in zip(blk.iter_vars, blk.bindings) if iv.kind != "reduce"))
    for f in loops[:k]:
        if f.loop_var in reduce_vars:
            raise ScheduleError(
                P,
                f"loop '{loop}' is below reduction loop '{f.loop_var.name}' of block '{name}': "
                f"the init would run again on every iteration of '{f.loop_var.name}'",
            )
    for f in loops[k:]:
        if f.loop_var in reduce_vars and f.loop_var in spatial_vars:
            raise ScheduleError(
                P, f"loop '{f.loop_var.name}' binds both a spatial and a reduction iter var of block '{name}'"
            )
    if ir.free_vars(blk.predicate) & reduce_vars:
        raise ScheduleError(P, f"the predicate of block '{name}' tests a reduction loop: the init cannot be separated")
    below = {f.loop_var for f in loops[k:]}
    start = next(i for i, s in enumerate(path) if s is loops[k])
    for stmt in path[start + 1 : -1]:
        if isinstance(stmt, ir.Block):
            raise ScheduleError(P, f"block '{name}' is nested in block '{stmt.name}' below loop '{loop}'")
        if isinstance(stmt, ir.IfThenElse) and ir.free_vars(stmt.condition) & below:
            raise ScheduleError(P, f"an `if` between loop '{loop}' and block '{name}' tests the loops below it")
    for f in loops[k:]:
        if f.loop_var in spatial_vars and (ir.free_vars(f.min) | ir.free_vars(f.extent)) & reduce_vars:
            raise ScheduleError(P, f"the bounds of loop '{f.loop_var.name}' depend on a reduction loop of '{name}'")


def _check_once(blk: ir.Block, loops: list[ir.For], k: int) -> None:
    """Refuse when an output element is computed by more than one iteration of the loops from
    ``loops[k]`` down: the one init before them would let the repeated updates accumulate (a block
    computed at a consumer's reduction loop, or in overlapping tiles, recomputes elements)."""
    name, loop = blk.name, loops[k].loop_var.name
    bindings = list(blk.bindings)
    spatial = [b for iv, b in zip(blk.iter_vars, blk.bindings) if iv.kind != "reduce"]
    below = [f for f in loops[k:] if (ir.as_int(f.extent) or 2) > 1]
    for f in below:
        if not any(f.loop_var in ir.free_vars(b) for b in bindings):
            raise ScheduleError(
                P,
                f"block '{name}' is computed again on every iteration of loop '{f.loop_var.name}' below "
                f"'{loop}': one init before '{loop}' would let the repeats accumulate",
            )
    for b in spatial:
        moved = [f for f in below if f.loop_var in ir.free_vars(b)]
        form = to_linear(b)
        if not moved:
            continue
        if form is None or any(sum(f.loop_var in ir.free_vars(o) for o in spatial) > 1 for f in moved):
            raise ScheduleError(P, f"cannot prove that the loops below '{loop}' compute each element of '{name}' once")
        span = 0  # each element once: the steps, smallest first, must clear everything the smaller ones span
        for f in sorted(moved, key=lambda f: abs(form.coeff(f.loop_var))):
            step = abs(form.coeff(f.loop_var))
            if step <= span:
                raise ScheduleError(
                    P,
                    f"consecutive iterations of loop '{f.loop_var.name}' compute overlapping elements of "
                    f"'{name}': one init before '{loop}' would let the repeats accumulate",
                )
            span += step * ((ir.as_int(f.extent) or 0) - 1)


def decompose_reduction(func: ir.Func, block: str, loop: str) -> Result:
    """Give ``block``'s init a block of its own before ``loop`` (see the module docstring).

    ``loop`` must be above the block and above all of its reduction loops; the
    init block runs under copies of the loops from ``loop`` down that bind a
    spatial iter var of the block (named ``<loop>_init``) and is named
    ``<block>_init``. Returns the init block's name.
    """
    path = block_path(func, block, P)
    blk = path[-1]
    assert isinstance(blk, ir.Block)
    if blk.init is None:
        raise ScheduleError(P, f"block '{block}' has no init: it is not a reduction")
    loops = loops_above(path)
    names = [f.loop_var.name for f in loops]
    if loop not in names:
        raise ScheduleError(P, f"loop '{loop}' is not above block '{block}' (loops above it: {', '.join(names)})")
    k = names.index(loop)
    _check(blk, path, loops, k)
    _check_once(blk, loops, k)
    check_not_tied_to_a_loop(func, blk, P)

    taken = all_names(func)
    spatial = [(iv, b) for iv, b in zip(blk.iter_vars, blk.bindings) if iv.kind != "reduce"]
    used = _vars_of(tuple(b for _, b in spatial)) | ir.free_vars(blk.predicate)
    copies = [f for f in loops[k:] if f.loop_var in used]
    vmap: dict[ir.Var, ir.Expr] = {}
    for f in copies:
        vmap[f.loop_var] = ir.Var(fresh_name(taken, f"{f.loop_var.name}_init"), f.loop_var.dtype)
    init_name = fresh_name(taken, f"{block}_init")
    init_block = refresh_regions(
        ir.Block(
            init_name,
            tuple(iv for iv, _ in spatial),
            tuple(ir.substitute(b, vmap) for _, b in spatial),
            blk.init,
            predicate=ir.substitute(blk.predicate, vmap),
        )
    )
    nest: ir.Stmt = init_block
    for f in reversed(copies):
        nest = ir.For(
            vmap[f.loop_var],  # type: ignore[arg-type]
            ir.substitute(f.min, vmap),
            ir.substitute(f.extent, vmap),
            f.kind,
            nest,
            f.annotations,
        )
    target = loops[k]
    update = replace_in(target, blk, replace(blk, init=None))
    return replace_stmt(func, target, ir.seq(nest, update)), (init_name,)
