"""The built-in chains: parameters, stages, figures, and TE lowering == numpy reference."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from workloads_interp import run

from autotune import ir, workloads

F32 = "float32"

# name -> (params of func as (name, shape), stage names in order, flops, intermediate bytes)
DEFAULTS: dict[str, tuple[list[tuple[str, tuple[int, ...]]], list[str], int, int]] = {
    "pool_chain": (
        [("data", (1, 132, 132, 64)), ("pool2", (1, 128, 128, 64))],
        ["pool1", "pool2"],
        130 * 130 * 64 * 9 + 128 * 128 * 64 * 9,  # one max per window element
        1 * 130 * 130 * 64 * 4,  # 4,326,400
    ),
    "bottleneck": (
        [
            ("data", (1, 112, 112, 16)),
            ("w_expand", (1, 1, 16, 96)),
            ("w_depthwise", (3, 3, 96)),
            ("w_project", (1, 1, 96, 16)),
            ("project", (1, 112, 112, 16)),
        ],
        ["expand", "depthwise", "project"],
        # two pointwise convs, a 3x3 depthwise (multiply-adds count 2), two relu6 (2 each)
        2 * 112 * 112 * 96 * 16 * 2 + 2 * 112 * 112 * 96 * 9 + 2 * 2 * 112 * 112 * 96,
        2 * 112 * 112 * 96 * 4,
    ),
    "resize_conv": (
        [("data", (1, 16, 512, 512)), ("w_conv", (16, 16, 3, 3)), ("conv", (1, 16, 256, 256))],
        ["resize", "conv"],
        2 * 16 * 256 * 256 * 16 * 9,
        16 * 256 * 256 * 4,
    ),
    "matmul": (
        [("A", (1024, 1024)), ("B", (1024, 1024)), ("matmul", (1024, 1024))],
        ["matmul"],
        2 * 1024**3,
        0,
    ),
    "tiny_cnn": (
        [
            ("data", (1, 96, 96, 3)),
            ("w_conv1", (3, 3, 3, 16)),
            ("w_dw1", (3, 3, 16)),
            ("w_pw1", (1, 1, 16, 32)),
            ("w_dw2", (3, 3, 32)),
            ("w_pw2", (1, 1, 32, 64)),
            ("w_fc", (10, 64)),
            ("fc", (1, 10)),
        ],
        ["conv1", "dw1", "pw1", "dw2", "pw2", "gap", "fc"],
        7_890_240,
        (48 * 48 * 16 * 2 + 48 * 48 * 32 + 24 * 24 * 32 + 24 * 24 * 64 + 64) * 4,
    ),
}

SMALL: dict[str, dict[str, int]] = {
    "pool_chain": {"height": 9, "width": 8, "channels": 3},
    "bottleneck": {"height": 6, "width": 5, "cin": 2, "expand": 4},
    "resize_conv": {"channels": 2, "height": 10, "width": 8},
    "matmul": {"m": 4, "n": 5, "k": 3},
    "tiny_cnn": {"height": 5, "width": 6},
}


def stage_names(func: ir.Func) -> list[str]:
    return [b.name for b in ir.collect(func.body, ir.Block) if b.name != "root"]


@pytest.mark.parametrize("name", sorted(DEFAULTS))
def test_defaults(name: str) -> None:
    params, stages, flops, inter = DEFAULTS[name]
    wl = workloads.get(name)
    assert [(b.name, b.const_shape()) for b in wl.func.params] == params
    assert all(b.dtype == F32 for b in wl.func.params)
    assert wl.func.num_outputs == 1
    assert wl.func.name == name
    assert stage_names(wl.func) == stages
    assert wl.flops == flops
    assert wl.intermediate_bytes == inter
    assert wl.params == workloads.describe(name)


def test_pool_chain_intermediate_is_one_130x130_tile() -> None:
    assert workloads.get("pool_chain").intermediate_bytes == 4_326_400


@pytest.mark.parametrize("name", sorted(SMALL))
def test_lowered_chain_matches_reference(name: str) -> None:
    """Interpreting the lowered TE gives the numpy reference's answer."""
    wl = workloads.get(name, **SMALL[name])
    inputs = wl.make_inputs(seed=1)
    want = wl.reference(*inputs)
    got = run(wl.func, *inputs)
    assert isinstance(want, tuple) and len(want) == len(got) == 1
    for w, g, buf in zip(want, got, wl.func.outputs):
        assert w.dtype == np.float32 and w.shape == buf.const_shape()
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", sorted(SMALL))
def test_small_chain_golden(name: str, golden: Any) -> None:
    golden(f"workloads/chain_{name}", str(workloads.get(name, **SMALL[name]).func))


def test_bottleneck_fuses_relu6_into_the_readers() -> None:
    func = workloads.get("bottleneck", **SMALL["bottleneck"]).func
    blocks = {b.name: b for b in ir.collect(func.body, ir.Block)}
    text = {name: str(b.body) for name, b in blocks.items()}
    assert "T.min(T.max(expand[" in text["depthwise"]
    assert "T.min(T.max(depthwise[" in text["project"]
    assert "T.min" not in text["expand"]


def test_resize_conv_reads_even_pixels_with_float_index_math() -> None:
    func = workloads.get("resize_conv", channels=1, height=8, width=8).func
    resize = next(b for b in ir.collect(func.body, ir.Block) if b.name == "resize")
    text = str(resize.body)
    assert 'T.min(T.max(T.Cast("int32", T.floor(T.Cast("float32", v_y) * 2.0 + 0.5)), 0), 7)' in text
    assert 'T.min(T.max(T.Cast("int32", T.floor(T.Cast("float32", v_x) * 2.0 + 0.5)), 0), 7)' in text


def test_reference_leaves_its_inputs_alone() -> None:
    wl = workloads.get("pool_chain", **SMALL["pool_chain"])
    (x,) = wl.make_inputs(0)
    before = x.copy()
    wl.reference(x)
    np.testing.assert_array_equal(x, before)
