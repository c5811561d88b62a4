"""The cascade family's register tiles (``regtile_<stage>``): which stages have one, the knob's
conditions, the schedule (outlined SLP nest, accumulators in registers) and its numbers."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from autotune.codegen import build, generate_source
from autotune.config import SPACES_DIR
from autotune.lowering import lower
from autotune.measure import empty_outputs, reference_outputs
from autotune.memory import Pool
from autotune.search.space import Knob, load_space
from autotune.search.space_cascade import analyze_cascade
from autotune.workloads import get

POOLS = (Pool("dtcm", 64 * 1024), Pool("sram", 2 * 1024**2))


def _small() -> Any:
    return get("bottleneck", height=8, width=8, cin=4, expand=8)


def test_contractions_have_register_tiles_windows_do_not() -> None:
    # expand and project are 1x1 convolutions; depthwise slides a window (jam serves it)
    full = analyze_cascade(get("bottleneck", height=112, width=112).func)
    assert full.tileable == (("expand", 48), ("project", 16))  # 96 channels: tiles of 48 (codegen unrolls <= 64)
    assert analyze_cascade(get("pool_chain").func).tileable == ()
    assert analyze_cascade(get("tiny_cnn").func).tileable == (("pw1", 32), ("pw2", 64))


def test_register_tile_knobs_and_their_conditions() -> None:
    space = load_space(SPACES_DIR / "cascade.yaml", _small(), POOLS)
    knobs = {k.name: k for k in space.knobs}
    assert knobs["regtile_expand"] == Knob("regtile_expand", (0, 1, 2, 4, 8), (("unroll_expand", (False,)),))
    assert knobs["regtile_project"] == Knob("regtile_project", (0, 1, 2, 4, 8), (("unroll_project", (False,)),))
    # the last stage's vector mark means nothing once its loops are a register tile
    assert knobs["vectorize"].requires == (("regtile_project", (0,)),)
    assert not knobs["regtile_expand"].active({"unroll_expand": True})


def _tiled_source() -> tuple[Any, Any, str]:
    wl = _small()
    space = load_space(SPACES_DIR / "cascade.yaml", wl, POOLS)
    values = space.default() | {
        "tile_rows": 1,
        "at_expand": "tile",
        "at_depthwise": "tile",
        "mode_expand": "rolling",
        "regtile_expand": 4,
        "regtile_project": 2,
    }
    lowered = lower(space.apply(wl.func, values).func, pools=POOLS)
    return wl, lowered, generate_source(lowered.func).text


def test_register_tile_source(golden: Any) -> None:
    _, _, text = _tiled_source()
    golden("search/space_bottleneck_regtile", text)
    assert "# outlined: bottleneck_x_0 (vectorizer: slp)\n# outlined: bottleneck_x_2_0 (vectorizer: slp)\n" in text
    project = text[text.index("def bottleneck_x_2_0") : text.index("def bottleneck(")]
    body = project[project.index("for rc_1") :]
    # 2 columns x 4 channels of accumulators; depthwise stores its relu6 (clamp_at_producer): no clamp here
    assert len({line.split(" = ")[0].strip() for line in body.splitlines() if "_acc_" in line.split(" = ")[0]}) == 8
    assert "max(" not in body and "min(" not in body
    assert "depthwise_data[np.uintp(x_1 * 8 + c)] = min(max(depthwise_acc_0, _c0), _c1)" in text


@pytest.mark.slow
def test_register_tile_numbers() -> None:
    wl, lowered, _ = _tiled_source()
    kernel = build(lowered.func, lowered.plan)
    inputs = wl.make_inputs(0)
    outputs = empty_outputs(lowered.func)
    kernel(*inputs, *outputs)
    np.testing.assert_allclose(outputs[0], reference_outputs(wl, inputs)[0], rtol=1e-4, atol=1e-4)


def test_an_inactive_register_tile_changes_nothing() -> None:
    # regtile needs unroll off; a sampler that sets both (every knob drawn) gets the unrolled schedule
    wl = _small()
    space = load_space(SPACES_DIR / "cascade.yaml", wl, POOLS)
    unrolled = space.default() | {"unroll_project": True, "vectorize": True}
    assert str(space.apply(wl.func, unrolled | {"regtile_project": 8}).func) == str(space.apply(wl.func, unrolled).func)
