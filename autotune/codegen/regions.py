"""Straight-line regions of generated kernels: what the copies of an unrolled nest share.

Inside fully unrolled loops the copies of a statement load the same elements, index relative to
the same base and combine the same partial results again and again. :class:`StraightLine` (a part
of :class:`~autotune.codegen.exprgen.ExprWriter`) turns each such repeated value into one local,
written to ``pending`` before the statement that first uses it; any loop or branch boundary ends
the region.
"""

from __future__ import annotations

from .. import ir
from ..ir import expr as E
from .names import Names
from .trees import Partials

__all__ = ["StraightLine"]


class StraightLine:
    """The sharing state of the current straight-line region (``cse`` None outside one)."""

    names: Names
    registers: dict[ir.Buffer, list[str]]
    written: frozenset[E.Var]
    cse: dict[str, str] | None
    partials: Partials
    pending: list[str]

    def expr(self, e: E.Expr, parent: int = 0) -> str:
        raise NotImplementedError  # the expression writer's

    def _immutable(self, e: E.Expr) -> bool:
        """Whether the text of ``e`` names the same value throughout a straight-line region:
        every load in it reads storage that the region never writes, at indices that read
        nothing that can change; ``A[idx_0]`` with a register ``idx_0`` is another element
        after ``idx_0`` is assigned. (Storage read in a region is live across all of it,
        so the memory plan never places a buffer the region writes on its bytes.)"""
        return all(
            load.buffer.data not in self.written and load.buffer not in self.registers
            for load in ir.collect(e, E.BufferLoad)
        )

    def straight_line(self, on: bool, written: frozenset[E.Var] = frozenset()) -> None:
        """Start (or stop) sharing loads and partial results between statements.

        Inside fully unrolled loops, the copies of a statement load the same
        elements again and again (a register tile's row of ``A``, the columns
        that neighbouring windows share); each distinct load of storage that the
        region does not write (``written``: the data variables it stores to)
        becomes one local, written to :attr:`pending` before its first use, and
        so does each partial result passed to :meth:`share`. Any loop or branch
        boundary ends the region.
        """
        self.cse = {} if on else None
        self.partials = Partials()
        self.written = written if on else frozenset()

    def share(self, e: E.Expr, text: str, prefix: str = "t") -> str:
        """``text`` (the text of ``e``), or in a straight-line region where ``e`` reads only
        storage that the region does not write, a local (``prefix``, ``prefix_1``, ...) holding
        it, shared by every use."""
        if self.cse is None or not self._immutable(e):
            return text
        return self._local(text, prefix)

    def shares(self, e: E.Expr) -> bool:
        """Whether ``e``'s copies in this straight-line region may share loads and partial results."""
        return self.cse is not None and self._immutable(e)

    def reduce(self, op: str, parts: list[str]) -> str:
        """``parts`` (texts of expressions that :meth:`shares`) combined with ``op``, reusing and
        remembering partial results of the region (:class:`~autotune.codegen.trees.Partials`)."""
        return self.partials.reduce(op, parts, self._local)

    def _local(self, text: str, prefix: str = "t") -> str:
        """The local holding ``text`` in this straight-line region (made, and written to :attr:`pending`, once)."""
        assert self.cse is not None
        name = self.cse.get(text)
        if name is None:
            name = self.cse[text] = self.names.fresh(prefix)
            self.pending.append(f"{name} = {text}")
        return name

    def lazy(self, e: E.Expr, parent: int = 0) -> str:
        """``e`` where it may not run (a select's branch, the right side of and/or): no shared loads."""
        saved, self.cse = self.cse, None
        try:
            return self.expr(e, parent)
        finally:
            self.cse = saved

    def take_pending(self) -> list[str]:
        out, self.pending = self.pending, []
        return out

    def _shared_index(self, e: E.Expr) -> str | None:
        """In a straight-line region, ``np.uintp(ix + 5)`` for an index ``base + 5`` whose ``base``
        (two or more operations on values the region does not change) becomes one local ``ix``,
        shared by every copy that indexes relative to it; None for any other index.

        A register tile's copies index the same row or window at constant offsets: a 16 x 32 tile
        repeated ``rc * 96 + o_0 * 32 + k`` in 512 loads. numba's frontend types and lowers every
        operation of every copy, and its compile time, not LLVM's, dominated the tile's build
        (``experiments/compile_time.py``). Whether an index is shared depends on its base alone,
        so every copy of a load has the same text and the region loads it once.
        """
        base, offset = e, 0
        while isinstance(base, (E.Add, E.Sub)) and isinstance(base.b, E.IntImm):
            offset += base.b.value if isinstance(base, E.Add) else -base.b.value
            base = base.a
        if len(ir.collect(base, E.BinaryOp)) < 2 or not self._immutable(base):
            return None
        name = self._local(self.expr(base), "ix")
        if offset == 0:
            return f"np.uintp({name})"
        return f"np.uintp({name} {'+' if offset > 0 else '-'} {abs(offset)})"
