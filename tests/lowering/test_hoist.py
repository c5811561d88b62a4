"""hoist_guards: reduction inits leave their reduction loops, invariant predicates leave their loops."""

from __future__ import annotations

from autotune import ir
from autotune.lowering.hoist import hoist_guards


def _func(body: ir.Stmt, *bufs: ir.Buffer) -> ir.Func:
    return ir.Func("f", bufs, body)


def test_init_is_peeled_and_predicate_hoisted():
    a, out = ir.decl_buffer("A", (4, 3)), ir.decl_buffer("O", (4,))
    i, r = ir.Var("i"), ir.Var("r")
    init = ir.IfThenElse(ir.eq(r, 0), ir.BufferStore(out, ir.const(0.0), (i,)))
    update = ir.BufferStore(out, out[i] + a[i, r], (i,))
    body = ir.IfThenElse(ir.LT(i, ir.const(3)), ir.seq(init, update))
    f = _func(ir.For(i, ir.const(0), ir.const(4), "serial", ir.For(r, ir.const(0), ir.const(3), "serial", body)), a, out)
    assert str(hoist_guards(f)).splitlines()[2:] == [
        "    for i in T.serial(4):",
        "        if i < 3:",
        "            O[i] = 0.0",
        "            for r in T.serial(3):",
        "                O[i] = O[i] + A[i, r]",
    ]


def test_guards_that_depend_on_the_loop_stay():
    out = ir.decl_buffer("O", (4,))
    i = ir.Var("i")
    # the init uses the loop variable: not peeled; the guard depends on i: not hoisted
    body = ir.seq(ir.IfThenElse(ir.eq(i, 0), ir.BufferStore(out, ir.const(0.0), (i,))), ir.BufferStore(out, ir.const(1.0), (i,)))
    f = _func(ir.For(i, ir.const(0), ir.const(4), "serial", body), out)
    assert str(hoist_guards(f)) == str(f)


def test_empty_loop_keeps_its_init():
    out = ir.decl_buffer("O", (1,))
    r = ir.Var("r")
    body = ir.seq(ir.IfThenElse(ir.eq(r, 0), ir.BufferStore(out, ir.const(0.0), (0,))), ir.BufferStore(out, ir.const(1.0), (0,)))
    f = _func(ir.For(r, ir.const(0), ir.const(0), "serial", body), out)
    assert str(hoist_guards(f)) == str(f)
