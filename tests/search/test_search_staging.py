"""Operand staging (the ``staging`` rule): a tile's rows of a chain input copied at the tile loop,
into a pool of its own, double-buffered, on chains written here."""

from __future__ import annotations

import numpy as np
import pytest

from autotune import te
from autotune.analysis.chain import analyze_cascade
from autotune.codegen import build, generate_source
from autotune.config import SPACES_DIR
from autotune.lowering import lower
from autotune.measure import empty_outputs, reference_outputs
from autotune.memory import Pool
from autotune.search.space import Knob, load_space
from autotune.workloads import Workload, intermediate_bytes, ops

POOLS = (Pool("dtcm", 64 * 1024), Pool("sram", 2 * 1024**2))


def _conv_conv(size: int = 8, channels: int = 8) -> Workload:
    """conv 3x3 pad 1 -> relu (read by the second conv) -> conv 3x3 pad 1, NHWC."""
    data = te.placeholder((1, size, size, channels), "float32", name="data")
    w1 = te.placeholder((3, 3, channels, channels), "float32", name="w1")
    w2 = te.placeholder((3, 3, channels, channels), "float32", name="w2")
    conv1 = ops.conv2d_nhwc(data, w1, padding=1, name="conv1")
    conv2 = ops.conv2d_nhwc(conv1, w2, padding=1, name="conv2", data_act=ops.relu_expr)
    func = te.create_func([data, w1, w2], [conv2], name="conv_conv")

    def conv(x: np.ndarray, w: np.ndarray) -> np.ndarray:
        p = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
        return sum(
            np.einsum("nhwc,co->nhwo", p[:, i : i + size, j : j + size], w[i, j])
            for i in range(3)
            for j in range(3)
        )

    def reference(x: np.ndarray, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray]:
        return (conv(np.maximum(conv(x, a), 0), b).astype(np.float32),)

    flops = 2 * 2 * size * size * 9 * channels * channels
    return Workload("conv_conv", {}, func, reference, "", flops, intermediate_bytes(func), (1.0, 0.1, 0.1))


def test_a_stage_reading_a_chain_input_through_its_rows_can_stage_it() -> None:
    """conv1 reads ``data`` through a window of rows: staged at the tile loop when conv1 is there and
    reads ``data`` itself (no padded copy); double-buffered or not; its pool a knob."""
    wl = _conv_conv()
    assert analyze_cascade(wl.func).stageable == (("conv1", "data"),)  # w1, w2: no rows
    knobs = {k.name: k for k in load_space(SPACES_DIR / "cascade.yaml", wl, POOLS).knobs}
    assert knobs["stage_conv1_data"] == Knob(
        "stage_conv1_data",
        ("none", "tile"),
        (("at_conv1", ("tile",)), ("pad_conv1", ("inline",))),
        "location",
    )
    assert knobs["dbuf_conv1_data"] == Knob(
        "dbuf_conv1_data",
        (False, True),
        (("stage_conv1_data", ("tile",)),),
        "location",
    )
    assert knobs["pool_conv1_data"] == Knob(
        "pool_conv1_data", ("dtcm", "sram"), (("stage_conv1_data", ("tile",)),), "pool"
    )
    # without pools there is nowhere else to put a tile: no staging
    assert not [k for k in load_space(SPACES_DIR / "cascade.yaml", wl).knobs if k.name.startswith("stage_")]


@pytest.mark.slow
@pytest.mark.parametrize("double", [False, True], ids=["staged", "double_buffered"])
@pytest.mark.parametrize("regtile", [0, 2], ids=["no_tile", "register_tile"])
def test_staged_inputs_hold_a_tiles_rows_in_their_pool_and_equal_numpy(double: bool, regtile: int) -> None:
    """With a register tile, conv1's nest is compiled as a function of its own (SLP) that takes the
    double buffer's two slots as a tuple of two arrays."""
    wl = _conv_conv()
    space = load_space(SPACES_DIR / "cascade.yaml", wl, POOLS)
    values = space.default() | {
        "tile_rows": 2,
        "at_conv1": "tile",
        "stage_conv1_data": "tile",
        "dbuf_conv1_data": double,
        "pool_conv1_data": "sram",
        "parallel": "outer",
        "regtile_conv1": regtile,
    }
    lowered = lower(space.apply(wl.func, values).func, pools=POOLS)
    text = str(lowered.func)
    # per parallel part, the 6 input rows (2 rows + conv1's halo + conv2's) x 8 x 8 of one tile; two slots
    alloc = (
        'data_global_data = T.allocate([2, 768], "float32", annotations={"candidate_memory_pools": ["sram"], '
        '"offset": [0, 3072], "pool": ["sram", "sram"]})'
        if double
        else 'data_global_data = T.allocate([768], "float32", annotations={"candidate_memory_pools": ["sram"], '
        '"offset": 0, "pool": "sram"})'
    )
    assert alloc in text
    assert "data_flat[" not in text.split("for y in")[1]  # conv1 reads only the staged copy
    source = generate_source(lowered.func).text
    assert ("outlined: conv_conv_" in source) == bool(regtile)
    # the two slots reach the outlined register tile as a tuple of banks, and the parallel loop's body
    nests = [line for line in source.splitlines() if line.startswith("@_nest(") and "linked=False" not in line]
    assert any("UniTuple(float32[::1], 2)" in line for line in nests) == (double and bool(regtile)), source
    body = [line for line in source.splitlines() if line.startswith("@_nest(") and "linked=False" in line]
    assert len(body) == 1 and ("UniTuple(float32[::1], 2)" in body[0]) == double, source
    inputs = wl.make_inputs(0)
    outputs = empty_outputs(lowered.func)
    build(lowered.func, lowered.plan)(*inputs, *outputs)
    np.testing.assert_allclose(outputs[0], reference_outputs(wl, inputs)[0], rtol=1e-4, atol=1e-4)


def test_a_padded_copy_leaves_nothing_to_stage() -> None:
    """With ``pad_conv1: copy`` conv1 reads the padded copy (itself computed per tile), not ``data``:
    ``stage_conv1_data`` is inactive and the schedule stages nothing."""
    wl = _conv_conv()
    space = load_space(SPACES_DIR / "cascade.yaml", wl, POOLS)
    values = space.default() | {"at_conv1": "tile", "pad_conv1": "copy", "stage_conv1_data": "tile"}
    assert "stage_conv1_data" not in space.active_values(values)
    text = str(space.apply(wl.func, values).func)
    assert "data_pad" in text and "data_global" not in text
