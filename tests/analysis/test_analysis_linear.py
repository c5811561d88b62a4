"""Linear forms: which expressions are affine, and their canonical text."""

from __future__ import annotations

import pytest

from autotune import ir
from autotune.analysis import Linear, sum_form, to_linear

i, j, k = ir.Var("i"), ir.Var("j"), ir.Var("k")
f = ir.Var("f", "float32")
A = ir.decl_buffer("A", (8,), "int32")
I = ir.IntImm


def test_affine_expression_gives_coefficients_in_order_of_appearance() -> None:
    lin = to_linear(2 * (i + 1) - j * 3 + i + 4)
    assert lin is not None
    assert lin.coeffs == ((i, 3), (j, -3))
    assert lin.const == 6
    assert lin.coeff(j) == -3 and lin.coeff(k) == 0


def test_exact_division_by_a_constant_is_affine() -> None:
    assert to_linear((i * 4 + 6) // 2) == Linear(((i, 2),), 3)
    assert to_linear((i * 4 + 7) // 2) == Linear(((i, 2),), 3)  # floor(7/2) with i's part exact
    assert to_linear((i * 4 + 7) % 2) == Linear((), 1)
    assert to_linear((i * -6 + 1) // -3) == Linear(((i, 2),), -1)


@pytest.mark.parametrize(
    "expr",
    [
        (i * 4 + j) // 8,
        i % 3,
        i // j,
        i * j,
        ir.min_(i, j),
        ir.max_(i, 0),
        ir.select(i < j, i, j),
        ir.Cast("int32", i),
        ir.Cast("int32", ir.floor(ir.Cast("float32", i) * 2.0 + 0.5)),
        A[i] + 1,
        f + 1.0,
        ir.FloatImm(2.0),
        i < j,
    ],
    ids=str,
)
def test_non_affine_expressions_give_none(expr: ir.Expr) -> None:
    assert to_linear(expr) is None


def test_quotient_and_remainder_of_a_fused_loop_recombine_into_an_affine_form() -> None:
    assert to_linear(i // 64 * 64 + i % 64 + j * 2) == Linear(((i, 1), (j, 2)), 0)
    assert to_linear(i // 2048 * 2048 + i // 64 % 32 * 64 + i % 64) == Linear(((i, 1),), 0)
    assert to_linear(i // 64 * 64 + i % 32) is None  # not a quotient/remainder pair
    form = sum_form(i // 64 * 64 + (i + j) % 64)
    assert form is not None and [str(t) for t in form.terms] == ["i // 64", "(i + j) % 64"]


def test_sum_form_keeps_non_affine_parts_as_terms() -> None:
    form = sum_form(A[i] * 2 + i // 3 - A[i])
    assert form is not None
    assert [str(t) for t in form.terms] == ["A[i]", "i // 3"]
    assert form.coeff(A[i]) == 1
    assert sum_form(f) is None


@pytest.mark.parametrize(
    ("lin", "text"),
    [
        (Linear(((i, 2), (j, 1)), -1), "i * 2 + j - 1"),
        (Linear(((i, -1), (j, 1)), 0), "j - i"),
        (Linear(((i, -1),), 5), "5 - i"),
        (Linear(((i, -1), (j, -2)), -1), "i * -1 - j * 2 - 1"),
        (Linear((), -3), "-3"),
        (Linear(), "0"),
        (Linear(((i, 1),), 0), "i"),
    ],
)
def test_to_expr_is_canonical_and_round_trips(lin: Linear, text: str) -> None:
    assert str(lin.to_expr()) == text
    again = to_linear(lin.to_expr())
    assert again is not None
    assert dict(again.coeffs) == dict(lin.coeffs) and again.const == lin.const
    assert str(again.to_expr()) == text


def test_arithmetic() -> None:
    a, b = Linear(((i, 2),), 1), Linear(((i, -2), (j, 1)), 4)
    assert a + b == Linear(((j, 1),), 5)
    assert a - 1 == Linear(((i, 2),), 0)
    assert (-b).coeffs == ((i, 2), (j, -1))
    assert b.scale(0) == Linear()
    assert Linear(((i, 4), (j, 8)), 3).divisible_by(4)
    assert str(Linear.of([(i, 1), (j, 2), (i, -1)]).to_expr("int64")) == "j * T.int64(2)"
