"""The gemm family's register tile with ``panel_order``: which loop is outer, where the packed B
panel is filled and how many private copies it has, the knob's condition, and the numbers."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from autotune import ir
from autotune.codegen import build
from autotune.config import SPACES_DIR
from autotune.lowering import lower
from autotune.measure import empty_outputs, reference_outputs
from autotune.memory import Pool
from autotune.search.space import Knob, load_space
from autotune.workloads import get

POOLS = (Pool("dtcm", 64 * 1024), Pool("sram", 2 * 1024**2))
TILED = {"register_tile": "4x16", "cache_b": True, "parallel": "outer"}


def _space() -> Any:
    wl = get("matmul", m=32, n=64, k=24)
    return wl, load_space(SPACES_DIR / "gemm.yaml", wl, POOLS)


def _loops(func: ir.Func) -> list[str]:
    return [f"{f.loop_var.name}:{f.kind}" for f in ir.collect(func.body, ir.For)]


def test_panel_order_is_a_knob_of_register_tiles_only() -> None:
    _, space = _space()
    knob = next(k for k in space.knobs if k.name == "panel_order")
    assert knob == Knob("panel_order", ("mn", "nm"), (("register_tile", ("4x16", "8x16", "4x32", "8x32")),), "layout")
    assert space.default()["panel_order"] == "mn"


def test_nm_fills_the_panel_once_per_column_panel() -> None:
    wl, space = _space()
    func = space.apply(wl.func, TILED | {"panel_order": "nm"}).func
    # the 4 column panels in two halves run in parallel, the panel loop; under it the panel (K x 16) is
    # filled (ax0_1, ax1_1) once, then the 8 row tiles all read it
    assert _loops(func)[:6] == [
        "j_0_0:parallel",
        "j_0_1:serial",
        "ax0_1:serial",
        "ax1_1:serial",
        "i_0:serial",
        "k:serial",
    ]
    lowered = lower(func, pools=POOLS)
    panels = [a for a in ir.collect(lowered.func.body, ir.Allocate) if a.data.name.startswith("B_global")]
    # one private panel per half: 2 x 24 x 16 float32
    assert [ir.as_int(e) for e in panels[0].extents] == [2 * 24 * 16]
    assert lowered.plan.total_peak == 2 * 24 * 16 * 4


def test_mn_splits_the_row_tiles_in_halves() -> None:
    wl, space = _space()
    func = space.apply(wl.func, TILED | {"panel_order": "mn"}).func
    # the panel is filled anew for every tile (under j_0); one private copy per half, not one per row tile
    assert _loops(func)[:5] == [
        "i_0_0:parallel",
        "i_0_1:serial",
        "j_0:serial",
        "ax0_1:serial",
        "ax1_1:serial",
    ]
    assert lower(func, pools=POOLS).plan.total_peak == 2 * 24 * 16 * 4


@pytest.mark.slow
@pytest.mark.parametrize("order", ["mn", "nm"])
def test_panel_orders_compute_the_product(order: str) -> None:
    wl, space = _space()
    lowered = lower(space.apply(wl.func, TILED | {"panel_order": order}).func, pools=POOLS)
    kernel = build(lowered.func, lowered.plan)
    inputs = wl.make_inputs(0)
    outputs = empty_outputs(lowered.func)
    kernel(*inputs, *outputs)
    np.testing.assert_allclose(outputs[0], reference_outputs(wl, inputs)[0], rtol=1e-4, atol=1e-4)
