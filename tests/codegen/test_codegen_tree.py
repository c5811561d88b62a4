"""Accumulations over fully unrolled loops are written as one tree of their terms, following the nest;
partial results that neighbouring unrolled copies share are computed once (codegen.trees.Partials)."""

from __future__ import annotations

import numpy as np
import pytest
from codegen_funcs import body_lines

from autotune import ir
from autotune.codegen import UNROLL_LIMIT, build, generate_source
from autotune.codegen.trees import Partials

X = ir.decl_buffer("X", (4, 6))
Y = ir.decl_buffer("Y", (2, 4))
I, J, R, S = ir.Var("i"), ir.Var("j"), ir.Var("r"), ir.Var("s")


def _loop(var: ir.Var, extent: int, body: ir.Stmt, kind: str = "serial") -> ir.Stmt:
    return ir.For(var, ir.const(0), ir.const(extent), kind, body)


def _window(op: type[ir.BinaryOp], kinds: tuple[str, str] = ("unroll", "unroll"), rows: int = 3) -> ir.Func:
    """``for i in 2: for j in 4: for r in rows: for s in 3: Y[i, j] = op(Y[i, j], X[i + r, j + s])``."""
    acc = Y[I, J]
    body = ir.BufferStore(Y, op(acc, X[I + R, J + S]), (I, J))
    nest = _loop(R, rows, _loop(S, 3, body, kinds[1]), kinds[0])
    return ir.Func("f", (X, Y), _loop(I, 2, _loop(J, 4, nest)))


def _last(func: ir.Func) -> str:
    return body_lines(generate_source(func).text)[-1]


def test_a_max_over_an_unrolled_window_is_one_tree() -> None:
    # the inner loop (s) first: one partial per window row, then the rows; each level pairs its
    # last two parts first (the pair that the next window along shares)
    lines = body_lines(generate_source(_window(ir.Max)).text)
    assert lines[-1] == "Y[i, j] = max(Y[i, j], t_7)"
    assert lines[-7:-1] == [
        "ld_7 = X[np.uintp(i + 2), np.uintp(j + 1)]",
        "ld_8 = X[np.uintp(i + 2), np.uintp(j + 2)]",
        "t_4 = max(ld_7, ld_8)",
        "t_5 = max(ld_6, t_4)",
        "t_6 = max(t_3, t_5)",
        "t_7 = max(t_1, t_6)",
    ]
    assert [ln for ln in lines if ln.startswith(("t =", "t_1 ="))] == [
        "t = max(ld_1, ld_2)",
        "t_1 = max(ld, t)",
    ]


def _jammed(columns: int, rows: int = 1) -> ir.Func:
    """Y[io*rows + ii, jo*columns + ji] = max over a 3x3 window, ``ii`` and ``ji`` unrolled outside
    the window loops, which run columns (s) outside rows (r): the copies of neighbouring outputs."""
    io, ii, jo, ji = ir.Var("io"), ir.Var("ii"), ir.Var("jo"), ir.Var("ji")
    i, j = io * rows + ii, jo * columns + ji
    body = ir.BufferStore(Y, ir.Max(Y[i, j], X[i + R, j + S]), (i, j))
    window = _loop(S, 3, _loop(R, 3, body, "unroll"), "unroll")
    nest = _loop(ii, rows, _loop(ji, columns, window, "unroll"), "unroll")
    return ir.Func("f", (X, Y), _loop(io, 2 // rows, _loop(jo, 4 // columns, nest)))


def _ops(lines: list[str]) -> int:
    return sum(ln.count("max(") for ln in lines if not ln.startswith("Y["))


def test_unrolled_neighbours_share_loads_and_column_partials() -> None:
    lines = body_lines(generate_source(_jammed(2)).text)
    # columns jo*2 .. jo*2 + 3: 12 loads and 4 column maxima serve both windows, and the second
    # window reuses the first's max of its last two columns (t_6): 8 + 2 + 1 max instead of 16
    assert sum(ln.startswith("ld") for ln in lines) == 12
    assert _ops(lines) == 11
    assert lines[-3:] == [
        "t_9 = max(ld_9, t_8)",
        "t_10 = max(t_9, t_6)",
        "Y[io, np.uintp(jo * 2 + 1)] = max(Y[io, np.uintp(jo * 2 + 1)], t_10)",
    ]
    assert "t_6 = max(t_3, t_5)" in lines and "t_7 = max(t_1, t_6)" in lines


def test_unrolled_neighbouring_rows_share_the_rows_of_their_windows() -> None:
    # 2 rows x 2 columns of 3x3 windows read a 4x4 block once; the second row's column maxima reuse
    # the first row's pairs of rows (one max each), and its windows the pair of columns again
    lines = body_lines(generate_source(_jammed(2, rows=2)).text)
    assert sum(ln.startswith("ld") for ln in lines) == 16
    assert _ops(lines) == 11 + 4 + 3  # the first row as above; 4 column maxima, 3 window max
    second = lines[
        lines.index(
            "Y[np.uintp(io * 2), np.uintp(jo * 2 + 1)] = max(Y[np.uintp(io * 2), np.uintp(jo * 2 + 1)], t_10)"
        )
        + 1 :
    ]
    assert second[:3] == [
        "ld_12 = X[np.uintp(io * 2 + 3), np.uintp(jo * 2)]",
        "t_11 = max(ld_12, t)",
        "ld_13 = X[np.uintp(io * 2 + 3), np.uintp(jo * 2 + 1)]",
    ]


def test_loads_of_storage_the_region_writes_are_not_shared() -> None:
    # each copy stores W[k] and then reads W[0], W[1]: the second copy must load them again
    k = ir.Var("k")
    w, z = ir.decl_buffer("W", (2,)), ir.decl_buffer("Z", (2, 2))
    body = ir.SeqStmt((ir.BufferStore(w, X[I, k], (k,)), ir.BufferStore(z, w[0] * w[1], (I, k))))
    func = ir.Func("f", (X, w, z), _loop(I, 2, _loop(k, 2, body, "unroll")))
    lines = body_lines(generate_source(func).text)
    assert lines[-6:] == [
        "ld = X[i, 0]",
        "W[0] = ld",
        "Z[i, 0] = W[0] * W[1]",
        "ld_1 = X[i, 1]",
        "W[1] = ld_1",
        "Z[i, 1] = W[0] * W[1]",
    ]


@pytest.mark.slow
def test_jammed_windows_compute_what_numpy_does(tmp_path) -> None:
    rng = np.random.default_rng(1)
    x = rng.standard_normal((4, 6)).astype(np.float32)
    y = np.full((2, 4), -np.inf, np.float32)
    kernel = build(_jammed(2, rows=2), cache_dir=tmp_path)
    kernel(x, y)
    windows = np.lib.stride_tricks.sliding_window_view(x, (3, 3))[:2, :4]
    np.testing.assert_array_equal(y, windows.max(axis=(2, 3)))


def test_a_sum_is_a_tree_of_additions() -> None:
    lines = body_lines(generate_source(_window(ir.Add, rows=1)).text)
    assert lines[-3:] == ["t = (ld_1 + ld_2)", "t_1 = (ld + t)", "Y[i, j] = (Y[i, j] + t_1)"]


def test_min_is_a_tree_too_and_the_accumulator_may_be_on_the_right() -> None:
    func = _window(ir.Min, rows=1)
    store = next(iter(ir.collect(func.body, ir.BufferStore)))
    assert isinstance(store.value, ir.Min)
    flipped = ir.BufferStore(Y, ir.Min(store.value.b, store.value.a), (I, J))
    body = _loop(I, 2, _loop(J, 4, _loop(R, 1, _loop(S, 3, flipped, "unroll"), "unroll")))
    lines = body_lines(generate_source(ir.Func("f", (X, Y), body)).text)
    assert lines[-3:] == ["t = min(ld_1, ld_2)", "t_1 = min(ld, t)", "Y[i, j] = min(Y[i, j], t_1)"]


def test_statement_by_statement_when_it_is_not_one_accumulation() -> None:
    # a serial loop inside: only the unrolled loop around it is copied
    text = generate_source(_window(ir.Max, ("unroll", "serial"))).text
    assert text.count("for s in range(3):") == 3 and "max(max(" not in text
    # the accumulator's element changes with the unrolled loop: no tree
    per_row = ir.BufferStore(Y, ir.Max(Y[I, R], X[I, J]), (I, R))
    text = generate_source(ir.Func("f", (X, Y), _loop(I, 2, _loop(J, 4, _loop(R, 4, per_row, "unroll"))))).text
    assert "Y[i, 3] = max(Y[i, 3], ld)" in text and "max(max(" not in text
    # the term reads the accumulator's buffer: no tree
    self_read = ir.BufferStore(Y, ir.Max(Y[I, 0], Y[I, R]), (I, 0))
    text = generate_source(ir.Func("f", (X, Y), _loop(I, 2, _loop(R, 4, self_read, "unroll")))).text
    assert "Y[i, 0] = max(Y[i, 0], Y[i, 3])" in text
    # a product is not reassociated
    text = generate_source(_window(ir.Mul, rows=1)).text
    assert "Y[i, j] = Y[i, j] * ld_2" in text


def test_more_iterations_than_the_unroll_limit_are_trees_of_the_inner_loop() -> None:
    big = ir.decl_buffer("X", (1, 4 * UNROLL_LIMIT))
    out = ir.decl_buffer("Y", (1,))
    body = ir.BufferStore(out, ir.Max(out[0], big[0, R * 4 + S]), (0,))
    func = ir.Func("f", (big, out), _loop(R, UNROLL_LIMIT, _loop(S, 4, body, "unroll"), "unroll"))
    stores = [ln.strip() for ln in generate_source(func).text.splitlines() if ln.strip().startswith("Y[0] =")]
    assert len(stores) == UNROLL_LIMIT  # 64 x 4 iterations: one tree of 4 per outer iteration
    lines = body_lines(generate_source(func).text)
    assert lines[-4:] == [
        "t_189 = max(ld_254, ld_255)",
        "t_190 = max(ld_252, ld_253)",
        "t_191 = max(t_190, t_189)",
        "Y[0] = max(Y[0], t_191)",
    ]


@pytest.mark.parametrize("op", [ir.Max, ir.Min, ir.Add])
def test_tree_reductions_compute_what_numpy_does(op: type[ir.BinaryOp], tmp_path) -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 6)).astype(np.float32)
    y = rng.standard_normal((2, 4)).astype(np.float32)
    windows = np.lib.stride_tricks.sliding_window_view(x, (3, 3))[:2, :4]
    reduce = {ir.Max: np.max, ir.Min: np.min, ir.Add: np.sum}[op]
    combine = {ir.Max: np.maximum, ir.Min: np.minimum, ir.Add: np.add}[op]
    expected = combine(y, reduce(windows, axis=(2, 3)))
    kernel = build(_window(op), cache_dir=tmp_path)
    kernel(x, y)
    np.testing.assert_allclose(y, expected, rtol=1e-6)


def test_partials_reuse_the_largest_partial_they_contain() -> None:
    made: list[str] = []

    def local(text: str) -> str:
        made.append(text)
        return f"p{len(made) - 1}"

    partials = Partials()
    assert partials.reduce("max", ["a", "b", "c", "d"], local) == "p2"
    assert made == ["max(c, d)", "max(a, b)", "max(p1, p0)"]
    # {c, d} is the largest partial inside {b, c, d, e}; the rest pair up
    assert partials.reduce("max", ["b", "c", "d", "e"], local) == "p4"
    assert made[3:] == ["max(b, e)", "max(p3, p0)"]
    # the same set again is the same local; another operator shares nothing with max
    assert partials.reduce("max", ["d", "c", "b", "a"], local) == "p2" and len(made) == 5
    assert partials.reduce("min", ["c", "d"], local) == "p5" and made[5] == "min(c, d)"
    # one part is itself; a repeated part (a sum counts it twice) is a plain balanced tree
    assert partials.reduce("+", ["a"], local) == "a"
    assert partials.reduce("+", ["a", "a", "b"], local) == "((a + a) + b)" and len(made) == 6
