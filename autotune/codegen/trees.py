"""Straight-line code for fully unrolled loops: which nests are one accumulation, and its tree.

A nest of unrolled constant loops around ``acc = op(acc, term)`` (max, min or
+) is written as one tree of its terms instead of a chain of dependent steps
(the code generator's ``_Generator._tree`` walks the nest; :func:`balanced`
combines one loop's terms pairwise). In a straight-line region the trees of
neighbouring copies share their partial results (:class:`Partials`).
"""

from __future__ import annotations

from collections.abc import Callable
from math import prod

from .. import ir
from ..ir import expr as E
from ..schedule.primitives.memory import UNROLL_LIMIT

__all__ = ["TREE_OPS", "TREE_PREC", "UNROLL_LIMIT", "Partials", "balanced", "combine", "unrolled_reduction"]


TREE_OPS: dict[type, str] = {E.Max: "max", E.Min: "min", E.Add: "+"}
TREE_PREC = {"max": 0, "min": 0, "+": 6}
"""Operand precedence inside the tree: ``+`` operands bind tighter than ``+`` (see exprgen's _PREC)."""


def unrolled_reduction(s: ir.For) -> tuple[list[ir.For], ir.BufferStore, str, E.Expr] | None:
    """``(loops, store, op, term)`` when ``s`` heads a nest of unrolled constant loops, at most
    :data:`UNROLL_LIMIT` iterations in all, around one ``acc = op(acc, term)`` store: ``op``
    is max, min or +, ``acc`` is one element whatever the loops' values, and ``term`` does not
    read ``acc``'s buffer. Anything else is None (the loops unroll statement by statement)."""
    loops: list[ir.For] = []
    body: ir.Stmt = s
    while isinstance(body, ir.For) and body.kind == ir.ForKind.UNROLLED:
        if E.as_int(body.min) is None or E.as_int(body.extent) is None:
            return None
        loops.append(body)
        body = body.body
    if not isinstance(body, ir.BufferStore) or prod(E.as_int(f.extent) or 0 for f in loops) > UNROLL_LIMIT:
        return None
    op = TREE_OPS.get(type(body.value))
    if op is None:
        return None
    value = body.value
    assert isinstance(value, E.BinaryOp)
    acc = E.BufferLoad(body.buffer, body.indices)
    term = value.b if value.a == acc else value.a if value.b == acc else None
    loop_vars = {f.loop_var for f in loops}
    if (
        term is None
        or any(load.buffer.data is body.buffer.data for load in ir.collect(term, E.BufferLoad))
        or any(loop_vars & ir.free_vars(i) for i in body.indices)
    ):
        return None
    return loops, body, op, term


def balanced(op: str, terms: list[str]) -> str:
    """The terms combined pairwise, level by level: ``op(op(t0, t1), op(t2, t3))``."""
    while len(terms) > 1:
        paired = [combine(op, a, b) for a, b in zip(terms[0::2], terms[1::2])]
        terms = paired + terms[len(paired) * 2 :]
    return terms[0]


def combine(op: str, a: str, b: str) -> str:
    return f"({a} + {b})" if op == "+" else f"{op}({a}, {b})"


class Partials:
    """The partial results of one straight-line region, by operator and the set of parts they combine.

    The unrolled copies of a window reduction (an unroll-and-jam over output rows and
    columns) combine overlapping sets of the same parts: the 3x3 max at row ``i`` takes
    input rows ``i..i+2`` of a column, the one at ``i + 1`` rows ``i+1..i+3``. A balanced
    tree per copy shares nothing but equal subtrees; :meth:`reduce` first reuses the
    largest partial already computed whose parts the new reduction contains, then pairs
    the remaining parts from the end (the parts the next copy along a sliding window
    shares), and remembers every partial it makes. Neighbouring 3-windows then cost one
    operation each after the first (``max(m12, r3)`` after ``max(r0, m12)``), where
    separate trees cost two.

    Reusing a partial reorders the operation, so only associative and commutative
    operators are combined here (max and min exactly; ``+`` under ``reassoc``), and only
    parts whose texts name the same value throughout the region (the caller's check).
    """

    def __init__(self) -> None:
        self.made: dict[tuple[str, frozenset[str]], str] = {}

    def reduce(self, op: str, parts: list[str], local: Callable[[str], str]) -> str:
        """``parts`` combined with ``op``, as the name of a local (``local(text)`` makes one)
        or, for a single part, the part itself. Repeated parts are combined as a balanced
        tree (a set cannot say how often a sum takes a term)."""
        if len(parts) == 1:
            return parts[0]
        if len(set(parts)) != len(parts):
            return balanced(op, parts)
        whole = (op, frozenset(parts))
        if whole in self.made:
            return self.made[whole]
        rest, pieces = list(parts), []
        while len(rest) > 1:
            have = set(rest)
            reuse = max(
                ((name, key[1]) for key, name in self.made.items() if key[0] == op and key[1] <= have),
                key=lambda found: len(found[1]),
                default=None,
            )
            if reuse is None:
                break
            pieces.append(reuse)
            rest = [p for p in rest if p not in reuse[1]]
        while len(rest) > 1:
            a, b = rest[-2], rest[-1]
            rest = rest[:-2]
            pieces.insert(0, self._make(op, (a, frozenset((a,))), (b, frozenset((b,))), local))
        level = [(p, frozenset((p,))) for p in rest] + pieces
        while len(level) > 1:
            paired = [self._make(op, x, y, local) for x, y in zip(level[0::2], level[1::2])]
            level = paired + level[len(paired) * 2 :]
        return level[0][0]

    def _make(
        self,
        op: str,
        x: tuple[str, frozenset[str]],
        y: tuple[str, frozenset[str]],
        local: Callable[[str], str],
    ) -> tuple[str, frozenset[str]]:
        covered = x[1] | y[1]
        name = self.made.get((op, covered))
        if name is None:
            name = self.made[(op, covered)] = local(combine(op, x[0], y[0]))
        return name, covered
