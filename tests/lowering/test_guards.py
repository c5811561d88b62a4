"""clamp_guarded_loads: a select's loads stay inside their buffers, so codegen selects without a branch."""

from __future__ import annotations

import numpy as np
import pytest

from autotune import ir, te
from autotune.codegen import build, generate_source
from autotune.lowering import lower
from autotune.lowering.guards import clamp_guarded_loads
from autotune.measure import empty_outputs
from autotune.schedule import Schedule
from autotune.workloads import ops


def _padded_conv() -> ir.Func:
    data = te.placeholder((1, 5, 5, 4), "float32", name="data")
    weight = te.placeholder((3, 3, 4, 8), "float32", name="weight")
    return te.create_func([data, weight], [ops.conv2d_nhwc(data, weight, padding=1, name="conv")], name="conv")


def _select_loads(func: ir.Func) -> list[ir.BufferLoad]:
    return [load for s in ir.collect(func.body, ir.Select) for load in ir.collect(s.true_value, ir.BufferLoad)]


def test_only_the_indices_that_may_leave_their_dimension_are_clamped() -> None:
    func = lower(_padded_conv(), until="lower_blocks").func
    clamped = clamp_guarded_loads(func)
    (load,) = _select_loads(clamped)
    assert [str(i) for i in load.indices] == [
        "n",  # 0..0 of 1
        "T.max(T.min(y + rh - 1, 4), 0)",  # -1..5 of 5
        "T.max(T.min(x + rw - 1, 4), 0)",
        "rc",  # 0..3 of 4: neighbouring channels stay neighbouring addresses
    ]
    # loads outside selects (the weight, the accumulator) are left as they are
    outside = {str(s) for s in ir.collect(clamped.body, ir.BufferLoad)} - {str(load)}
    assert outside == {str(s) for s in ir.collect(func.body, ir.BufferLoad)} - {str(_select_loads(func)[0])}


def test_a_select_whose_loads_stay_in_bounds_is_left_alone() -> None:
    a, b = ir.decl_buffer("A", (6,)), ir.decl_buffer("B", (4,))
    i = ir.Var("i")
    body = ir.For(i, ir.const(0), ir.const(4), ir.ForKind.SERIAL, ir.BufferStore(b, ir.select(i >= 1, a[i + 2], 0.0), (i,)))
    func = ir.Func("f", (a, b), body)
    assert clamp_guarded_loads(func) == func


def test_the_pass_runs_after_lower_blocks() -> None:
    func = _padded_conv()
    before, after = (lower(func, until=name).func for name in ("lower_blocks", "clamp_guarded_loads"))
    assert str(clamp_guarded_loads(before)) == str(after) != str(before)


@pytest.mark.slow
def test_a_padded_register_tile_selects_without_branches_and_equals_numpy() -> None:
    func = _padded_conv()
    sch = Schedule(func)
    _, _, x, o, rh, rw, rc = sch.get_loops("conv")
    sch = sch.reorder(x, rh, rw, rc, o).unroll(o)
    lowered = lower(sch.func, verify=True)
    text = generate_source(lowered.func).text
    assert "from autotune.codegen.runtime import select as _select" in text
    assert text.count("cond = ") == 1 and text.count("_select(cond, ") == 1  # 8 channels, one column: one select
    # the condition's comparisons joined with & (no short-circuit branches)
    assert "cond = ((y + rh - 1 >= 0) & (y + rh - 1 < 5) & (x + rw - 1 >= 0) & (x + rw - 1 < 5))" in text
    assert " if " not in text.split("for rc in range(4):")[1].split("conv_flat[")[0]
    rng = np.random.default_rng(3)
    data = rng.standard_normal((1, 5, 5, 4)).astype(np.float32)
    weight = rng.standard_normal((3, 3, 4, 8)).astype(np.float32)
    (out,) = empty_outputs(lowered.func)
    build(lowered.func, lowered.plan)(data, weight, out)
    padded = np.pad(data, ((0, 0), (1, 1), (1, 1), (0, 0)))
    ref = sum(padded[:, dy : dy + 5, dx : dx + 5, :] @ weight[dy, dx] for dy in range(3) for dx in range(3))
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)
