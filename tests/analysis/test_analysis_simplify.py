"""Simplification: exact output texts, value preservation on random expressions, idempotence."""

from __future__ import annotations

import random

import pytest
from analysis_exprs import BOUNDS, random_bool, random_int, random_point
from analysis_exprs import evaluate as ev

from autotune import ir
from autotune.analysis import Analyzer, Interval, eval_interval, simplify

i, j, x, y = ir.Var("i"), ir.Var("j"), ir.Var("x"), ir.Var("y")
v_h, rh = ir.Var("v_h"), ir.Var("rh")
f = ir.Var("f", "float32")
A = ir.decl_buffer("A", (16,))
I, F = ir.IntImm, ir.FloatImm

# (expression, text after simplify without bounds)
CASES: list[tuple[ir.Expr, str]] = [
    ((i * 4 + j) - i * 4, "j"),
    (2 * (x + 1) - 2, "x * 2"),
    (ir.Add(ir.Sub(v_h * 2, I(1)), rh), "v_h * 2 + rh - 1"),
    (ir.Sub(I(5), i), "5 - i"),
    (ir.Sub(ir.Sub(I(0), i), I(1)), "i * -1 - 1"),
    (ir.Sub(x, x), "0"),
    (x * 0 + 3, "3"),
    (ir.Add(y, ir.Mul(x, I(3))) - y * 2, "x * 3 - y"),
    ((i * 4 + j) // 4, "i + j // 4"),
    ((i * 4 + j) % 4, "j % 4"),
    ((i * 8 + 6) // 2, "i * 4 + 3"),
    ((x + 8) // 4, "x // 4 + 2"),
    ((x + 5) // 4, "(x + 5) // 4"),
    ((x - 1) % 4, "(x + 3) % 4"),
    ((x * -4 + y) // -4, "x + y // -4"),
    (x // 1, "x"),
    (x % 1, "0"),
    (x % -1, "0"),
    (x // 2 // 3, "x // 6"),
    (x % 8 % 4, "x % 4"),
    (x // y, "x // y"),
    (I(7) // I(-2), "-4"),
    (I(-7) // I(2), "-4"),
    (I(7) % I(-2), "-1"),
    (I(-7) % I(2), "1"),
    (I(7) // I(0), "7 // 0"),
    (F(7.5) // F(2.0), "3.0"),
    (F(-7.5) % F(2.0), "0.5"),
    (F(1.0) / F(3.0), "0.3333333432674408"),
    (F(0.5) * F(4.0) + F(0.25), "2.25"),
    (f * F(2.0) + F(0.5) * F(2.0), "f * 2.0 + 1.0"),
    (ir.Cast("int32", ir.floor(ir.Cast("float32", I(3)) * 2.0 + 0.5)), "6"),
    (ir.Cast("int32", F(-2.75)), "-2"),
    (ir.Cast("int32", x + 0), "x"),
    (ir.min_(x, x + 1), "x"),
    (ir.max_(x, x + 1), "x + 1"),
    (ir.min_(x, y), "T.min(x, y)"),
    (ir.min_(x * 2, x * 2), "x * 2"),
    (ir.max_(I(3), I(-2)), "3"),
    (ir.select(x < x + 1, i, j), "i"),
    (ir.select(x > x, i, j), "j"),
    (ir.select(x < y, i + 0, i), "i"),
    (ir.select(x < y, i, j), "T.Select(x < y, i, j)"),
    (x + 1 < x + 2, "True"),
    (ir.eq(x * 2, x + x), "True"),
    (ir.ne(x, x), "False"),
    (x < y, "x < y"),
    (I(3) <= I(2), "False"),
    (ir.And(x < x + 1, y < 3), "y < 3"),
    (ir.And(x > x, y < 3), "False"),
    (ir.Or(x < x + 1, y < 3), "True"),
    (ir.Or(I(0, "bool"), y < 3), "y < 3"),
    (ir.Not(x < y), "x >= y"),
    (ir.Not(ir.Not(x < y)), "x < y"),
    (ir.Not(I(0, "bool")), "True"),
    (A[(i * 4 + j) - i * 4] + A[x // 1], "A[j] + A[x]"),
    (ir.min_(A[0], A[0]), "A[0]"),
    (ir.Mul(x, y) + ir.Mul(x, y), "x * y * 2"),
    # a fused loop's quotient and remainder recombine (x // 64 * 64 + x % 64 == x)
    (x // 64 * 64 + x % 64 + y, "x + y"),
    (x % 64 + y * 8 + x // 64 * 64, "x + y * 8"),
    (x // 2048 * 2048 + x // 64 % 32 * 64 + x % 64, "x"),
    (x // 4 // 8 * 32 + x // 4 % 8 * 4 + x % 4, "x"),
    ((x // 64 * 64 + x % 64) * 3, "x * 3"),
    (x // 64 * 128 + x % 64 * 2, "x * 2"),
    ((i + 1) // 4 * 4 + (i + 1) % 4, "i + 1"),
    (x // 64 * 64 + x % 32, "x // 64 * 64 + x % 32"),
    (x // 64 * 32 + x % 64, "x // 64 * 32 + x % 64"),
    (x // 64 * 64 - x % 64, "x // 64 * 64 - x % 64"),
    (x // -4 * -4 + x % -4, "x % -4 - x // -4 * 4"),  # negative divisors are left alone
]


@pytest.mark.parametrize(("expr", "text"), CASES, ids=[str(e) for e, _ in CASES])
def test_simplify_gives_exact_text(expr: ir.Expr, text: str) -> None:
    assert str(simplify(expr)) == text


BOUNDED: list[tuple[ir.Expr, str]] = [
    ((i * 4 + j) // 4, "i"),
    ((i * 4 + j) % 4, "j"),
    ((j + 4) % 4, "j"),
    ((j - 4) // 4, "-1"),
    (j // 4, "0"),
    (x // 16, "x // 16"),
    (ir.min_(j, 4), "j"),
    (ir.max_(j, I(0)), "j"),
    (ir.max_(x, I(0)), "T.max(x, 0)"),
    (j < 4, "True"),
    (j >= 4, "False"),
    (ir.select(j < 4, x, y), "x"),
    ((j % 4) // 4, "0"),
    ((x * 4 + j) // 4 - x, "0"),
]


@pytest.mark.parametrize(("expr", "text"), BOUNDED, ids=[str(e) for e, _ in BOUNDED])
def test_simplify_uses_bounds(expr: ir.Expr, text: str) -> None:
    assert str(simplify(expr, {j: Interval(0, 3), x: Interval(-5, 100)})) == text


def test_simplify_keeps_identity_of_unchanged_trees() -> None:
    e = ir.min_(x, y) + A[x]
    assert simplify(e) is e


@pytest.mark.parametrize("seed", range(5))
def test_random_expressions_keep_their_value_and_are_idempotent(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(100):
        expr = random_int(rng, 4) if rng.random() < 0.8 else random_bool(rng, 3)
        bounded = rng.random() < 0.5
        out = simplify(expr, BOUNDS if bounded else None)
        assert str(simplify(out, BOUNDS if bounded else None)) == str(out), f"not idempotent: {expr}"
        for _ in range(12):
            env = random_point(rng)
            assert ev(out, env) == ev(expr, env), f"{expr}  ->  {out}  at {env}"


@pytest.mark.parametrize("seed", range(3))
def test_random_intervals_hold_every_value(seed: int) -> None:
    rng = random.Random(100 + seed)
    for _ in range(150):
        expr = random_int(rng, 4)
        box = eval_interval(expr, BOUNDS)
        for _ in range(10):
            value = ev(expr, random_point(rng))
            assert box.contains(value), f"{expr}: {value} outside {box}"


def test_analyzer_bind_can_prove_and_scoping() -> None:
    an = Analyzer()
    an.bind(i, ir.Range.of(0, 8))
    an.bind(j, ir.Range(i * 4, I(4)))  # j in [i*4, i*4 + 4) with i < 8
    assert an.bounds[j] == Interval(0, 31)
    assert an.can_prove(ir.And(i >= 0, i < 8))
    assert an.can_prove(ir.Or(i < 0, j < 32))
    assert not an.can_prove(i < 7)
    assert an.can_prove_false(i > 7)
    assert an.can_prove((i * 4 + 3) // 4 <= i)  # proven after simplification
    with an.scoped():
        an.bind(i, Interval(0, 0))
        assert an.can_prove(ir.eq(i, 0))
        assert str(an.simplify(ir.select(i < 1, x, y))) == "x"
    assert an.bounds[i] == Interval(0, 7)
    assert not an.can_prove(ir.eq(i, 0))


def test_simplify_statement_binds_loop_variables() -> None:
    k = ir.Var("k")
    body = ir.BufferStore(A, A[(i * 4 + k) // 4] + A[ir.min_(k, 3)], (ir.Sub(i + k, k),))
    loop = ir.For(k, I(0), I(4), ir.ForKind.SERIAL, body)
    assert str(simplify(loop)) == "for k in T.serial(4):\n    A[i] = A[i] + A[k]\n"
