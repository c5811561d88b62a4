"""promote_accumulators: a reduction's output element lives in a 1-element ``local`` buffer.

Golden lowered IR and numbers on two workloads, the pass's place in the pipeline,
and the cases it must leave alone (the IR comes back unchanged).
"""

from __future__ import annotations

import pytest

from autotune import ir, workloads
from autotune.lowering import PASSES, lower
from autotune.lowering.accumulate import promote_accumulators
from autotune.lowering.hoist import hoist_guards
from autotune.memory.lowering import allocations_of, in_registers


@pytest.fixture(scope="module")
def pool():
    return workloads.get("pool_chain", height=8, width=8, channels=4)


@pytest.fixture(scope="module")
def mm():
    return workloads.get("matmul", m=8, n=8, k=8)


def registers(func: ir.Func) -> list[ir.Allocate]:
    return [a for a in ir.collect(func.body, ir.Allocate) if in_registers(a)]


def test_pass_runs_after_hoist_guards_and_before_plan_memory():
    names = [p.name for p in PASSES]
    assert names.index("hoist_guards") + 1 == names.index("promote_accumulators")
    assert names.index("promote_accumulators") + 1 == names.index("plan_memory")


# ---- golden IR ----------------------------------------------------------------
def test_pool_chain_golden(pool, golden):
    lowered = lower(pool.func, verify=True)
    golden("lowering/accumulate_pool_chain", str(lowered.func))
    accs = registers(lowered.func)
    assert [a.data.name for a in accs] == ["pool1_acc_data", "pool2_flat_acc_data"]
    for a in accs:
        assert a.annotations == (("scope", "local"),)  # no pool, no offset
        assert [ir.as_int(e) for e in a.extents] == [1]
    # only the intermediate is planned; the accumulators are not in the plan
    assert [p.name for p in lowered.plan.placements] == ["pool1"]
    assert [a.name for a in allocations_of(lowered.func)] == ["pool1"]


def test_matmul_golden(mm, golden):
    lowered = lower(mm.func, verify=True)
    golden("lowering/accumulate_matmul", str(lowered.func))
    text = str(lowered.func)
    # one load-free store to the output per element, after the reduction loop
    assert "matmul_flat[i * 8 + j] = matmul_flat_acc[0]" in text
    assert "matmul_flat[i * 8 + j] + " not in text
    assert lowered.plan.placements == ()


def test_before_the_pass_the_output_is_the_accumulator(mm):
    before = str(lower(mm.func, until="hoist_guards").func)
    assert "_acc" not in before
    assert "matmul_flat[i * 8 + j] = matmul_flat[i * 8 + j] + A_flat" in before


# ---- numbers --------------------------------------------------------------------
@pytest.mark.slow
def test_pool_chain_numbers(pool, run_func):
    lowered = run_func(pool, pool.func)
    assert len(registers(lowered.func)) == 2


@pytest.mark.slow
def test_matmul_numbers(mm, run_func):
    lowered = run_func(mm, mm.func)
    assert len(registers(lowered.func)) == 1


# ---- where it must not apply ------------------------------------------------------
A = ir.decl_buffer("A", (4, 3))
O = ir.decl_buffer("O", (4,))
I, R = ir.Var("i"), ir.Var("r")


def _reduce(nest_body: ir.Stmt, kind: str = "serial", init_index: ir.Expr = I) -> ir.Func:
    """``for i: O[init_index] = 0; for r in <kind>(3): nest_body``."""
    init = ir.BufferStore(O, ir.const(0.0), (init_index,))
    nest = ir.For(R, ir.const(0), ir.const(3), kind, nest_body)
    return ir.Func("f", (A, O), ir.For(I, ir.const(0), ir.const(4), "serial", ir.seq(init, nest)))


def _sum_row() -> ir.Stmt:
    return ir.BufferStore(O, O[I] + A[I, R], (I,))


def test_plain_reduction_is_promoted():
    out = promote_accumulators(_reduce(_sum_row()))
    assert str(out).splitlines()[2:] == [
        "    for i in T.serial(4):",
        '        O_acc_data = T.allocate([1], "float32", annotations={"scope": "local"})',
        '        O_acc = T.decl_buffer((1,), "float32", scope="local", data=O_acc_data)',
        "        O_acc[0] = 0.0",
        "        for r in T.serial(3):",
        "            O_acc[0] = O_acc[0] + A[i, r]",
        "        O[i] = O_acc[0]",
    ]
    ir.verify(out)


def unchanged(func: ir.Func) -> None:
    __tracebackhide__ = True
    assert str(promote_accumulators(func)) == str(func)


def test_parallel_reduction_loop_is_not_promoted():
    unchanged(_reduce(_sum_row(), kind="parallel"))  # every thread would have its own accumulator


def test_parallel_loop_deeper_in_the_nest_is_not_promoted():
    j = ir.Var("j")
    body = ir.For(j, ir.const(0), ir.const(2), "parallel", ir.BufferStore(O, O[I] + A[I, R] * 2.0, (I,)))
    unchanged(_reduce(body))


def test_accumulator_indexed_by_the_reduction_variable_is_not_promoted():
    # the element changes with r: O[r] is not one value across the loop
    unchanged(_reduce(ir.BufferStore(O, O[R] + A[I, R], (R,))))
    # the init's own index is the nest's variable (the nest rebinds it)
    unchanged(_reduce(ir.BufferStore(O, O[R] + A[I, R], (R,)), init_index=R))


def test_accumulator_read_at_another_element_is_not_promoted():
    unchanged(_reduce(ir.BufferStore(O, O[I] + O[(I + 1) % 4], (I,))))


def test_another_alias_of_the_storage_in_the_nest_is_not_promoted():
    view = O.with_(name="O_view")  # same data, another buffer: a store through it is invisible to the register
    body = ir.seq(_sum_row(), ir.BufferStore(view, view[I] * 2.0, (I,)))
    unchanged(_reduce(body))
    # a load through the alias too
    unchanged(_reduce(ir.BufferStore(O, view[I] + A[I, R], (I,))))


def test_nest_that_only_reads_the_element_is_not_promoted():
    unchanged(_reduce(ir.BufferStore(A, O[I], (I, R))))


def test_register_buffer_is_not_promoted_again():
    once = promote_accumulators(_reduce(_sum_row()))
    assert str(promote_accumulators(once)) == str(once)


def test_init_not_followed_by_a_loop_is_not_promoted():
    func = ir.Func("f", (A, O), ir.seq(ir.BufferStore(O, ir.const(0.0), (0,)), ir.BufferStore(O, O[0] + A[0, 0], (0,))))
    unchanged(func)


# ---- hoist_guards: the register tile's init leaves the reduction loop ----------------------
def _tile(body_of: object, loops: tuple[tuple[ir.Var, int], ...]) -> ir.Func:
    k = ir.Var("k")
    x, a = ir.decl_buffer("X", (2, 2)), ir.decl_buffer("A", (2, 2, 2))
    stmt = body_of(k, x, a)  # type: ignore[operator]
    for var, ext in reversed(loops):
        stmt = ir.For(var, ir.const(0), ir.const(ext), "unroll", stmt)
    return ir.Func("t", (a, x), ir.For(k, ir.const(0), ir.const(2), "serial", stmt))


def test_hoist_peels_a_register_tile_init_out_of_the_reduction_loop():
    i, j = ir.Var("i"), ir.Var("j")

    def body(k, x, a):  # type: ignore[no-untyped-def]
        init = ir.IfThenElse(ir.eq(k, 0), ir.BufferStore(x, ir.const(0.0), (i, j)))
        return ir.seq(init, ir.BufferStore(x, x[i, j] + a[k, i, j], (i, j)))

    out = hoist_guards(_tile(body, ((i, 2), (j, 2))))
    assert str(out).splitlines()[2:] == [
        "    for i in T.unroll(2):",
        "        for j in T.unroll(2):",
        "            X[i, j] = 0.0",
        "    for k in T.serial(2):",
        "        for i in T.unroll(2):",
        "            for j in T.unroll(2):",
        "                X[i, j] = X[i, j] + A[k, i, j]",
    ]


def test_hoist_keeps_the_init_when_a_nest_loop_does_not_index_the_element():
    # for k: for i: for r: (if k == 0: X[i, 0] = 0); X[i, 0] += A[k, i, r]
    # r re-initialises X[i, 0] while k == 0: peeling would keep A[0, i, 0] in the sum
    i, r = ir.Var("i"), ir.Var("r")

    def body(k, x, a):  # type: ignore[no-untyped-def]
        init = ir.IfThenElse(ir.eq(k, 0), ir.BufferStore(x, ir.const(0.0), (i, 0)))
        return ir.seq(init, ir.BufferStore(x, x[i, 0] + a[k, i, r], (i, 0)))

    func = _tile(body, ((i, 2), (r, 2)))
    assert str(hoist_guards(func)) == str(func)


def test_hoist_peels_when_the_other_loop_runs_the_init_once():
    # for n: for k: for r in T.serial(n + 1): for i: (if k == 0 and r == 0: X[i, 0] = 0); X[i, 0] += ...
    # r does not index X but its first iteration alone initialises: the nest may move before k
    # (r's extent is symbolic, so r's own first-iteration peeling does not apply first)
    n, k, r, i = ir.Var("n"), ir.Var("k"), ir.Var("r"), ir.Var("i")
    x, a = ir.decl_buffer("X", (2, 2)), ir.decl_buffer("A", (2, 2, 2))
    init = ir.IfThenElse(ir.And(ir.eq(k, 0), ir.eq(r, 0)), ir.BufferStore(x, ir.const(0.0), (i, 0)))
    body = ir.seq(init, ir.BufferStore(x, x[i, 0] + a[k, i, r], (i, 0)))
    nest = ir.For(r, ir.const(0), n + 1, "serial", ir.For(i, ir.const(0), ir.const(2), "serial", body))
    func = ir.Func("t", (a, x), ir.For(n, ir.const(0), ir.const(2), "serial", ir.For(k, ir.const(0), ir.const(2), "serial", nest)))
    assert str(hoist_guards(func)).splitlines()[2:] == [
        "    for n in T.serial(2):",
        "        for r in T.serial(n + 1):",
        "            for i in T.serial(2):",
        "                if r == 0:",
        "                    X[i, 0] = 0.0",
        "        for k in T.serial(2):",
        "            for r in T.serial(n + 1):",
        "                for i in T.serial(2):",
        "                    X[i, 0] = X[i, 0] + A[k, i, r]",
    ]


def test_hoist_keeps_the_init_when_it_reads_what_the_updates_write():
    # for k: for i: (if k == 0: X[i, 0] = Y[i]); X[i, 0] += A[k, i, 0]; Y[(i + 1) % 2] = X[i, 0]
    # at k == 0 the init of X[1, 0] reads the Y[1] written after X[0, 0]'s update: it cannot move first
    i = ir.Var("i")
    y = ir.decl_buffer("Y", (2,))

    def body(k, x, a):  # type: ignore[no-untyped-def]
        init = ir.IfThenElse(ir.eq(k, 0), ir.BufferStore(x, y[i], (i, 0)))
        update = ir.BufferStore(x, x[i, 0] + a[k, i, 0], (i, 0))
        return ir.seq(init, update, ir.BufferStore(y, x[i, 0], ((i + 1) % 2,)))

    func = _tile(body, ((i, 2),))
    func = ir.Func(func.name, (*func.params, y), func.body)
    assert str(hoist_guards(func)) == str(func)
