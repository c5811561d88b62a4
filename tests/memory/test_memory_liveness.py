"""Allocation lifetimes (autotune.analysis.liveness) on hand-built lowered IR.

Each test writes the positions the walk gives its statements next to them.
"""

from __future__ import annotations

from autotune import ir
from autotune.analysis.liveness import allocate_nodes, allocation_lifetimes

X = ir.decl_buffer("X", [16])
Y = ir.decl_buffer("Y", [16])


def alloc(buf: ir.Buffer, body: ir.Stmt) -> ir.Allocate:
    """``Allocate`` of ``buf``'s storage with ``buf`` declared around ``body``."""
    return ir.Allocate(buf.data, buf.dtype, tuple(buf.shape), ir.DeclBuffer(buf, body))


def store(buf: ir.Buffer, value: ir.ExprLike, indices: tuple[ir.ExprLike, ...]) -> ir.BufferStore:
    return ir.BufferStore(buf, ir.const(value), tuple(ir.const(i) for i in indices))


def loop(var: ir.Var, extent: int, *body: ir.Stmt) -> ir.For:
    return ir.For(var, ir.const(0), ir.const(extent), ir.ForKind.SERIAL, ir.seq(*body))


def func(body: ir.Stmt) -> ir.Func:
    return ir.Func("f", (X, Y), body)


def lifetimes_by_name(f: ir.Func) -> dict[str, tuple[int, int]]:
    return {var.name: span for var, span in allocation_lifetimes(f).items()}


def test_sequential_allocations_live_from_first_to_last_access() -> None:
    a, b, c = (ir.decl_buffer(n, [16]) for n in "ABC")
    i0, i1, i2, i3 = (ir.Var(f"i{k}") for k in range(4))
    body = ir.seq(
        loop(i0, 16, store(a, X[i0], (i0,))),  # 0
        loop(i1, 16, store(b, a[i1] * 2.0, (i1,))),  # 1
        loop(i2, 16, store(c, b[i2] + 1.0, (i2,))),  # 2
        loop(i3, 16, store(Y, c[i3], (i3,))),  # 3
    )
    f = func(alloc(a, alloc(b, alloc(c, body))))
    assert lifetimes_by_name(f) == {"A_data": (0, 1), "B_data": (1, 2), "C_data": (2, 3)}
    assert [node.data for node in allocate_nodes(f)] == [a.data, b.data, c.data]


def test_allocation_outside_a_loop_is_live_for_the_whole_loop() -> None:
    a = ir.decl_buffer("A", [1])
    i, j = ir.Var("i"), ir.Var("j")
    body = ir.seq(
        loop(
            i,
            4,
            store(Y, X[i], (i,)),  # 0
            loop(j, 2, store(a, X[i + j], (0,))),  # 1: inner loop j
            store(Y, a[0], (i,)),  # 2
            store(Y, Y[i] + 1.0, (i,)),  # 3
        ),
        store(Y, X[0], (0,)),  # 4
    )
    assert lifetimes_by_name(func(alloc(a, body))) == {"A_data": (0, 3)}


def test_per_iteration_allocations_in_one_body_do_not_overlap() -> None:
    a, b = ir.decl_buffer("A", [4]), ir.decl_buffer("B", [4])
    i, j = ir.Var("i"), ir.Var("j")
    body = loop(
        i,
        4,
        store(Y, X[i], (i,)),  # 0
        alloc(
            a,
            ir.seq(
                loop(j, 4, store(a, X[j], (j,)), store(Y, X[j], (j,))),  # 1, 2
                store(Y, a[0], (i,)),  # 3
            ),
        ),
        alloc(
            b,
            ir.seq(
                store(Y, Y[i], (i,)),  # 4
                store(b, X[i] * 2.0, (0,)),  # 5
                store(Y, b[0], (i,)),  # 6
            ),
        ),
    )
    # A starts at the inner loop j (its first iteration), not at the loop i; B at its first access.
    assert lifetimes_by_name(func(body)) == {"A_data": (1, 3), "B_data": (5, 6)}


def test_rolling_buffer_read_before_written_is_live_for_the_whole_loop() -> None:
    window, out = ir.decl_buffer("W", [3]), ir.decl_buffer("T", [16])
    i, k = ir.Var("i"), ir.Var("k")
    body = ir.seq(
        loop(
            i,
            14,
            store(Y, X[i], (i,)),  # 0
            store(out, window[i % 3] + window[(i + 1) % 3], (i,)),  # 1: reads last rows
            store(window, X[i + 2], ((i + 2) % 3,)),  # 2: then writes the new row
            store(Y, Y[i] * 2.0, (i,)),  # 3
        ),
        loop(k, 14, store(Y, out[k], (k,))),  # 4
    )
    lifetimes = lifetimes_by_name(func(alloc(out, alloc(window, body))))
    assert lifetimes == {"T_data": (0, 4), "W_data": (0, 3)}


def test_loads_in_conditions_and_bounds_are_numbered() -> None:
    a, b = ir.decl_buffer("A", [1], "int32"), ir.decl_buffer("B", [1])
    i = ir.Var("i")
    body = ir.seq(
        store(a, ir.const(3), (0,)),  # 0
        ir.For(i, ir.const(0), a[0], ir.ForKind.SERIAL, store(Y, X[i], (i,))),  # 1 bounds, 2
        ir.IfThenElse(ir.GT(a[0], ir.const(1)), store(b, X[0], (0,))),  # 3 cond, 4
        store(Y, b[0], (0,)),  # 5
    )
    assert lifetimes_by_name(func(alloc(a, alloc(b, body)))) == {"A_data": (0, 3), "B_data": (4, 5)}


def test_unaccessed_allocation_lives_where_it_is_allocated() -> None:
    a, unused = ir.decl_buffer("A", [4]), ir.decl_buffer("U", [4])
    body = ir.seq(
        store(a, X[0], (0,)),  # 0
        store(Y, a[0], (0,)),  # 1
        alloc(unused, store(Y, X[1], (1,))),  # 2
    )
    assert lifetimes_by_name(func(alloc(a, body))) == {"A_data": (0, 1), "U_data": (2, 2)}


def test_aliases_through_decl_buffer_count_as_accesses() -> None:
    a = ir.decl_buffer("A", [2, 4])
    flat = ir.decl_buffer("A_flat", [8], data=a.data)
    body = ir.seq(
        store(a, X[0], (0, 0)),  # 0
        store(Y, X[1], (1,)),  # 1
        ir.DeclBuffer(flat, store(Y, flat[7], (0,))),  # 2
    )
    assert lifetimes_by_name(func(alloc(a, body))) == {"A_data": (0, 2)}
