"""Short loops: fusing a stage's two innermost spatial loops, unrolling its window, unroll-and-jam."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ... import ir
from ...analysis.chain import Cascade
from ...analysis.stage_loops import (
    _block,
    _fusable_pair,
    _jam_plan,
    _reduction_loops,
    _row_loop,
    _shared_rows,
)
from ...errors import ScheduleError
from ...schedule import Schedule
from ..space_family import Domain, choice_domain, divisors
from ..target import Target
from .base import Chain, Nest, Rule, register_tiled
from .location import kept

__all__ = ["Unroll"]


class Unroll(Rule):
    """Per cascade stage (all four conditional on ``regtile_<stage>`` 0 where it has a register tile):

    - ``fuse_<stage>`` false | true: fuse the stage's two innermost spatial loops (columns x
      channels) into one loop; over a row-major buffer it is one long contiguous loop, which LLVM
      vectorises far better than a short channel loop (measured 2x on two 3x3 max pools,
      experiments/knob_variants.py).
    - ``unroll_<stage>`` false | true: unroll the stage's reduction loops (a 3x3 window, a short
      channel sum; only where they total at most codegen.UNROLL_LIMIT iterations); the code
      generator writes the accumulation as a balanced tree (measured 1.6x on two 3x3 max pools,
      experiments/knob_variants.py).
    - ``jam_<stage>`` 1 | 2 | 4: unroll-and-jam that many neighbouring output columns (at most: the
      largest divisor of the column loop) below the channel loop, the window's columns outside its
      rows; the unrolled copies share their loads and each column's partial result (a 3x3 max over
      4 columns: 18 loads and 18 max instead of 36 and 32). Conditional: only with
      ``unroll_<stage>`` and without ``fuse_<stage>``.
    - ``jamrows_<stage>`` 1 | 2 | 4: unroll-and-jam that many neighbouring output rows too (at most:
      the largest divisor of the stage's row loop in a tile, and for a rolling buffer of the rows
      that consecutive tiles share: 2 for a 3x3 window), outside the jammed columns. The copies of a
      row share its window's rows with the next: a 3x3 max takes one max per column after the
      first row (codegen's ``Partials`` reuses the pair of rows that both windows hold). Two 3x3
      max pools on the Zen 3 host: jamrows 2 on both ran 0.774x the tuned time, in one process
      (experiments/knob_variants.py, results/knob_variants_pool_chain.md). Conditional like jam_.
    """

    name = "unroll"
    off = (("fuse_*", False), ("unroll_*", False))

    patterns = ("fuse_*", "unroll_*", "jam_*", "jamrows_*")

    def domains(self, chain: Chain) -> list[Domain]:
        c = chain.cascade
        tileable = dict(c.tileable)
        untiled = {
            s: (*kept(chain, s), *(((f"regtile_{s}", (0,)),) if s in tileable else ()))
            for s in {*c.fusable, *c.unrollable}
        }
        out = [choice_domain(f"fuse_{s}", (False, True), untiled[s], kind="unroll") for s in c.fusable]
        out += [choice_domain(f"unroll_{s}", (False, True), untiled[s], kind="unroll") for s in c.unrollable]
        for knob in ("jam", "jamrows"):
            out += [
                choice_domain(
                    f"{knob}_{s}",
                    (1, 2, 4),
                    ((f"unroll_{s}", (True,)), *(((f"fuse_{s}", (False,)),) if s in c.fusable else ())),
                    kind="unroll",
                )
                for s in c.jammable
            ]
        return out

    def apply(
        self, sch: Schedule, c: Cascade, values: Mapping[str, Any], nest: Nest, target: Target
    ) -> Schedule:
        registers = register_tiled(c, values)  # a register-tiled stage is neither fused nor unrolled
        for stage in c.fusable:
            if (
                stage in registers
                or not values.get(f"fuse_{stage}", False)
                or values.get(f"inline_{stage}", False)
            ):
                continue
            pair = _fusable_pair(sch.func, _block(sch.func, stage), dict(c.row_dims)[stage])
            if pair is None:
                raise ScheduleError("fuse", f"stage '{stage}' has no two adjacent spatial loops left to fuse")
            sch = sch.fuse(*pair)
            if nest.vector_loop in pair:
                nest.vector_loop = sch.last[0]
        for stage in c.unrollable:
            if (
                stage not in registers
                and values.get(f"unroll_{stage}", False)
                and not values.get(f"inline_{stage}")
            ):
                if stage in c.jammable and not values.get(f"fuse_{stage}", False):
                    rows = values.get(f"jamrows_{stage}", 1)
                    sch = jam(sch, stage, dict(c.row_dims)[stage], values.get(f"jam_{stage}", 1), rows)
                for loop in _reduction_loops(sch.func, _block(sch.func, stage)) or ():
                    sch = sch.unroll(loop)
        return sch


def jam(sch: Schedule, stage: str, row_dim: int, columns: int, rows: int = 1) -> Schedule:
    """Unroll-and-jam: ``columns`` neighbouring output columns and ``rows`` neighbouring output rows of
    ``stage`` (at most; the largest divisors of the column loop's and the row loop's extents not above
    them, and for a rolling buffer of the rows that consecutive tiles share too) as unrolled copies
    below the channel loop, rows outside columns, with the window's columns outside its rows, so that
    the copies share loads and partial results (codegen's ``Partials``)."""
    block = _block(sch.func, stage)
    plan = _jam_plan(sch.func, block, row_dim)
    if plan is None:
        raise ScheduleError("jam", f"stage '{stage}' has no column loop that its window slides along")
    extent = ir.as_int(sch.get_loop(plan.column).extent) or 1
    factor = max(d for d in divisors(extent) if d <= columns)
    row_loop = _row_loop(sch.func, block, row_dim) if rows > 1 else None
    if row_loop is not None and any(b.name != stage for b in ir.collect(row_loop.body, ir.Block)):
        row_loop = None  # the tile loop itself (one row per tile): other stages share it
    row_factor = 1
    if row_loop is not None:
        shared = _shared_rows(block)
        row_factor = max(
            d
            for d in divisors(ir.as_int(row_loop.extent) or 1)
            if d <= rows and (shared is None or shared % d == 0)
        )
    if factor == 1 and row_factor == 1:
        return sch
    inner: list[str] = []
    if row_factor > 1:
        assert row_loop is not None
        sch = sch.split(row_loop.loop_var.name, [None, row_factor])
        inner.append(sch.last[1])
    column = plan.column
    if factor > 1:
        sch = sch.split(plan.column, [None, factor])
        column = sch.last[0]
        inner.append(sch.last[1])
    sch = sch.reorder(column, *plan.below, *inner, *plan.sliding, *plan.others)
    for loop in inner:
        sch = sch.unroll(loop)
    return sch
