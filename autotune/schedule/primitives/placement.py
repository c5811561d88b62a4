"""What decides whether a block may move, and how its predicate moves with it.

compute_at and reverse_compute_at call these before rewriting: a block tied to a loop by a
rolling or double buffer stays where it is, a consumer never goes under a loop where its
producer is still reducing or before a block that writes what it reads, and the block's
predicate is rewritten onto its new loops.
"""

from __future__ import annotations

from typing import Any

from ... import ir
from ...analysis.arith import Analyzer, simplify
from ...errors import ScheduleError
from ..tree import loop_path

ROLLING = ir.ROLLING_ATTR
"""Block annotation of rolling_buffer: (buffer, dimension, loop, window, stride)."""
ROLLING_LOOP = "rolling_buffer_loop"
"""Block annotation of rolling_buffer: the name of the loop the buffer rolls over."""
DOUBLE = "double_buffer"
"""Block annotation of double_buffer: the name of the loop whose next iteration is prefetched."""
_PLACED = ((ROLLING_LOOP, "rolling_buffer"), (DOUBLE, "double_buffer"))


def check_not_tied_to_a_loop(func: ir.Func, block: ir.Block, primitive: str) -> None:
    """Refuse to move ``block`` when it, or the buffer it reads, is rolled or double-buffered over a loop.

    Those buffers hold only the rows or the slot of the current iteration of that loop; moved
    away from it, the block would fill or read them out of step with the loop.
    """
    for key, what in _PLACED:
        tied = ir.ann_get(block.annotations, key)
        if tied is not None:
            raise ScheduleError(
                primitive,
                f"block '{block.name}' keeps a {what.replace('_', ' ')} over loop '{tied}', which depends on where "
                f"it is computed; apply {what} after {primitive}",
            )
    read = {r.buffer for r in block.reads}
    for writer in ir.collect(func.body, ir.Block):
        bufs = [w.buffer.name for w in writer.writes if w.buffer in read]
        for key, what in _PLACED if writer is not block and bufs else ():
            tied = ir.ann_get(writer.annotations, key)
            if tied is not None:
                raise ScheduleError(
                    primitive,
                    f"block '{block.name}' reads '{bufs[0]}', which block '{writer.name}' keeps in a "
                    f"{what.replace('_', ' ')} over loop '{tied}'; moved, it would read it out of step with that loop "
                    f"(apply {what} after {primitive})",
                )


def check_not_into_prefetch(func: ir.Func, block: ir.Block, loop: str, primitive: str) -> None:
    """Refuse to move ``block`` under ``loop`` when a double buffer prefetched over that loop, or a loop
    around it, copies what ``block`` writes: the prefetch of iteration i+1 would read it before it is computed."""
    around = {f.loop_var.name for f in loop_path(func, loop, primitive) if isinstance(f, ir.For)}
    written = {w.buffer for w in block.writes}
    for staged in ir.collect(func.body, ir.Block):
        tied = ir.ann_get(staged.annotations, DOUBLE)
        copied = [r.buffer.name for r in staged.reads if r.buffer in written]
        if tied in around and copied and staged is not block:
            raise ScheduleError(
                primitive,
                f"block '{staged.name}' copies '{copied[0]}' in a double buffer prefetched over loop '{tied}'; under loop "
                f"'{loop}', '{block.name}' would write it after the prefetch of the next iteration has read it",
            )


def check_outside_reduction(func: ir.Func, producer: ir.Block, consumer: str, loop: str) -> None:
    """Refuse ``loop`` when it, or a loop around it, runs a reduction axis of ``producer``.

    Under such a loop the produced values are partial sums: the consumer would read them
    before the reduction ends.
    """
    above = [s for s in loop_path(func, loop, "reverse_compute_at") if isinstance(s, ir.For)]
    for iv, binding in zip(producer.iter_vars, producer.bindings):
        if iv.kind != "reduce":
            continue
        carried = [f.loop_var.name for f in above if f.loop_var in ir.free_vars(binding)]
        if carried:
            raise ScheduleError(
                "reverse_compute_at",
                f"loop '{carried[0]}' runs reduction axis '{iv.var.name}' of block '{producer.name}': "
                f"under loop '{loop}', '{consumer}' would read partial results of '{producer.name}'",
            )


def check_written_before(func: ir.Func, consumer: ir.Block, target: ir.For, loop: str) -> None:
    """Refuse ``loop`` when a buffer ``consumer`` reads is written by a block that runs after the loop.

    Moved under the loop, the consumer would read that buffer before it is written.
    """
    order = list(ir.collect(func.body, ir.Block))
    inside = {id(b) for b in ir.collect(target, ir.Block)}
    last = max(k for k, b in enumerate(order) if id(b) in inside)
    for read in consumer.reads:
        for writer in order[last + 1 :]:
            if writer is not consumer and any(w.buffer is read.buffer for w in writer.writes):
                raise ScheduleError(
                    "reverse_compute_at",
                    f"block '{writer.name}' writes '{read.buffer.name}' after loop '{loop}': under the loop, "
                    f"'{consumer.name}' would read '{read.buffer.name}' before it is written",
                )


def moved_predicate(block: ir.Block, bindings: dict[ir.Var, ir.Expr], scope: set[ir.Var], primitive: str) -> list[ir.Expr]:
    """The conditions of ``block``'s predicate that still matter at its new place, on its new loops.

    Each condition is first written on the block's iter vars (``x_0 * 3 + x_1 < 5`` with
    ``v_x = x_0 * 3 + x_1`` is ``v_x < 5``); one that every value of the iter vars' domains
    satisfies is dropped (the new nest stays in the domains by itself), the others are moved
    onto the new bindings. A condition that still needs a loop that is not around the new
    place is refused.
    """
    if isinstance(block.predicate, ir.IntImm) and block.predicate.value == 1:
        return []
    onto = _OntoIterVars(block)
    domains = Analyzer()
    for iv in block.iter_vars:
        domains.bind(iv.var, iv.dom)
    kept = []
    for cond in _conjuncts(block.predicate):
        on_iter_vars = onto.visit(cond)
        if domains.can_prove(on_iter_vars):
            continue
        moved = simplify(ir.substitute(on_iter_vars, bindings))
        lost = sorted(v.name for v in ir.free_vars(moved) - scope)
        if lost:
            raise ScheduleError(
                primitive, f"the predicate {ir.to_text(cond)} of block '{block.name}' needs loops {lost}, which are not around its new place"
            )
        kept.append(moved)
    return kept


class _OntoIterVars(ir.Transformer):
    """Replace each of a block's binding expressions by its iter var."""

    def __init__(self, block: ir.Block) -> None:
        self.iter_var = {b: iv.var for iv, b in zip(block.iter_vars, block.bindings) if not isinstance(b, ir.IntImm)}

    def visit(self, node: Any) -> Any:
        if isinstance(node, ir.Expr) and node in self.iter_var:
            return self.iter_var[node]
        return super().visit(node)


def _conjuncts(e: ir.Expr) -> list[ir.Expr]:
    return [*_conjuncts(e.a), *_conjuncts(e.b)] if isinstance(e, ir.And) else [e]
