"""Each schedule rule on a small chain written here: the knobs it derives and the primitives it applies."""

from __future__ import annotations

from autotune import ir, te
from autotune.analysis.chain import Cascade, analyze_cascade
from autotune.schedule import Schedule
from autotune.search.rules import (
    Chain,
    Inline,
    Location,
    Nest,
    Padding,
    Parallel,
    Pools,
    RegisterTile,
    RowTiles,
    Strip,
    Unroll,
    Vectorize,
    Window,
)
from autotune.search.target import Target
from autotune.workloads import ops

AVX512 = Target("znver5", 2, 512, 32)


def _pool_conv() -> ir.Func:
    """max pool 3x3 (stride 1) -> conv 3x3 pad 1, 16 -> 32 channels, NHWC, 10x10 input."""
    data = te.placeholder((1, 10, 10, 16), "float32", name="data")
    w = te.placeholder((3, 3, 16, 32), "float32", name="w")
    pool = ops.max_pool2d(data, 3, name="pool")
    conv = ops.conv2d_nhwc(pool, w, padding=1, name="conv")
    return te.create_func([data, w], [conv], name="pool_conv")


def _chain(pools: tuple[str, ...] = ()) -> Chain:
    return Chain(analyze_cascade(_pool_conv()), AVX512, pools, 32)


def _knobs(rule: object, chain: Chain) -> dict[str, tuple]:
    return {d.name: (d.derived, d.requires, d.kind) for d in rule.domains(chain)}  # type: ignore[attr-defined]


def _ops(sch: Schedule) -> list[str]:
    return [s.op for s in sch.trace]


def test_each_rule_derives_its_knobs_from_the_chain() -> None:
    chain = _chain(("sram", "dram"))
    assert chain.cascade.last == "conv" and chain.cascade.movable == ("pool",) and chain.cascade.rows == 8
    assert _knobs(RowTiles(), chain) == {"tile_rows": ((1, 2, 4, 8), (), "tile")}
    assert _knobs(Strip(), chain) == {"strip": ((0, 4), (), "tile")}
    assert _knobs(Location(), chain) == {"at_pool": (("tile", "root"), (), "location")}
    assert _knobs(Window(), chain) == {"mode_pool": (("recompute", "rolling"), (("at_pool", ("tile",)),), "window")}
    assert _knobs(Padding(), chain) == {
        "pad_conv": (("inline", "copy"), (), "layout"),
        "padat_conv": (("tile", "root"), (("pad_conv", ("copy",)), ("at_pool", ("root",))), "location"),
    }
    tiles = (1, 2, 4, 8, 16)
    assert _knobs(RegisterTile(), chain) == {
        "regtile_conv": ((0, *tiles), (), "tile"),
        "chblock_conv": ((32, 16), (("regtile_conv", tiles),), "tile"),
    }
    # the pool's window is short and slides along the columns; the conv's (3x3x16) is too long to unroll
    jam = ((1, 2, 4), (("unroll_pool", (True,)), ("fuse_pool", (False,))), "unroll")
    assert _knobs(Unroll(), chain) == {
        "fuse_pool": ((False, True), (), "unroll"),
        "unroll_pool": ((False, True), (), "unroll"),
        "jam_pool": jam,
        "jamrows_pool": jam,
    }
    assert _knobs(Parallel(), chain) == {
        "parallel": (("none", "outer"), (), "parallel"),
        "copy_pad": ((0, 4096), (("parallel", ("outer",)),), "parallel"),
    }
    assert _knobs(Vectorize(), chain) == {"vectorize": ((False, True), (("regtile_conv", (0,)),), "vectorize")}
    assert _knobs(Pools(), chain)["pool_pool"] == (("sram", "dram"), (), "pool")
    assert _knobs(Pools(), _chain()) == {}  # no pools in the config: nothing to decide


def _tiled(values: dict) -> tuple[Schedule, Nest, Cascade]:
    """The chain after RowTiles, and its analysis (of the function before any rule, as the family reads it)."""
    func = _pool_conv()
    c = analyze_cascade(func)
    nest = Nest()
    sch = RowTiles().apply(Schedule(func), c, values, nest, AVX512)
    return sch, nest, c


def test_row_tiles_split_the_last_stage_rows_into_parts_and_tiles() -> None:
    sch, nest, _ = _tiled({"tile_rows": 2, "parallel": "outer"})
    assert _ops(sch) == ["split"] and dict(sch.trace[0].args)["factors"] == (2, None, 2)
    assert len(nest.outer) == 2 and nest.inner == sch.last[-1]


def test_location_then_window_roll_the_intermediate_at_the_tile_loop() -> None:
    values = {"tile_rows": 2, "parallel": "none", "at_pool": "tile", "mode_pool": "rolling", "pad_conv": "inline"}
    sch, nest, c = _tiled(values)
    for rule in (Padding(), Location(), Window()):
        sch = rule.apply(sch, c, values, nest, AVX512)
    assert _ops(sch) == ["split", "compute_at", "rolling_buffer"]
    assert nest.at == {"pool": "tile"}
    # at root the window mode is not applied
    root = values | {"at_pool": "root"}
    sch, nest, c = _tiled(root)
    for rule in (Padding(), Location(), Window()):
        sch = rule.apply(sch, c, root, nest, AVX512)
    assert _ops(sch) == ["split"]


def test_padding_copies_at_the_tile_loop_with_the_stage() -> None:
    values = {"tile_rows": 2, "parallel": "none", "at_pool": "root", "pad_conv": "copy", "padat_conv": "tile"}
    sch, nest, c = _tiled(values)
    for rule in (Padding(), Location()):
        sch = rule.apply(sch, c, values, nest, AVX512)
    assert _ops(sch) == ["split", "hoist_padding", "compute_at"]
    assert nest.copies == {"conv": ["pool_pad"]}


def test_register_tile_splits_columns_and_a_channel_block_and_outlines_the_nest() -> None:
    values = {"tile_rows": 2, "parallel": "none", "regtile_conv": 4, "chblock_conv": 16}
    sch, nest, c = _tiled(values)
    sch = RegisterTile().apply(sch, c, values, nest, AVX512)
    assert _ops(sch) == ["split", "split", "split", "reorder", "unroll", "unroll", "set_vectorizer"]
    factors = [tuple(dict(s.args)["factors"]) for s in sch.trace if s.op == "split"]
    assert factors[1:] == [(None, 16), (None, 4)]  # 16 of 32 channels, 4 of 8 columns
    # Unroll and Vectorize leave a register-tiled stage alone
    for rule in (Unroll(), Vectorize()):
        assert rule.apply(sch, c, values | {"fuse_conv": True, "vectorize": True}, nest, AVX512) is sch


def test_parallel_and_pools_come_last() -> None:
    values = {"tile_rows": 2, "parallel": "outer", "copy_pad": 4096, "pool_pool": "sram"}
    sch, nest, c = _tiled(values)
    for rule in (Parallel(), Pools()):
        sch = rule.apply(sch, c, values, nest, AVX512)
    assert _ops(sch) == ["split", "parallel", "set_pools"]
    assert dict(sch.trace[1].args) == {"copy_pad": 4096, "loop": nest.outer[0]}


def _scaled_chain() -> ir.Func:
    """conv 1x1 16 -> 16, a scale written by hand as a stage of its own, max pool 3x3, NHWC 8x8."""
    data = te.placeholder((1, 8, 8, 16), "float32", name="data")
    w = te.placeholder((1, 1, 16, 16), "float32", name="w")
    conv = ops.conv2d_nhwc(data, w, name="conv")
    scaled = te.compute(conv.shape, lambda n, y, x, c: conv[n, y, x, c] * 0.5, name="scaled")
    pool = ops.max_pool2d(scaled, 3, name="pool")
    return te.create_func([data, w], [pool], name="scaled_chain")


def test_an_elementwise_stage_may_be_inlined_and_then_has_no_location_window_or_pool() -> None:
    func = _scaled_chain()
    chain = Chain(analyze_cascade(func), AVX512, ("sram",), 32, func)
    assert chain.inlinable == ("scaled",)  # the conv reduces: only the scale can be inlined
    assert _knobs(Inline(), chain) == {"inline_scaled": ((False, True), (), "location")}
    location = _knobs(Location(), chain)
    # the conv's only reader may be inlined: then the pool reads the conv and must be at the tile loop too
    assert location["at_conv"][1] == (("at_scaled", ("tile",)),)
    assert location["at_scaled"][1] == (("inline_scaled", (False,)),)
    assert _knobs(Window(), chain)["mode_scaled"][1] == (("inline_scaled", (False,)), ("at_scaled", ("tile",)))
    assert _knobs(Pools(), chain)["pool_scaled"][1] == (("inline_scaled", (False,)),)
    assert _knobs(Pools(), chain)["pool_conv"][1] == ()


def test_an_inlined_stage_is_computed_in_its_reader_and_its_buffer_is_gone() -> None:
    from autotune.config import SPACES_DIR
    from autotune.search.space import load_space
    from autotune.workloads import Workload, intermediate_bytes

    func = _scaled_chain()
    wl = Workload("scaled_chain", {}, func, lambda *a: (), "", 0, intermediate_bytes(func), (1.0, 1.0))
    space = load_space(SPACES_DIR / "cascade.yaml", wl, (), AVX512)
    sch = space.apply(func, {"tile_rows": 2, "inline_scaled": True, "at_conv": "tile", "at_scaled": "root"})
    assert "compute_inline" in _ops(sch) and "scaled" not in sch.get_blocks()
    assert [s.kwargs()["block"] for s in sch.trace if s.op == "compute_at"] == ["conv"]  # at_scaled is dead
    assert "inline_scaled" in sch.decisions() and "at_scaled" not in sch.decisions()


def test_an_inlined_stage_under_a_tile_equals_numpy() -> None:
    import numpy as np

    from autotune.codegen import build
    from autotune.config import SPACES_DIR
    from autotune.lowering import lower
    from autotune.measure import empty_outputs
    from autotune.search.space import load_space
    from autotune.workloads import Workload, intermediate_bytes

    func = _scaled_chain()
    wl = Workload("scaled_chain", {}, func, lambda *a: (), "", 0, intermediate_bytes(func), (1.0, 1.0))
    space = load_space(SPACES_DIR / "cascade.yaml", wl, (), AVX512)
    sch = space.apply(func, {"tile_rows": 2, "inline_scaled": True, "at_conv": "tile", "mode_conv": "rolling"})
    lowered = lower(sch.func)
    rng = np.random.default_rng(0)
    data = rng.standard_normal((1, 8, 8, 16)).astype(np.float32)
    w = rng.standard_normal((1, 1, 16, 16)).astype(np.float32)
    (out,) = empty_outputs(lowered.func)
    build(lowered.func, lowered.plan)(data, w, out)
    scaled = (data @ w[0, 0]) * np.float32(0.5)
    windows = np.lib.stride_tricks.sliding_window_view(scaled, (3, 3), axis=(1, 2))
    np.testing.assert_allclose(out, windows.max(axis=(-2, -1)), rtol=1e-5, atol=1e-5)
    assert lowered.plan.total_peak < 8 * 8 * 16 * 4  # the conv rolls over a few rows; no scaled buffer
