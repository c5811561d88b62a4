"""simplify_func: expressions under loop bounds, dead ifs, loops of extent 1."""

from __future__ import annotations

import re

import pytest

from autotune import ir, workloads
from autotune.lowering import lower
from autotune.lowering.simplify import simplify_func
from autotune.schedule import Schedule


def loop(var: ir.Var, extent: int | ir.Expr, body: ir.Stmt) -> ir.For:
    return ir.For(var, ir.const(0), ir.const(extent), ir.ForKind.SERIAL, body)


def messy() -> ir.Func:
    x, y = ir.decl_buffer("X", (8,)), ir.decl_buffer("Y", (8,))
    i, j, z, w = ir.Var("i"), ir.Var("j"), ir.Var("z"), ir.Var("w")
    body = loop(i, ir.Add(ir.const(2), ir.const(2)), ir.seq(
        loop(z, 1, ir.IfThenElse(ir.TRUE, ir.BufferStore(y, x[i * 2 + z], (i * 2 + z - i + i,)))),
        ir.IfThenElse(ir.LT(i, ir.const(4)), ir.BufferStore(y, x[i], ((i * 4 + 1) // 4,))),
        ir.IfThenElse(ir.GE(i, ir.const(4)), ir.BufferStore(y, ir.const(0.0), (i,)), ir.BufferStore(y, x[i] * 2.0, (i,))),
        ir.IfThenElse(ir.LT(i, ir.const(2)), ir.BufferStore(y, x[i + 4], (i + 4,))),
        ir.IfThenElse(ir.GT(i, ir.const(9)), ir.BufferStore(y, x[i], (i,))),
        loop(w, 0, ir.BufferStore(y, x[w], (w,))),
        loop(j, 2, ir.BufferStore(y, ir.Select(ir.LT(j, ir.const(2)), x[j], x[0]), ((i * 2 + j) % 8,))),
    ))
    return ir.Func("messy", (x, y), body)


def test_simplify_golden(golden):
    out = ir.verify(simplify_func(messy()))
    text = str(out)
    golden("lowering/simplify", text)
    assert "for i in T.serial(4):" in text
    assert "for z in" not in text and "Y[i * 2] = X[i * 2]" in text  # extent 1: z is 0
    assert "if True" not in text and "if i < 4" not in text and "Y[i] = X[i]\n" in text
    assert "i >= 4" not in text and "Y[i] = X[i] * 2.0" in text  # provably false: the else branch stays
    assert "if i < 2:" in text  # undecided: kept
    assert "i > 9" not in text and "for w" not in text
    assert "Y[i * 2 + j] = X[j]" in text  # j < 2 under its loop; i * 2 + j < 8


def test_simplify_is_idempotent():
    once = simplify_func(messy())
    assert str(simplify_func(once)) == str(once)


def test_simplify_keeps_unchanged_functions():
    x = ir.decl_buffer("X", (8,))
    i = ir.Var("i")
    func = ir.Func("f", (x,), loop(i, 8, ir.BufferStore(x, x[i] + 1.0, (i,))))
    assert simplify_func(func).body is func.body


def test_if_with_only_an_else_branch():
    x = ir.decl_buffer("X", (8,))
    i = ir.Var("i")
    dead = ir.IfThenElse(ir.LT(i, ir.const(3)), loop(ir.Var("w"), 0, ir.BufferStore(x, x[i], (i,))), ir.BufferStore(x, x[i] + 1.0, (i,)))
    out = simplify_func(ir.Func("f", (x,), loop(i, 8, dead)))
    assert "if i >= 3:\n            X[i] = X[i] + 1.0" in str(out)


@pytest.mark.slow
def test_unit_loops_in_a_lowered_workload(run_func, golden):
    mm = workloads.get("matmul", m=8, n=8, k=8)
    sch = Schedule(mm.func).split("k", [8, 1], names=["ko", "ki"]).split("i", [1, 8], names=["io", "ii"])
    before = lower(sch.func, until="flatten_buffers").func
    assert "for ki in T.serial(1)" in str(before)
    lowered = run_func(mm, sch.func)
    golden("lowering/simplify_matmul", str(lowered.func))
    assert not re.search(r"\b(ki|io)\b", str(lowered.func))
