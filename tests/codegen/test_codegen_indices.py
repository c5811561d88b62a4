"""Emitted indices: computed ones cast to ``np.uintp``, integer literals folded, and
loads of read-only parameters shared inside fully unrolled loops."""

from __future__ import annotations

import numpy as np
import pytest
from codegen_funcs import body_lines

from autotune import ir
from autotune.codegen import build, generate_source

A, B = ir.decl_buffer("A", (8,)), ir.decl_buffer("B", (8,))
I, J, K = ir.Var("i"), ir.Var("j"), ir.Var("k")


def _text(body: ir.Stmt, *params: ir.Buffer) -> str:
    return generate_source(ir.Func("f", params or (A, B), body)).text


def _lines(text: str) -> list[str]:
    """The kernel body's statements, without the header and the argument comments."""
    return body_lines(text)


def _loop(var: ir.Var, extent: int, body: ir.Stmt, kind: str = "serial") -> ir.Stmt:
    return ir.For(var, ir.const(0), ir.const(extent), kind, body)


# ---- np.uintp -------------------------------------------------------------------
def _offset_copy() -> ir.Func:
    """``for j in 2: for i in 4: off = (j * 3) % 4; B[i + off] = A[i] + A[off]``: a computed offset."""
    off = (J * 3) % 4
    body = ir.BufferStore(B, A[I] + A[off], (I + off,))
    return ir.Func("f", (A, B), _loop(J, 2, _loop(I, 4, body)))


def test_computed_index_is_cast_to_uintp():
    assert _lines(generate_source(_offset_copy()).text)[-1] == (
        "B[np.uintp(i + j * 3 % 4)] = A[i] + A[np.uintp(j * 3 % 4)]"
    )


def test_loop_variables_and_constants_are_not_cast():
    text = _text(ir.seq(_loop(I, 8, ir.BufferStore(B, A[I], (I,))), ir.BufferStore(B, A[3], (0,))))
    assert _lines(text)[-3:] == ["for i in range(8):", "B[i] = A[i]", "B[0] = A[3]"]
    assert "uintp" not in text


def test_unrolled_loop_variable_is_a_constant_and_not_cast():
    text = _text(_loop(K, 2, ir.BufferStore(B, ir.const(1.0), (K,)), "unroll"))
    assert _lines(text)[-2:] == ["B[0] = _c0", "B[1] = _c0"]


def test_float_index_is_not_cast():
    # numba rejects a float index: the kernel must fail to compile (a CodegenError, tested
    # in test_codegen_build), not silently truncate through np.uintp
    index = ir.Cast("float32", I) * 0.5
    text = _text(_loop(I, 4, ir.BufferStore(B, A[index], (I,))))
    assert "B[i] = A[np.float32(i) * _c0]" in text and "uintp" not in text


@pytest.mark.slow
def test_cast_indices_compute_the_same_numbers():
    kernel = build(_offset_copy())
    a = np.arange(8, dtype=np.float32) * 10
    b = np.full(8, np.nan, np.float32)
    kernel(a, b)
    want = np.full(8, np.nan, np.float32)
    for j in range(2):
        for i in range(4):
            off = (j * 3) % 4
            want[i + off] = a[i] + a[off]
    np.testing.assert_array_equal(b, want)


# ---- literal folding ------------------------------------------------------------------
def test_integer_literals_are_folded_in_unrolled_copies():
    c = ir.decl_buffer("C", (4, 64))
    body = ir.BufferStore(c, ir.const(0.0), (K, K * 64 + 3 + 4 - J))
    lines = _lines(_text(_loop(J, 2, _loop(K, 2, body, "unroll")), c))
    assert lines[-2:] == ["C[0, np.uintp(7 - j)] = _c0", "C[1, np.uintp(71 - j)] = _c0"]


def test_folding_keeps_negative_literals_parenthesised_inside_expressions():
    # a value, not an index: k = 0 folds 0 - 4 to -4, then i + (-4) keeps its parentheses
    body = ir.BufferStore(B, ir.Cast("float32", I + (K - 4)), (I,))
    lines = _lines(_text(_loop(I, 8, _loop(K, 1, body, "unroll"))))
    assert lines[-1] == "B[i] = np.float32(i + (-4))"


def test_unrolled_indices_are_simplified_to_one_text_per_element():
    # (i*2 + j)*2 + k*2 reads element i*4 + 2 for (j, k) = (1, 0) and (0, 1): one text, one load
    c = ir.decl_buffer("C", (2, 2))
    body = ir.BufferStore(c, A[(I * 2 + J) * 2 + K * 2], (J, K))
    lines = _lines(_text(_loop(I, 1, _loop(J, 2, _loop(K, 2, body, "unroll"), "unroll")), A, c))
    assert lines == [
        "for i in range(1):",
        "ld = A[np.uintp(i * 4)]",
        "C[0, 0] = ld",
        "ld_1 = A[np.uintp(i * 4 + 2)]",
        "C[0, 1] = ld_1",
        "C[1, 0] = ld_1",
        "ld_2 = A[np.uintp(i * 4 + 4)]",
        "C[1, 1] = ld_2",
    ]


def test_multiplication_by_zero_is_zero():
    body = ir.BufferStore(B, ir.const(0.0), (K * I + 1,))
    lines = _lines(_text(_loop(I, 8, _loop(K, 1, body, "unroll"))))
    assert lines[-1] == "B[1] = _c0"


# ---- shared loads in straight-line code ------------------------------------------------
def test_loads_of_a_read_only_parameter_are_shared_in_unrolled_code():
    c = ir.decl_buffer("C", (2, 2))
    body = ir.BufferStore(c, A[I] * A[J], (I, J))
    lines = _lines(_text(_loop(I, 2, _loop(J, 2, body, "unroll"), "unroll"), A, c))
    assert lines == [
        "ld = A[0]",
        "C[0, 0] = ld * ld",
        "ld_1 = A[1]",
        "C[0, 1] = ld * ld_1",
        "C[1, 0] = ld_1 * ld",
        "C[1, 1] = ld_1 * ld_1",
    ]


def test_loads_of_a_written_buffer_are_not_shared():
    # B is written: B[0] must be read again after the store to it
    body = ir.seq(ir.BufferStore(B, A[0] + B[0], (K,)), ir.BufferStore(B, B[0] * 2.0, (0,)))
    lines = _lines(_text(_loop(K, 2, body, "unroll")))
    assert lines == [
        "ld = A[0]",
        "B[0] = ld + B[0]",
        "B[0] = B[0] * _c0",
        "B[1] = ld + B[0]",
        "B[0] = B[0] * _c0",
    ]


def test_sharing_stops_at_loops_and_branches():
    branch = ir.IfThenElse(ir.LT(K, ir.const(1)), ir.BufferStore(B, A[0], (1,)))
    inner = _loop(I, 2, ir.BufferStore(B, A[0], (I,)))
    body = ir.seq(ir.BufferStore(B, A[0], (0,)), branch, ir.BufferStore(B, A[0], (2,)), inner)
    lines = _lines(_text(_loop(K, 2, body, "unroll")))
    assert lines[:9] == [
        "ld = A[0]",
        "B[0] = ld",
        "if 0 < 1:",
        "B[1] = A[0]",  # no sharing inside a branch
        "ld_1 = A[0]",  # after it, a new region
        "B[2] = ld_1",
        "for i in range(2):",
        "B[i] = A[0]",  # nor inside a loop
        "B[0] = A[0]",  # the next copy: the loop ended the region
    ]
    assert "ld_2" not in "\n".join(lines)


def test_no_sharing_outside_unrolled_loops():
    body = ir.seq(ir.BufferStore(B, A[I], (I,)), ir.BufferStore(B, A[I] * 2.0, (I,)))
    assert "ld" not in _text(_loop(I, 8, body))


@pytest.mark.slow
def test_shared_loads_compute_the_same_numbers():
    c = ir.decl_buffer("C", (4, 4))
    # an unrolled rank-1 update, reading the output back (not shared) and A twice per copy (shared)
    body = ir.BufferStore(c, c[I, J] + A[I] * A[J + 4] + A[I], (I, J))
    func = ir.Func("f", (A, c), _loop(I, 4, _loop(J, 4, body, "unroll"), "unroll"))
    assert "ld_7" in generate_source(func).text
    a = np.arange(8, dtype=np.float32)
    out = np.ones((4, 4), np.float32)
    build(func)(a, out)
    np.testing.assert_array_equal(out, 1 + np.outer(a[:4], a[4:]) + a[:4, None])


def _indirect(index_of: object) -> ir.Func:
    """``for k in unroll(2): idx[0] = k + 1; B[k] = A[index_of(idx)]`` with ``idx`` an int register."""
    idx = ir.decl_buffer("idx", (1,), "int32", scope="local")
    body = _loop(K, 2, ir.seq(ir.BufferStore(idx, K + 1, (0,)), ir.BufferStore(B, A[index_of(idx)], (K,))), "unroll")  # type: ignore[operator]
    alloc = ir.Allocate(idx.data, "int32", (ir.const(1),), ir.DeclBuffer(idx, body), (("scope", "local"),))
    return ir.Func("f", (A, B), alloc)


def test_loads_at_an_index_that_reads_a_register_are_not_shared():
    # the register changes between the copies: A[idx_0] is another element each time
    lines = _lines(generate_source(_indirect(lambda idx: idx[0])).text)
    assert lines[-4:] == ["idx_0 = 1", "B[0] = A[np.uintp(idx_0)]", "idx_0 = 2", "B[1] = A[np.uintp(idx_0)]"]


def test_loads_at_an_index_that_reads_a_written_buffer_are_not_shared():
    n = ir.decl_buffer("N", (1,), "int32")
    body = _loop(K, 2, ir.seq(ir.BufferStore(n, K, (0,)), ir.BufferStore(B, A[n[0]], (K,))), "unroll")
    lines = _lines(_text(body, A, B, n))
    assert lines[-4:] == ["N[0] = 0", "B[0] = A[np.uintp(N[0])]", "N[0] = 1", "B[1] = A[np.uintp(N[0])]"]


@pytest.mark.slow
def test_indirect_loads_compute_the_same_numbers():
    a, b = np.arange(8, dtype=np.float32) * 10, np.zeros(8, np.float32)
    build(_indirect(lambda idx: idx[0]))(a, b)
    np.testing.assert_array_equal(b[:2], [10.0, 20.0])


# ---- guarded loads stay where they are guarded -----------------------------------------
def _guarded() -> ir.Func:
    """``for i: for j: for k in unroll(2): B[i, j] += (A[i - 1, j] if i - 1 >= k else 0)``: the same
    load under two guards, outside ``A`` when ``i == 0``."""
    a, b = ir.decl_buffer("A", (2, 4)), ir.decl_buffer("B", (2, 4))
    val = ir.select(I - 1 >= K, a[I - 1, J], 0.0)
    body = _loop(K, 2, ir.BufferStore(b, b[I, J] + val, (I, J)), "unroll")
    return ir.Func("f", (a, b), _loop(I, 2, _loop(J, 4, body)))


def test_loads_in_a_select_branch_are_not_shared():
    lines = _lines(generate_source(_guarded()).text)
    # one accumulation over the unrolled k: a tree of its two terms, each select a local of its own
    # that loads only in its taken branch
    assert lines[-4:] == [
        "sel = (A[np.uintp(i - 1), j] if i - 1 >= 0 else _c0)",
        "sel_1 = (A[np.uintp(i - 1), j] if i - 1 >= 1 else _c0)",
        "t = (sel + sel_1)",
        "B[i, j] = (B[i, j] + t)",
    ]
    assert "ld" not in "\n".join(lines)


def test_loads_in_a_select_branch_are_shared_when_in_bounds_for_every_loop_value():
    # A has a halo row: A[i + 1 - k, j] with i in 0..1 and k in 0..1 reads rows 0..2 of 3, always in
    # bounds, so the load runs before the statement whatever the guard (the rolling-buffer window)
    a, b = ir.decl_buffer("A", (3, 4)), ir.decl_buffer("B", (2, 4))
    val = ir.select(I - K >= 0, a[I + 1 - K, J], 0.0)
    body = _loop(K, 2, ir.BufferStore(b, b[I, J] + val, (I, J)), "unroll")
    lines = _lines(generate_source(ir.Func("f", (a, b), _loop(I, 2, _loop(J, 4, body)))).text)
    # both values of each select are in bounds: computed, and selected without a branch
    assert lines[-6:] == [
        "ld = A[np.uintp(i + 1), j]",
        "sel = _select(i >= 0, ld, _c0)",
        "ld_1 = A[i, j]",
        "sel_1 = _select(i - 1 >= 0, ld_1, _c0)",
        "t = (sel + sel_1)",
        "B[i, j] = (B[i, j] + t)",
    ]
    # one more row of i: the load at k = 0 reads row 3, outside A, and stays in its branch
    b3 = ir.decl_buffer("B", (3, 4))
    body3 = _loop(K, 2, ir.BufferStore(b3, b3[I, J] + val, (I, J)), "unroll")
    lines = _lines(generate_source(ir.Func("f", (a, b3), _loop(I, 3, _loop(J, 4, body3)))).text)
    assert lines[-5:] == [
        "sel = (A[np.uintp(i + 1), j] if i >= 0 else _c0)",
        "ld = A[i, j]",
        "sel_1 = _select(i - 1 >= 0, ld, _c0)",
        "t = (sel + sel_1)",
        "B[i, j] = (B[i, j] + t)",
    ]


def test_loads_on_the_right_of_and_or_are_not_shared_but_on_the_left_are():
    o = ir.decl_buffer("O", (2,), "bool")
    cond = ir.And(A[K] > 0.0, A[K + 1] > 0.0)
    lines = _lines(_text(_loop(K, 2, ir.BufferStore(o, ir.Or(cond, A[0] > 1.0), (K,)), "unroll"), A, o))
    assert lines == [
        "ld = A[0]",
        "O[0] = ld > _c0 and A[1] > _c0 or A[0] > _c1",
        "ld_1 = A[1]",
        "O[1] = ld_1 > _c0 and A[2] > _c0 or A[0] > _c1",
    ]


@pytest.mark.slow
def test_guarded_loads_stay_in_bounds():
    # with numba's bounds checking on, a load run outside its guard raises IndexError
    import numba

    func = _guarded()
    kernel = build(func)
    options = {k: v for k, v in kernel.dispatcher.targetoptions.items() if k not in ("nopython", "boundscheck")}
    kernel.dispatcher = numba.njit(boundscheck=True, **options)(kernel.dispatcher.py_func)
    a = np.arange(8, dtype=np.float32).reshape(2, 4)
    b = np.zeros((2, 4), np.float32)
    kernel(a, b)
    np.testing.assert_array_equal(b, [[0, 0, 0, 0], a[0]])
