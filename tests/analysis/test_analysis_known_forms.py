"""The forms the simplifier remembers for the sums it writes (``linear.remember_sum``) are the forms
``sum_form`` finds by walking them, with the same term objects in the same order."""

from __future__ import annotations

import pytest

from autotune import ir, workloads
from autotune.analysis import linear
from autotune.analysis.arith import Analyzer
from autotune.analysis.rewrite import Simplifier
from autotune.lowering import PASSES, LowerOptions
from autotune.schedule import Schedule


def _before_simplify(func: ir.Func) -> ir.Func:
    options = LowerOptions()
    for p in PASSES:
        if p.name == "simplify":
            return func
        func = p.run(func, options)
    raise AssertionError("no simplify pass")


def _funcs() -> list[ir.Func]:
    pool = workloads.get("pool_chain", height=16, width=16, channels=8).func
    sch = (
        Schedule(pool).split("y_1", [None, 4], names=["oi", "ii"]).split("c_1", [None, 4], names=["oc", "ic"])
    )
    sch = sch.reorder("oi", "oc", "ii", "x_1").compute_at("pool1", "oc").rolling_buffer("pool1")
    bottleneck = workloads.get("bottleneck", height=8, width=8, cin=4, expand=8).func
    return [_before_simplify(sch.func), _before_simplify(bottleneck)]


@pytest.mark.parametrize("func", _funcs(), ids=["pool_chain", "bottleneck"])
def test_remembered_forms_are_the_walked_forms(func: ir.Func) -> None:
    simplifier = Simplifier(Analyzer())
    simplifier.visit(func.body)
    assert simplifier.known
    for expr, form in simplifier.known.values():
        walked = linear._decompose(expr, True)
        assert walked == form and all(a[0] is b[0] for a, b in zip(walked.coeffs, form.coeffs)), str(expr)
        assert linear.sum_form_known(expr, simplifier.known) == linear.sum_form(expr)
