"""Straight-line code for fully unrolled loops: which nests are one accumulation, and its tree.

A nest of unrolled constant loops around ``acc = op(acc, term)`` (max, min or
+) is written as one tree of its terms instead of a chain of dependent steps
(the code generator's ``_Generator._tree`` walks the nest; :func:`balanced`
combines one loop's terms pairwise).
"""

from __future__ import annotations

from math import prod

from .. import ir
from ..ir import expr as E

__all__ = ["TREE_OPS", "TREE_PREC", "UNROLL_LIMIT", "balanced", "combine", "unrolled_reduction"]

UNROLL_LIMIT = 64
"""An ``unroll`` loop with a constant extent up to this becomes straight-line copies."""

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
