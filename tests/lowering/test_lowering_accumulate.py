"""promote_accumulators: a reduction's output element lives in a 1-element ``local`` buffer.

Golden lowered IR and numbers on two workloads, the pass's place in the pipeline,
and the cases it must leave alone (the IR comes back unchanged).
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from autotune import ir, workloads
from autotune.codegen import UNROLL_LIMIT, build, generate_source
from autotune.codegen.declare import REGISTER_LIMIT
from autotune.lowering import PASSES, accumulate, lower
from autotune.lowering.accumulate import promote_accumulators
from autotune.lowering.hoist import hoist_guards
from autotune.memory.lowering import allocations_of, in_registers
from autotune.schedule import Schedule


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
    assert names.index("promote_accumulators") < names.index("plan_memory")
    assert names.index("promote_accumulators") + 1 == names.index("clamp_at_producer")  # it needs promoted stores


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


# ---- register tiles: a nest of unrolled inits before the reduction ---------------------------
@pytest.fixture(scope="module")
def mm_small():
    return workloads.get("matmul", m=4, n=4, k=8)


def tiled(func: ir.Func) -> ir.Func:
    """Rows in pairs, k above the 2x4 tile of (ii, j), both unrolled."""
    sch = Schedule(func).split("i", [None, 2], names=["io", "ii"]).reorder("io", "k", "ii", "j")
    return sch.unroll("ii").unroll("j").func


def test_tile_limits_are_codegen_limits():
    assert accumulate.UNROLL_LIMIT == UNROLL_LIMIT  # a longer loop is not unrolled: non-constant indices
    assert accumulate.TILE_LIMIT == REGISTER_LIMIT


def test_register_tile_golden(mm_small, golden):
    lowered = lower(tiled(mm_small.func), verify=True)
    golden("lowering/accumulate_tile", str(lowered.func))
    [acc] = registers(lowered.func)
    assert acc.data.name == "matmul_flat_acc_data" and acc.annotations == (("scope", "local"),)
    assert [ir.as_int(e) for e in acc.extents] == [8]
    text = str(lowered.func)
    assert "matmul_flat[io * 8 + ii * 4 + j] = matmul_flat_acc[ii * 4 + j]" in text
    assert "matmul_flat[io * 8 + ii * 4 + j] + " not in text
    assert lowered.plan.placements == ()


def test_register_tile_is_scalar_accumulators(mm_small):
    text = generate_source(lower(tiled(mm_small.func)).func).text
    lines = text.splitlines()
    assert sorted(set(re.findall(r"\bmatmul_flat_acc_\d+\b", text))) == sorted(f"matmul_flat_acc_{k}" for k in range(8))
    assert "matmul_flat_acc[" not in text and "matmul_flat_acc_data" not in text
    # the last accumulator: zeroed with the others, initialised, updated in the k loop, stored once after it
    init, update, store = (
        "        matmul_flat_acc_7 = _c0",
        "            matmul_flat_acc_7 = matmul_flat_acc_7 + ld_5 * ld_4",
        "        matmul_flat[np.uintp(io * 8 + 7)] = matmul_flat_acc_7",
    )
    assert [line for line in lines if "matmul_flat_acc_7" in line][1:] == [init, update, store]
    assert lines.index(init) < lines.index("        for k in range(8):") < lines.index(update) < lines.index(store)


@pytest.mark.slow
def test_register_tile_numbers(mm_small, run_func):
    lowered = run_func(mm_small, tiled(mm_small.func))
    assert len(registers(lowered.func)) == 1


# a hand-built tile: for ti, tj: T8[ti * 4 + tj] = 0; for r: for ui, uj: T8[ui * 4 + uj] += A8[r, ui * 4 + uj]
A8, T8 = ir.decl_buffer("A8", (3, 8)), ir.decl_buffer("T8", (8,))
TI, TJ, UI, UJ = ir.Var("ti"), ir.Var("tj"), ir.Var("ui"), ir.Var("uj")


def _unrolled(loops: tuple[tuple[ir.Var, int], ...], body: ir.Stmt, kind: str = "unroll") -> ir.Stmt:
    for var, ext in reversed(loops):
        body = ir.For(var, ir.const(0), ir.const(ext), kind, body)
    return body


def _tile_reduce(update: ir.Stmt, init_index: ir.Expr = TI * 4 + TJ, kind: str = "serial") -> ir.Func:
    """``for ti, tj (unrolled): T8[init_index] = 0; for r in <kind>(3): update``."""
    init = _unrolled(((TI, 2), (TJ, 4)), ir.BufferStore(T8, ir.const(0.0), (init_index,)))
    return ir.Func("f", (A8, T8), ir.seq(init, ir.For(R, ir.const(0), ir.const(3), kind, update)))


def _tile_sum(index: ir.Expr = UI * 4 + UJ, guard: ir.Expr | None = None) -> ir.Stmt:
    """``for ui, uj (unrolled): [if guard:] T8[index] = T8[index] + A8[r, ui * 4 + uj]``."""
    store: ir.Stmt = ir.BufferStore(T8, T8[index] + A8[R, UI * 4 + UJ], (index,))
    return _unrolled(((UI, 2), (UJ, 4)), store if guard is None else ir.IfThenElse(guard, store))


def test_hand_built_tile_is_promoted_positionally():
    out = promote_accumulators(_tile_reduce(_tile_sum()))
    assert str(out).splitlines()[2:] == [
        '    T8_acc_data = T.allocate([8], "float32", annotations={"scope": "local"})',
        '    T8_acc = T.decl_buffer((8,), "float32", scope="local", data=T8_acc_data)',
        "    for ti in T.unroll(2):",
        "        for tj in T.unroll(4):",
        "            T8_acc[ti * 4 + tj] = 0.0",
        "    for r in T.serial(3):",
        "        for ui in T.unroll(2):",
        "            for uj in T.unroll(4):",
        "                T8_acc[ui * 4 + uj] = T8_acc[ui * 4 + uj] + A8[r, ui * 4 + uj]",
        "    for ti in T.unroll(2):",
        "        for tj in T.unroll(4):",
        "            T8[ti * 4 + tj] = T8_acc[ti * 4 + tj]",
    ]
    ir.verify(out)


def test_tile_guarded_by_its_own_variables_stores_every_element():
    # the init stored every element: one the guard skips keeps its 0 (the copy-out has no guard)
    out = promote_accumulators(_tile_reduce(_tile_sum(guard=UI * 4 + UJ < 6)))
    assert str(out).splitlines()[8:] == [
        "        for ui in T.unroll(2):",
        "            for uj in T.unroll(4):",
        "                if ui * 4 + uj < 6:",
        "                    T8_acc[ui * 4 + uj] = T8_acc[ui * 4 + uj] + A8[r, ui * 4 + uj]",
        "    for ti in T.unroll(2):",
        "        for tj in T.unroll(4):",
        "            T8[ti * 4 + tj] = T8_acc[ti * 4 + tj]",
    ]


@pytest.mark.slow
def test_tile_guarded_by_its_own_variables_numbers():
    out = promote_accumulators(_tile_reduce(_tile_sum(guard=UI * 4 + UJ < 6)))
    assert registers(out)
    a = np.arange(24, dtype=np.float32).reshape(3, 8)
    t = np.full(8, np.nan, dtype=np.float32)
    build(out)(a, t)
    np.testing.assert_array_equal(t, np.where(np.arange(8) < 6, a.sum(axis=0), 0))


def test_tile_guarded_by_the_reduction_variable_is_not_promoted():
    unchanged(_tile_reduce(_tile_sum(guard=R < 2)))
    unchanged(_tile_reduce(_tile_sum(guard=ir.And(UI < 1, R < 2))))


def test_tile_access_at_another_element_is_not_promoted():
    unchanged(_tile_reduce(_tile_sum(index=UI * 4 + (UJ + 1) % 4)))
    other = ir.BufferStore(T8, T8[UI * 4 + UJ] + T8[(UI * 4 + UJ + 1) % 8], (UI * 4 + UJ,))
    unchanged(_tile_reduce(_unrolled(((UI, 2), (UJ, 4)), other)))


def test_tile_access_outside_the_unrolled_loops_is_not_promoted():
    unchanged(_tile_reduce(ir.seq(_tile_sum(), ir.BufferStore(T8, T8[0] * 2.0, (0,)))))
    # the element's loops are serial, or unrolled in another order
    serial = ir.BufferStore(T8, T8[UI * 4 + UJ] + A8[R, UI * 4 + UJ], (UI * 4 + UJ,))
    unchanged(_tile_reduce(_unrolled(((UI, 2), (UJ, 4)), serial, kind="serial")))
    swapped = ir.BufferStore(T8, T8[UJ * 4 + UI] + A8[R, UJ * 4 + UI], (UJ * 4 + UI,))
    unchanged(_tile_reduce(_unrolled(((UJ, 4), (UI, 2)), swapped)))


def test_tile_whose_iterations_share_an_element_is_not_promoted():
    # every ti stores T8[tj]: the sum over ui would be split over two registers
    same = ir.BufferStore(T8, T8[UJ] + A8[R, UI * 4 + UJ], (UJ,))
    unchanged(_tile_reduce(_unrolled(((UI, 2), (UJ, 4)), same), init_index=TJ))


def test_tile_under_a_parallel_reduction_loop_is_not_promoted():
    unchanged(_tile_reduce(_tile_sum(), kind="parallel"))


def test_tile_loop_longer_than_codegen_unrolls_is_not_promoted():
    n = UNROLL_LIMIT + 1
    a, t = ir.decl_buffer("A", (3, n)), ir.decl_buffer("T", (n,))
    init = _unrolled(((TJ, n),), ir.BufferStore(t, ir.const(0.0), (TJ,)))
    update = _unrolled(((UJ, n),), ir.BufferStore(t, t[UJ] + a[R, UJ], (UJ,)))
    unchanged(ir.Func("f", (a, t), ir.seq(init, ir.For(R, ir.const(0), ir.const(3), "serial", update))))


def test_tile_whose_init_runs_on_the_first_iteration_of_a_loop_around_is_not_promoted():
    """``for q: (for ti, tj: if q == 0: T8[...] = 0); for r: update``: the elements accumulate over
    q too. Accumulators started on every run of ``r`` would drop the earlier q's sums."""
    Q = ir.Var("q")
    init = _unrolled(((TI, 2), (TJ, 4)), ir.IfThenElse(ir.EQ(Q, ir.const(0)), ir.BufferStore(T8, ir.const(0.0), (TI * 4 + TJ,))))
    body = ir.seq(init, ir.For(R, ir.const(0), ir.const(3), "serial", _tile_sum()))
    func = ir.Func("f", (A8, T8), ir.For(Q, ir.const(0), ir.const(2), "serial", body))
    unchanged(func)


def test_hoist_peels_a_tile_init_through_a_guard_of_its_columns():
    """``for q: (for ti: if ti < 1: for tj: if q == 0: init); update``: the column guard does not test
    q, so the inits leave q with it, and the tile is then promoted over q and r."""
    Q = ir.Var("q")
    first = ir.IfThenElse(ir.EQ(Q, ir.const(0)), ir.BufferStore(T8, ir.const(0.0), (TI * 4 + TJ,)))
    init = ir.For(TI, ir.const(0), ir.const(2), "unroll", ir.IfThenElse(TI < 1, ir.For(TJ, ir.const(0), ir.const(4), "unroll", first)))
    body = ir.seq(init, ir.For(R, ir.const(0), ir.const(3), "serial", _tile_sum(guard=UI < 1)))
    hoisted = hoist_guards(ir.Func("f", (A8, T8), ir.For(Q, ir.const(0), ir.const(2), "serial", body)))
    assert str(hoisted).splitlines()[2:6] == [
        "    for ti in T.unroll(2):",
        "        if ti < 1:",
        "            for tj in T.unroll(4):",
        "                T8[ti * 4 + tj] = 0.0",
    ]
    assert registers(promote_accumulators(hoisted))
