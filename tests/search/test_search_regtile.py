"""The cascade family's register tiles (``regtile_<stage>``): which stages have one, the knob's
conditions, the schedule (outlined SLP nest, accumulators in registers) and its numbers."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from autotune import ir, te
from autotune.codegen import build, generate_source
from autotune.config import SPACES_DIR
from autotune.errors import AutotuneError
from autotune.lowering import lower
from autotune.measure import empty_outputs, reference_outputs
from autotune.memory import Pool
from autotune.search.space import Knob, load_space
from autotune.search.space_cascade import analyze_cascade
from autotune.workloads import Workload, get, intermediate_bytes, ops

POOLS = (Pool("dtcm", 64 * 1024), Pool("sram", 2 * 1024**2))


def _small() -> Any:
    return get("bottleneck", height=8, width=8, cin=4, expand=8)


def test_contractions_have_register_tiles_max_windows_do_not() -> None:
    # expand and project are 1x1 convolutions, depthwise a 3x3 window of products: every contraction
    # has a tile (its window slides along the columns, never the channels); a max pool has none (jam)
    full = analyze_cascade(get("bottleneck", height=112, width=112).func)
    # 96 channels: tiles of 48 (codegen unrolls <= 64)
    assert full.tileable == (("expand", 48), ("depthwise", 48), ("project", 16))
    assert analyze_cascade(get("pool_chain").func).tileable == ()
    tiny = analyze_cascade(get("tiny_cnn").func).tileable
    assert tiny == (("conv1", 16), ("dw1", 16), ("pw1", 32), ("dw2", 32), ("pw2", 64))


def test_register_tile_knobs_and_their_conditions() -> None:
    space = load_space(SPACES_DIR / "cascade.yaml", _small(), POOLS)
    knobs = {k.name: k for k in space.knobs}
    assert knobs["regtile_expand"] == Knob("regtile_expand", (0, 1, 2, 4, 8, 16), kind="tile")
    assert knobs["regtile_project"] == Knob("regtile_project", (0, 1, 2, 4, 8, 16), kind="tile")
    # a tiled stage is not unrolled: unroll is the conditional knob, so a sampler draws the tile first
    assert knobs["unroll_expand"] == Knob(
        "unroll_expand", (False, True), (("regtile_expand", (0,)),), "unroll"
    )
    assert knobs["unroll_project"] == Knob(
        "unroll_project", (False, True), (("regtile_project", (0,)),), "unroll"
    )
    # the last stage's vector mark means nothing once its loops are a register tile
    assert knobs["vectorize"].requires == (("regtile_project", (0,)),)
    assert not knobs["unroll_expand"].active({"regtile_expand": 4})
    order = [k.name for k in space.search_order()]
    assert order.index("regtile_expand") < order.index("unroll_expand")
    assert order.index("regtile_project") < order.index("unroll_project") < order.index("vectorize")


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
    assert (
        "# outlined: bottleneck_x_0 (vectorizer: slp)\n# outlined: bottleneck_x_2_0 (vectorizer: slp)\n"
        in text
    )
    start = text.index("def bottleneck_x_2_0")
    project = text[start : text.index("\n@", start)]
    body = project[project.index("for rc_1") :]
    # 2 columns x 4 channels of accumulators; depthwise stores its relu6 (clamp_at_producer): no clamp here
    assert (
        len({line.split(" = ")[0].strip() for line in body.splitlines() if "_acc_" in line.split(" = ")[0]})
        == 8
    )
    assert "max(" not in body and "min(" not in body
    assert "depthwise_data[np.uintp(x_1 * 8 + c)] = min(max(depthwise_acc_0, _c0), _c1)" in text


def test_an_inactive_unroll_changes_nothing() -> None:
    # unroll needs regtile 0; a sampler that sets both (every knob drawn) gets the register tile
    wl = _small()
    space = load_space(SPACES_DIR / "cascade.yaml", wl, POOLS)
    tiled = space.default() | {"regtile_project": 8}
    assert str(space.apply(wl.func, tiled | {"unroll_project": True}).func) == str(
        space.apply(wl.func, tiled).func
    )
    assert str(space.apply(wl.func, tiled).func) != str(space.apply(wl.func, space.default()).func)


def _strip_values(space: Any, regtile: int) -> dict[str, Any]:
    # expand computed per 2-row tile and 4-column strip: its 6 columns include the strip's halo,
    # guarded against the image border (columns -1 and 8)
    return space.default() | {
        "tile_rows": 2,
        "at_expand": "tile",
        "at_depthwise": "tile",
        "mode_expand": "rolling",
        "strip": 4,
        "regtile_expand": regtile,
    }


def _strip_tiled() -> tuple[Any, Any, str]:
    wl = _small()
    space = load_space(SPACES_DIR / "cascade.yaml", wl, POOLS)
    lowered = lower(space.apply(wl.func, _strip_values(space, 1)).func, pools=POOLS)
    return wl, lowered, generate_source(lowered.func).text


def test_one_column_tile_under_a_strip_guards_the_column_outside_the_reduction() -> None:
    _, _, text = _strip_tiled()
    assert "# outlined: bottleneck_x (vectorizer: slp)\n" in text
    start = text.index("def bottleneck_x(")
    expand = text[start : text.index("\n@", start)]
    lines = [line.strip() for line in expand.splitlines()[1:]]
    # the halo guard right below the column loop; the 8 accumulators, the reduction and the 8 stores in it
    assert lines[:2] == ["for x in range(6):", "if 0 <= x_2_0 * 4 + x - 1 and x_2_0 * 4 + x - 1 < 8:"]
    assert sum(line.startswith("if ") for line in lines) == 1
    assert lines.index("for rc in range(4):") > lines.index("expand_acc_7 = _c0")
    stores = [line for line in lines if line.startswith("expand_data[")]
    assert len(stores) == 8 and all(
        s.endswith(f"min(max(expand_acc_{i}, _c0), _c1)") for i, s in enumerate(stores)
    )


def _wide_strip_tiled() -> tuple[Any, Any, str]:
    wl = _small()
    space = load_space(SPACES_DIR / "cascade.yaml", wl, POOLS)
    lowered = lower(space.apply(wl.func, _strip_values(space, 2)).func, pools=POOLS)
    return wl, lowered, generate_source(lowered.func).text


def test_a_wider_tile_under_a_strip_keeps_its_accumulators_and_guards_its_columns() -> None:
    # two columns, each guarded against the image border: the accumulators start unguarded, the
    # updates and the copy-out keep each column's guard
    _, lowered, _ = _wide_strip_tiled()
    text = str(lowered.func)
    guard = "if 0 <= x_2_0 * 4 + x_0 * 2 + x_1_1 - 1 and x_2_0 * 4 + x_0 * 2 + x_1_1 - 1 < 8:"
    assert text.count("expand_acc = T.decl_buffer((16,)") == 1 and text.count(guard) == 2
    tile = text[text.index("expand_acc = T.decl_buffer") : text.index("for y_1 in")]
    assert (
        "expand[" not in tile[: tile.index("for rc in")]
        and "expand[" not in tile[tile.index("for rc in") : tile.rindex(guard)]
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    "source",
    [_tiled_source, _strip_tiled, _wide_strip_tiled],
    ids=["tiles", "one_column_under_a_strip", "two_under_a_strip"],
)
def test_register_tile_numbers(source: Callable[[], tuple[Any, Any, str]]) -> None:
    wl, lowered, _ = source()
    kernel = build(lowered.func, lowered.plan)
    inputs = wl.make_inputs(0)
    outputs = empty_outputs(lowered.func)
    kernel(*inputs, *outputs)
    np.testing.assert_allclose(outputs[0], reference_outputs(wl, inputs)[0], rtol=1e-4, atol=1e-4)


def _resnet_body(size: int = 6, channels: int = 8) -> Workload:
    """A chain written here, not a built-in: conv 3x3 pad 1 -> relu -> conv 3x3 pad 1, NHWC."""
    data = te.placeholder((1, size, size, channels), "float32", name="data")
    w1 = te.placeholder((3, 3, channels, channels), "float32", name="w1")
    w2 = te.placeholder((3, 3, channels, channels), "float32", name="w2")
    conv1 = ops.conv2d_nhwc(data, w1, padding=1, name="conv1")
    conv2 = ops.conv2d_nhwc(conv1, w2, padding=1, name="conv2", data_act=ops.relu_expr)
    func = te.create_func([data, w1, w2], [conv2], name="resnet_body")

    def conv(x: np.ndarray, w: np.ndarray) -> np.ndarray:
        p = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
        return sum(p[:, dy : dy + size, dx : dx + size, :] @ w[dy, dx] for dy in range(3) for dx in range(3))

    def reference(x: np.ndarray, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray]:
        return (conv(np.maximum(conv(x, a), 0), b).astype(np.float32),)

    flops = 2 * 2 * size * size * channels * 9 * channels
    return Workload("resnet_body", {}, func, reference, "", flops, intermediate_bytes(func), (1.0, 0.1, 0.1))


def test_a_users_3x3_convolutions_get_register_tiles() -> None:
    wl = _resnet_body()
    assert analyze_cascade(wl.func).tileable == (("conv1", 8), ("conv2", 8))
    knobs = {k.name: k for k in load_space(SPACES_DIR / "cascade.yaml", wl, POOLS).knobs}
    assert knobs["regtile_conv1"] == Knob("regtile_conv1", (0, 1, 2, 4, 8, 16), kind="tile")
    assert knobs["regtile_conv2"] == Knob("regtile_conv2", (0, 1, 2, 4, 8, 16), kind="tile")
    assert "chblock_conv1" not in knobs  # 8 channels: less than one 16-lane vector, one block


def test_a_register_tile_holds_any_block_of_whole_vectors_of_channels() -> None:
    """64 channels on a 512-bit target: blocks of 64, 32 or 16 (one vector); on a 256-bit one also 8.
    The columns offered fit the registers beside the smallest block; a wider block takes fewer."""
    from autotune.search.space_cascade import channel_blocks
    from autotune.search.target import Target

    avx2 = Target("znver3", 2, 256, 16)
    avx512 = Target("znver5", 2, 512, 32)
    assert channel_blocks(64, 64, avx512) == (64, 32, 16)
    assert channel_blocks(64, 64, avx2) == (64, 32, 16, 8)
    assert channel_blocks(96, 48, avx512) == (48, 32, 16)  # 96 = 2 x 48: codegen unrolls <= 64
    assert channel_blocks(8, 8, avx512) == (8,)
    wl = _resnet_body(channels=64)
    knobs = {k.name: k for k in load_space(SPACES_DIR / "cascade.yaml", wl, POOLS, avx512).knobs}
    assert knobs["chblock_conv1"] == Knob(
        "chblock_conv1", (64, 32, 16), (("regtile_conv1", (1, 2, 4, 8, 16)),), "tile"
    )
    narrow = {k.name: k for k in load_space(SPACES_DIR / "cascade.yaml", wl, POOLS, avx2).knobs}
    assert narrow["regtile_conv1"].choices == (0, 1, 2, 4, 8, 16)  # 16 x 8 channels = 128 accumulators
    assert narrow["chblock_conv1"].choices == (64, 32, 16, 8)


def test_a_register_tile_takes_the_columns_that_fit_beside_its_block() -> None:
    from autotune.search.target import Target

    wl = _resnet_body(size=16, channels=64)
    avx2 = Target("znver3", 2, 256, 16)
    space = load_space(SPACES_DIR / "cascade.yaml", wl, POOLS, avx2)
    base = space.default() | {"tile_rows": 2, "regtile_conv2": 16}
    # 128 accumulators: 16 columns of 8 channels, or 2 columns of 64 (the tile is split that way)
    for block, columns in ((8, 16), (64, 2)):
        sch = space.apply(wl.func, base | {"chblock_conv2": block})
        splits = [dict(s.args)["factors"] for s in sch.trace if s.op == "split"]
        assert [None, columns] in [list(f) for f in splits] and (
            [None, block] in [list(f) for f in splits]
        ) == (block < 64)


@pytest.mark.slow
def test_a_users_3x3_register_tiles_equal_numpy() -> None:
    wl = _resnet_body()
    space = load_space(SPACES_DIR / "cascade.yaml", wl, POOLS)
    values = space.default() | {"tile_rows": 2, "at_conv1": "tile", "regtile_conv1": 2, "regtile_conv2": 4}
    lowered = lower(space.apply(wl.func, values).func, pools=POOLS)
    # both tiles keep their accumulators over rh, rw and rc: the stage's output is not touched inside
    accs = [
        a
        for a in ir.collect(lowered.func.body, ir.Allocate)
        if ir.ann_get(a.annotations, "scope", "") == "local"
    ]
    assert len(accs) == 2
    for acc in accs:
        rh = next(f for f in ir.collect(acc.body, ir.For) if f.loop_var.name.startswith("rh"))
        acc_name = next(d.buffer.name for d in ir.collect(acc.body, ir.DeclBuffer))
        touched = {n.buffer.name for n in ir.collect(rh, (ir.BufferLoad, ir.BufferStore))}
        assert acc_name in touched and acc_name.removesuffix("_acc") not in touched, (acc_name, touched)
    inputs = wl.make_inputs(0)
    outputs = empty_outputs(lowered.func)
    build(lowered.func, lowered.plan)(*inputs, *outputs)
    np.testing.assert_allclose(outputs[0], wl.reference(*inputs)[0], rtol=1e-4, atol=1e-4)


def test_a_users_padded_convolutions_get_pad_knobs() -> None:
    wl = _resnet_body()
    c = analyze_cascade(wl.func)
    # conv1 pads the input (no producer in the chain), conv2 pads relu(conv1), which conv1 writes
    assert c.padded == (("conv1", ("data",), ()), ("conv2", ("conv1",), ("conv1",)))
    knobs = {k.name: k for k in load_space(SPACES_DIR / "cascade.yaml", wl, POOLS).knobs}
    assert knobs["pad_conv2"] == Knob("pad_conv2", ("inline", "copy"), kind="layout")
    # the copy's place is a choice only while conv1 stays at root: with conv1 at the tile loop, so is the copy
    assert knobs["padat_conv2"].requires == (("pad_conv2", ("copy",)), ("at_conv1", ("root",)))
    assert knobs["padat_conv1"].requires == (("pad_conv1", ("copy",)), ("at_conv1", ("tile",)))


@pytest.mark.slow
def test_register_tiles_over_padded_copies_at_the_tile_loop_equal_numpy() -> None:
    """Both convolutions read padded copies computed per 2-row tile (the input's and relu(conv1)'s):
    the tiles' reductions hold no select, and the result equals numpy."""
    wl = _resnet_body()
    space = load_space(SPACES_DIR / "cascade.yaml", wl, POOLS)
    values = space.default() | {
        "tile_rows": 2, "at_conv1": "tile", "regtile_conv1": 2, "regtile_conv2": 2,
        "pad_conv1": "copy", "padat_conv1": "tile", "pad_conv2": "copy",
    }  # fmt: skip
    sch = space.apply(wl.func, values)
    assert [s.op for s in sch.trace].count("hoist_padding") == 2
    lowered = lower(sch.func, pools=POOLS)
    for loop in ir.collect(lowered.func.body, ir.For):
        if loop.loop_var.name.startswith("rh"):
            assert not ir.collect(loop, ir.Select), loop.loop_var.name
    pads = {d.buffer.name: d.buffer.const_shape() for d in ir.collect(lowered.func.body, ir.DeclBuffer)}
    # a 2-row tile of conv2 needs 4 rows of relu(conv1), which need 6 rows of the input, each 8 wide
    assert pads["conv1_pad"] == (4 * 8 * 8,) and pads["data_pad"] == (6 * 8 * 8,)
    inputs = wl.make_inputs(0)
    outputs = empty_outputs(lowered.func)
    build(lowered.func, lowered.plan)(*inputs, *outputs)
    np.testing.assert_allclose(outputs[0], reference_outputs(wl, inputs)[0], rtol=1e-4, atol=1e-4)


@pytest.mark.slow
def test_a_3x3_tile_under_a_strip_accumulates_over_its_whole_window() -> None:
    """conv1 computed per 2-row tile and 4-column strip (6 columns with the halo, guarded against the
    image border) with a 2-column tile: the inits leave rh and rw through the column guard, so the
    accumulators live over rh, rw and rc, and the result equals numpy."""
    wl = _resnet_body(size=8, channels=4)
    space = load_space(SPACES_DIR / "cascade.yaml", wl, POOLS)
    values = space.default() | {"tile_rows": 2, "at_conv1": "tile", "strip": 4, "regtile_conv1": 2}
    lowered = lower(space.apply(wl.func, values).func, pools=POOLS)
    acc = next(a for a in ir.collect(lowered.func.body, ir.Allocate) if a.data.name.startswith("conv1_acc"))
    rh = next(f for f in ir.collect(acc.body, ir.For) if f.loop_var.name == "rh")
    assert {n.buffer.name for n in ir.collect(rh, (ir.BufferLoad, ir.BufferStore))} >= {"conv1_acc"}
    assert "conv1" not in {n.buffer.name for n in ir.collect(rh, (ir.BufferLoad, ir.BufferStore))}
    inputs = wl.make_inputs(0)
    outputs = empty_outputs(lowered.func)
    build(lowered.func, lowered.plan)(*inputs, *outputs)
    np.testing.assert_allclose(outputs[0], reference_outputs(wl, inputs)[0], rtol=1e-4, atol=1e-4)


def _mlp(rows: int = 8, features: int = 16, hidden: int = 128) -> Workload:
    """A chain written here: dense features -> hidden + bias, relu, dense hidden -> features."""
    x = te.placeholder((rows, features), "float32", name="x")
    w1 = te.placeholder((hidden, features), "float32", name="w1")
    b1 = te.placeholder((hidden,), "float32", name="b1")
    w2 = te.placeholder((features, hidden), "float32", name="w2")
    h = ops.dense(x, w1, b1, name="fc1")
    out = ops.dense(h, w2, name="fc2", data_act=ops.relu_expr)
    func = te.create_func([x, w1, b1, w2], [out], name="mlp")

    def reference(x: np.ndarray, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> tuple[np.ndarray]:
        return ((np.maximum(x @ a.T + b, 0) @ c.T).astype(np.float32),)

    flops = 2 * rows * hidden * features * 2
    return Workload("mlp", {}, func, reference, "", flops, intermediate_bytes(func), (1.0, 0.25, 0.1, 0.1))


def test_dense_layers_get_tiles_over_their_rows_with_packed_weights() -> None:
    """A dense layer has no column loop: its own rows stand for the columns, and its weight [O, K],
    read across the channels with a stride of K, is copied with the channels last."""
    c = analyze_cascade(_mlp().func)
    assert c.tileable == (("fc1", 64), ("fc2", 16)) and c.row_tiled == ("fc1", "fc2")
    assert c.packable == ("fc1", "fc2")
    # x[i, k] * w1[o, k]: every operand is contiguous along k, so a tile may vectorise k instead
    assert c.dot_tileable == ("fc1", "fc2")
    knobs = {k.name: k for k in load_space(SPACES_DIR / "cascade.yaml", _mlp(), POOLS).knobs}
    assert knobs["regtile_fc1"].requires == (("tile_rows", (2, 4, 8)),)  # rows in the tile loop
    tiles = (1, 2, 4, 8, 16)
    assert knobs["dot_fc1"] == Knob("dot_fc1", (0, 1, 2, 4, 8), (("regtile_fc1", tiles),), "tile")
    # 128 channels in blocks of 64 (or 32, 16): the copy can be made per block, for a tile over channels
    over_channels = (("regtile_fc1", tiles), ("dot_fc1", (0,)))
    assert knobs["pack_fc1"] == Knob("pack_fc1", ("block", "root"), over_channels, "location")
    assert knobs["chblock_fc1"] == Knob("chblock_fc1", (64, 32, 16), over_channels, "tile")
    assert "pack_fc2" not in knobs  # 16 channels, one block: the copy is whole


def test_a_convolution_gets_no_dot_product_tile() -> None:
    """An NHWC convolution's weight [KH, KW, C, O] is not contiguous along its innermost reduction
    (the input channels): its tile vectorises the output channels."""
    c = analyze_cascade(_resnet_body().func)
    assert c.tileable and c.dot_tileable == ()
    names = {k.name for k in load_space(SPACES_DIR / "cascade.yaml", _resnet_body(), POOLS).knobs}
    assert not {n for n in names if n.startswith("dot_")}


@pytest.mark.slow
def test_dot_product_tiles_vectorise_the_reduction_with_no_copy_and_equal_numpy() -> None:
    """``dot_<stage>``: rows x channels accumulators in the innermost loop over k, each operand read
    in place (no copy of a weight), the tile's rows clamped to what the vector registers hold."""
    wl = _mlp()
    space = load_space(SPACES_DIR / "cascade.yaml", wl, POOLS)
    values = space.default() | {
        "tile_rows": 4,
        "regtile_fc1": 4,
        "dot_fc1": 4,
        "regtile_fc2": 16,
        "dot_fc2": 8,
    }
    lowered = lower(space.apply(wl.func, values).func, pools=POOLS)
    text = str(lowered.func)
    assert "_global" not in text  # no copy of w1 or w2
    # the reduction loop k holds the unrolled tile: 4 rows x 4 channels of fc1; fc2's 16 rows x 8
    # channels would need 152 vector registers, 2 rows x 8 channels fit the 32 of AVX-512
    tiles = {
        f.loop_var.name: [ir.as_int(g.extent) for g in ir.collect(f.body, ir.For)]
        for f in ir.collect(lowered.func.body, ir.For)
        if f.loop_var.name in ("k", "k_1")
    }
    assert tiles == {"k": [4, 4], "k_1": [2, 8]}
    assert (
        "fc1_acc[i_1_1 * 4 + o_1_1] = fc1_acc[i_1_1 * 4 + o_1_1] + x_flat[i_2_0 * 64 + i_1_1 * 16 + k]"
        " * w1_flat[o_0 * 64 + o_1_1 * 16 + k]"
    ) in text
    inputs = wl.make_inputs(0)
    outputs = empty_outputs(lowered.func)
    build(lowered.func, lowered.plan)(*inputs, *outputs)
    np.testing.assert_allclose(outputs[0], reference_outputs(wl, inputs)[0], rtol=1e-4, atol=1e-4)


@pytest.mark.slow
@pytest.mark.parametrize("pack", ["block", "root"])
def test_dense_tiles_over_packed_weights_equal_numpy(pack: str) -> None:
    wl = _mlp()
    space = load_space(SPACES_DIR / "cascade.yaml", wl, POOLS)
    values = space.default() | {"tile_rows": 4, "regtile_fc1": 2, "regtile_fc2": 4, "pack_fc1": pack}
    lowered = lower(space.apply(wl.func, values).func, pools=POOLS)
    text = str(lowered.func)
    # the tiles read the copies along the channels: w1 per block of 64 (or whole), w2 whole
    w1_row = 64 if pack == "block" else 128
    assert re.search(rf"\* w1_global\[k \* {w1_row} \+ (o_0 \* 64 \+ )?o_1_1\]", text)
    assert "w2_global[k_1 * 16 + o_2]" in text
    inputs = wl.make_inputs(0)
    outputs = empty_outputs(lowered.func)
    build(lowered.func, lowered.plan)(*inputs, *outputs)
    np.testing.assert_allclose(outputs[0], reference_outputs(wl, inputs)[0], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("chain", [_resnet_body, _mlp], ids=["resnet_body", "mlp"])
def test_every_draw_of_a_users_chain_applies_and_lowers(chain: Callable[[], Workload]) -> None:
    """No combination of the knobs of a chain written here is refused by a primitive or by lowering
    (inactive knobs drawn too)."""
    import random

    wl = chain()
    space = load_space(SPACES_DIR / "cascade.yaml", wl, POOLS)
    big = tuple(Pool(p.name, 1 << 30) for p in POOLS)  # every draw fits: this is about refusals
    rng = random.Random(0)
    for _ in range(60):
        values = {k.name: rng.choice(k.choices) for k in space.knobs}
        try:
            lower(space.apply(wl.func, values).func, pools=big)
        except AutotuneError as err:
            pytest.fail(f"{err}\n{space.active_values(values)}")


def _heads(heads: int = 2, tokens: int = 8, dims: int = 16) -> Workload:
    """A chain written here: attention scores and their product with V over several heads, a
    batched matmul pair (``q k^T`` per head, then ``s v``), no softmax."""
    q, k, v = (te.placeholder((heads, tokens, dims), "float32", name=n) for n in ("q", "k", "v"))
    d = te.reduce_axis((0, dims), name="d")
    s = te.compute((heads, tokens, tokens), lambda h, i, j: te.sum(q[h, i, d] * k[h, j, d], axis=d), name="s")
    r = te.reduce_axis((0, tokens), name="r")
    out = te.compute(
        (heads, tokens, dims), lambda h, i, e: te.sum(s[h, i, r] * v[h, r, e], axis=r), name="out"
    )
    func = te.create_func([q, k, v], [out], name="heads")

    def reference(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> tuple[np.ndarray]:
        return ((q @ k.transpose(0, 2, 1)) @ v,)

    flops = 2 * heads * tokens * tokens * dims * 2
    return Workload("heads", {}, func, reference, "", flops, intermediate_bytes(func), (1.0, 1.0, 1.0))


@pytest.mark.slow
def test_batched_matmuls_get_tiles_per_head_and_equal_numpy() -> None:
    """A batched matmul is a contraction like any other: the heads are the rows, ``q k^T`` (both
    operands contiguous along d) gets a dot-product tile, ``s v`` a tile over v's channels."""
    wl = _heads()
    c = analyze_cascade(wl.func)
    assert c.tileable == (("s", 8), ("out", 16)) and c.dot_tileable == ("s",)
    space = load_space(SPACES_DIR / "cascade.yaml", wl, POOLS)
    values = space.default() | {"at_s": "tile", "regtile_s": 4, "dot_s": 2, "regtile_out": 4}
    lowered = lower(space.apply(wl.func, values).func, pools=POOLS)
    text = str(lowered.func)
    assert (
        "s_acc[i_1_1 * 2 + j_1] = s_acc[i_1_1 * 2 + j_1] + q_flat[h_1_0 * 128 + i_0 * 64 + i_1_1 * 16 + d]"
        " * k_flat[h_1_0 * 128 + j_0 * 32 + j_1 * 16 + d]"
    ) in text
    inputs = wl.make_inputs(0)
    outputs = empty_outputs(lowered.func)
    build(lowered.func, lowered.plan)(*inputs, *outputs)
    np.testing.assert_allclose(outputs[0], reference_outputs(wl, inputs)[0], rtol=1e-4, atol=1e-4)


@pytest.mark.slow
def test_a_padded_copy_under_a_rolling_buffer_holds_one_window_of_rows() -> None:
    """conv1 in a rolling buffer at a one-row tile, its padded input copied at the tile loop: the
    copy holds the 5 rows that conv1's 3-row window reads (per parallel part), not the whole image
    (the rolling buffer's first tile computes every row of its window, later tiles the new row)."""
    wl = _resnet_body(size=8)
    space = load_space(SPACES_DIR / "cascade.yaml", wl, POOLS)
    values = space.default() | {
        "tile_rows": 1,
        "at_conv1": "tile",
        "mode_conv1": "rolling",
        "pad_conv1": "copy",
        "padat_conv1": "tile",
        "parallel": "outer",
    }
    lowered = lower(space.apply(wl.func, values).func, pools=POOLS)
    text = str(lowered.func)
    assert 'data_pad_data = T.allocate([800], "float32"' in text  # 2 parts x 5 rows x 10 x 8
    assert 'conv1_data = T.allocate([384], "float32"' in text  # 2 parts x 3 rows x 8 x 8
    inputs = wl.make_inputs(0)
    outputs = empty_outputs(lowered.func)
    build(lowered.func, lowered.plan)(*inputs, *outputs)
    np.testing.assert_allclose(outputs[0], reference_outputs(wl, inputs)[0], rtol=1e-4, atol=1e-4)
