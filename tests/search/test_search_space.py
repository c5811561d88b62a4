"""Search spaces: knobs derived from the workload, space-file errors, and assignments that apply or raise ScheduleError."""

from __future__ import annotations

import random
import re
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from autotune import ir
from autotune.codegen import generate_source
from autotune.config import SPACES_DIR
from autotune.errors import ConfigError, PoolOverflowError, ScheduleError
from autotune.lowering import lower
from autotune.memory import Pool
from autotune.schedule import Schedule
from autotune.search.candidates import random_assignment
from autotune.search.space import FAMILIES, Knob, SearchSpace, load_space
from autotune.search.space_cascade import analyze_cascade
from autotune.search.space_gemm import analyze_gemm
from autotune.workloads import Workload, get

POOLS = (Pool("dtcm", 64 * 1024), Pool("sram", 2 * 1024**2))
BIG = (Pool("dtcm", 1 << 30), Pool("sram", 1 << 30))
SMALL = {
    "pool_chain": ("cascade", {"height": 36, "width": 36, "channels": 16}),
    "bottleneck": ("cascade", {"height": 16, "width": 16, "cin": 4, "expand": 8}),
    "resize_conv": ("cascade", {"channels": 2, "height": 32, "width": 32}),
    "tiny_cnn": ("cascade", {"height": 32, "width": 32}),
    "matmul": ("gemm", {"m": 32, "n": 48, "k": 64}),
}


def small(name: str) -> tuple[Workload, SearchSpace]:
    space, params = SMALL[name]
    wl = get(name, **params)
    return wl, load_space(SPACES_DIR / f"{space}.yaml", wl, POOLS)


def sample(space: SearchSpace, rng: random.Random) -> dict[str, Any]:
    return {k.name: rng.choice(k.choices) for k in space.knobs}


def write_space(text: str) -> Path:
    path = Path(tempfile.mkdtemp()) / "space.yaml"
    path.write_text(text)
    return path


# ---------------------------------------------------------------- derived knobs


def test_pool_chain_knobs() -> None:
    _, space = small("pool_chain")
    assert space.name == "cascade" and space.family == "cascade"
    assert space.knobs == (
        Knob("tile_rows", (1, 2, 4, 8, 16, 32), kind="tile"),
        Knob("at_pool1", ("tile", "root"), kind="location"),
        Knob("mode_pool1", ("recompute", "rolling"), (("at_pool1", ("tile",)),), "window"),
        Knob("pool_pool1", ("dtcm", "sram"), kind="pool"),
        Knob("pool_pool1_data", ("dtcm", "sram"), (("stage_pool1_data", ("tile",)),), "pool"),
        Knob("strip", (0, 4, 8, 16), kind="tile"),
        Knob("fuse_pool1", (False, True), kind="unroll"),
        Knob("fuse_pool2", (False, True), kind="unroll"),
        Knob("unroll_pool1", (False, True), kind="unroll"),
        Knob("unroll_pool2", (False, True), kind="unroll"),
        Knob("jam_pool1", (1, 2, 4), (("unroll_pool1", (True,)), ("fuse_pool1", (False,))), "unroll"),
        Knob("jam_pool2", (1, 2, 4), (("unroll_pool2", (True,)), ("fuse_pool2", (False,))), "unroll"),
        Knob("jamrows_pool1", (1, 2, 4), (("unroll_pool1", (True,)), ("fuse_pool1", (False,))), "unroll"),
        Knob("jamrows_pool2", (1, 2, 4), (("unroll_pool2", (True,)), ("fuse_pool2", (False,))), "unroll"),
        Knob("stage_pool1_data", ("none", "tile"), (("at_pool1", ("tile",)),), "location"),
        Knob("dbuf_pool1_data", (False, True), (("stage_pool1_data", ("tile",)),), "location"),
        Knob("parallel", ("none", "outer"), kind="parallel"),
        Knob("copy_pad", (0, 4096), (("parallel", ("outer",)),), "parallel"),
        Knob("vectorize", (False, True), kind="vectorize"),
    )
    assert space.fixed == ()
    assert space.default() == {
        "tile_rows": 1,
        "at_pool1": "tile",
        "mode_pool1": "recompute",
        "pool_pool1": "dtcm",
        "pool_pool1_data": "dtcm",
        "strip": 0,
        "fuse_pool1": False,
        "fuse_pool2": False,
        "unroll_pool1": False,
        "unroll_pool2": False,
        "jam_pool1": 1,
        "jam_pool2": 1,
        "jamrows_pool1": 1,
        "jamrows_pool2": 1,
        "stage_pool1_data": "none",
        "dbuf_pool1_data": False,
        "parallel": "none",
        "copy_pad": 0,
        "vectorize": False,
    }
    # jam_<stage> and jamrows_<stage> count 3 x 3 only where unroll is on and fuse off (1 of 4
    # cases): 3x per stage; copy_pad counts 2 only with parallel outer: 1.5x; mode_pool1 counts 2
    # only with pool1 at the tile loop, and so does the staging of its input (none, or tile with 2
    # dbuf x 2 pools: 5): 2 x 5 + 1 of the 4 (at, mode) pairs
    assert space.size() == 768 * 16 * 3 * 3 * 3 // 2 * 11 // 4


def test_conditional_knobs_are_sampled_only_where_they_matter() -> None:
    _, space = small("pool_chain")
    order = [k.name for k in space.search_order()]
    # what mode_* and jam_* require
    assert order[:5] == ["at_pool1", "fuse_pool1", "fuse_pool2", "unroll_pool1", "unroll_pool2"]
    jam = next(k for k in space.knobs if k.name == "jam_pool2")
    assert jam.active({"unroll_pool2": True, "fuse_pool2": False})
    assert not jam.active({"unroll_pool2": True, "fuse_pool2": True})
    assert not jam.active({"unroll_pool2": False, "fuse_pool2": False})
    rng = np.random.default_rng(0)
    drawn = [random_assignment(space, rng) for _ in range(200)]
    assert all(d["jam_pool2"] == 1 for d in drawn if not d["unroll_pool2"] or d["fuse_pool2"])
    assert {d["jam_pool2"] for d in drawn if d["unroll_pool2"] and not d["fuse_pool2"]} == {1, 2, 4}
    assert {d["copy_pad"] for d in drawn if d["parallel"] == "none"} == {0}
    assert {d["copy_pad"] for d in drawn if d["parallel"] == "outer"} == {0, 4096}


def test_chained_conditions_are_ordered_and_counted_once() -> None:
    # regtile_s -> unroll_s -> jam_s: a control that is itself conditional comes after its own control
    a = Knob("a", (0, 1))
    b = Knob("b", (False, True), (("a", (0,)),))
    c = Knob("c", (1, 2, 4), (("b", (True,)),))
    space = SearchSpace("chain", (c, b, a), ())
    assert [k.name for k in space.search_order()] == ["a", "b", "c"]
    # a=1: b and c inactive (1); a=0: b=False (1) or b=True (3 values of c)
    assert space.size() == 1 + 1 + 3
    rng = np.random.default_rng(0)
    drawn = [random_assignment(space, rng) for _ in range(100)]
    assert all(d["b"] is False and d["c"] == 1 for d in drawn if d["a"] == 1)
    assert {d["c"] for d in drawn if d["a"] == 0 and d["b"]} == {1, 2, 4}
    cyclic = SearchSpace("cyclic", (Knob("x", (0, 1), (("y", (0,)),)), Knob("y", (0, 1), (("x", (0,)),))), ())
    with pytest.raises(ValueError, match=r"space 'cyclic': knobs require each other: \['x', 'y'\]"):
        cyclic.search_order()


def test_requirements_on_fixed_knobs_are_settled_when_the_space_loads() -> None:
    wl, _ = small("pool_chain")
    off = load_space(write_space("family: cascade\nknobs:\n  unroll_*: {value: false}\n"), wl, POOLS)
    assert {"jam_pool1": 1, "jam_pool2": 1}.items() <= dict(off.fixed).items()  # never active: fixed
    assert not any(k.name.startswith("jam_") for k in off.knobs)
    on = load_space(write_space("family: cascade\nknobs:\n  unroll_*: {value: true}\n"), wl, POOLS)
    jams = {k.name: k.requires for k in on.knobs if k.name.startswith("jam_")}
    assert jams == {"jam_pool1": (("fuse_pool1", (False,)),), "jam_pool2": (("fuse_pool2", (False,)),)}
    mm, _ = small("matmul")
    tiled = load_space(write_space("family: gemm\nknobs:\n  register_tile: {value: 4x16}\n"), mm, ())
    # a register tile replaces the tiles: only what the micro-kernel uses is left to search
    assert [k.name for k in tiled.knobs] == ["cache_b", "parallel", "panel_order"]
    assert dict(tiled.fixed)["tile_m"] == 2 and dict(tiled.fixed)["register_tile"] == "4x16"


def test_stages_come_from_the_function() -> None:
    tiny = analyze_cascade(get("tiny_cnn", height=32, width=32).func)
    assert (tiny.last, tiny.movable, tiny.row_loop) == ("pw2", ("conv1", "dw1", "pw1", "dw2"), "y_4")
    assert tiny.rollable == ("conv1", "dw1", "pw1")  # pw2 reads dw2 pointwise: no rows shared between tiles
    assert [b for b, _ in tiny.buffers] == ["conv1", "dw1", "pw1", "dw2", "pw2", "gap"]
    resize = analyze_cascade(get("resize_conv", channels=2, height=32, width=32).func)
    assert (resize.last, resize.row_loop, resize.above, resize.rows) == ("conv", "y_1", ("n_1", "o"), 16)
    bottleneck = analyze_cascade(get("bottleneck", height=16, width=16, cin=4, expand=8).func)
    assert (bottleneck.movable, bottleneck.rollable, bottleneck.vector_loop) == (
        ("expand", "depthwise"),
        ("expand",),
        "o_1",
    )


def test_bottleneck_fixes_what_cannot_vary() -> None:
    _, space = small("bottleneck")
    assert dict(space.fixed) == {"mode_depthwise": "recompute"}
    assert Knob("tile_rows", (1, 2, 4, 8, 16), kind="tile") in space.knobs


def test_gemm_knobs() -> None:
    _, space = small("matmul")
    knobs = {k.name: k.choices for k in space.knobs}
    assert knobs["tile_m"] == (2, 4, 8, 16, 32) and knobs["tile_k"] == (2, 4, 8, 16, 32, 64)
    assert knobs["tile_n"] == (2, 3, 4, 6, 8, 12, 16, 24, 48)
    assert knobs["order"] == ("mnk", "mkn", "nmk", "nkm")
    assert knobs["vectorize"] == (True, False)
    gemm = analyze_gemm(get("matmul", m=32, n=48, k=64).func)
    assert (gemm.loops, gemm.extents, gemm.a, gemm.b) == (("i", "j", "k"), (32, 48, 64), "A", "B")


def test_cascade_tiles_are_divisors_and_powers_of_two() -> None:
    wl = get("bottleneck", height=112, width=112, cin=4, expand=8)
    space = load_space(SPACES_DIR / "cascade.yaml", wl, ())
    assert space.knobs[0] == Knob("tile_rows", (1, 2, 4, 7, 8, 14, 16, 28, 32), kind="tile")
    assert not any(k.name.startswith("pool_") for k in space.knobs)  # no pools given, no pool knobs


# ---------------------------------------------------------------- applying


@pytest.mark.parametrize("name", list(SMALL))
def test_every_assignment_applies(name: str) -> None:
    """No combination of knob values is refused by a primitive: constraints are resolved by the
    knobs' conditions (a stage whose reader stays at root stays there too; a padded copy goes where
    its stage and producer force it), so no trial of the space is `invalid`. Values are drawn for
    inactive knobs too: they must change nothing that a primitive refuses."""
    wl, space = small(name)
    rng = random.Random(0)
    for _ in range(100):
        values = sample(space, rng)
        try:
            space.apply(wl.func, values)
        except ScheduleError as err:
            pytest.fail(f"{err}\n{space.active_values(values)}")


@pytest.mark.parametrize("name", list(SMALL))
def test_default_applies_lowers_and_replays(name: str) -> None:
    wl, space = small(name)
    sch = space.apply(wl.func, {})
    assert sch.trace and str(space.apply(wl.func, space.default()).func) == str(sch.func)
    assert str(Schedule.replay(wl.func, sch.trace_json()).func) == str(sch.func)
    assert lower(sch.func, pools=BIG).plan.total_peak >= 0


@pytest.mark.parametrize("name", ["pool_chain", "bottleneck", "matmul"])
def test_applied_schedules_lower_or_overflow(name: str) -> None:
    wl, space = small(name)
    rng = random.Random(1)
    lowered = 0
    while lowered < 4:
        try:
            sch = space.apply(wl.func, sample(space, rng))
        except ScheduleError:
            continue
        try:
            lower(sch.func, pools=POOLS)
        except PoolOverflowError:
            continue
        lowered += 1


def test_tiling_saves_memory() -> None:
    wl, space = small("pool_chain")
    whole = lower(wl.func, pools=BIG).plan.total_peak
    tiled = lower(
        space.apply(wl.func, {"tile_rows": 4, "mode_pool1": "rolling"}).func, pools=BIG
    ).plan.total_peak
    assert (whole, tiled) == (34 * 34 * 16 * 4, 6 * 34 * 16 * 4)


def test_copy_pad_follows_each_halfs_window_by_a_page() -> None:
    wl, space = small("pool_chain")
    values = {"tile_rows": 4, "mode_pool1": "rolling", "parallel": "outer"}
    side_by_side = lower(space.apply(wl.func, values).func, pools=BIG)
    padded = lower(space.apply(wl.func, values | {"copy_pad": 4096}).func, pools=BIG)
    window = 6 * 34 * 16  # a rolling window of 6 pool1 rows per half
    assert side_by_side.plan.total_peak == 2 * window * 4
    assert padded.plan.total_peak == 2 * (window + 1024) * 4  # each window followed by 4 KiB
    assert "pool1[y_1_0 * 4288 + " in str(padded.func)


def test_trace_of_a_cascade(golden: Any) -> None:
    wl, space = small("pool_chain")
    sch = space.apply(
        wl.func,
        {
            "tile_rows": 4,
            "mode_pool1": "rolling",
            "parallel": "outer",
            "vectorize": True,
            "pool_pool1": "sram",
        },
    )
    # the decisions first, each knob that matters (a control before the knobs it switches on) ...
    assert sch.decisions() == {
        "at_pool1": "tile",
        "fuse_pool1": False,
        "fuse_pool2": False,
        "unroll_pool1": False,
        "unroll_pool2": False,
        "parallel": "outer",
        "stage_pool1_data": "none",
        "tile_rows": 4,
        "mode_pool1": "rolling",
        "pool_pool1": "sram",
        "strip": 0,
        "copy_pad": 0,
        "vectorize": True,
    }
    assert sch.trace[0].to_json() == {
        "op": "sample",
        "args": {"candidates": ["tile", "root"], "decision": "tile", "kind": "location", "name": "at_pool1"},
    }
    # ... then the primitives they select
    assert [step.op for step in sch.trace if step.op != "sample"] == [
        "split",
        "compute_at",
        "rolling_buffer",
        "parallel",
        "vectorize",
        "set_pools",
    ]
    golden("search/space_pool_chain", str(sch.func))
    assert space.decisions(sch.trace_json()) == sch.decisions()
    assert space.apply(wl.func, space.decisions(sch.trace_json())).trace == sch.trace


def test_a_mutated_decision_rebuilds_the_rest_of_the_trace() -> None:
    wl, space = small("pool_chain")
    sch = space.apply(wl.func, {"tile_rows": 4, "mode_pool1": "rolling", "parallel": "outer"})
    decisions = {**space.decisions(sch.trace_json()), "at_pool1": "root"}
    mutant = space.apply(wl.func, decisions)
    # at root, the window mode no longer matters: no decision, no rolling_buffer
    assert "mode_pool1" not in mutant.decisions() and mutant.decisions()["at_pool1"] == "root"
    assert "rolling_buffer" not in [s.op for s in mutant.trace]
    assert str(Schedule.replay(wl.func, mutant.trace_json()).func) == str(mutant.func)


def test_a_trace_with_a_decision_outside_the_space_is_refused() -> None:
    wl, space = small("pool_chain")
    trace = space.apply(wl.func, {"tile_rows": 4}).trace_json().replace('"decision": 4', '"decision": 3')
    with pytest.raises(
        ScheduleError,
        match=r"trace step \d+ does not apply: decision 'tile_rows': 3 is not one of its candidates \[1, 2, 4, 8, 16, 32\]",
    ):
        Schedule.replay(wl.func, trace)
    with pytest.raises(ValueError, match=r"knob 'tile_rows' has choices \[1, 2, 4, 8, 16, 32\], got 3"):
        space.decisions(trace)


def test_fuse_and_unroll_give_one_contiguous_loop_and_straight_line_windows(
    golden: Any, tmp_path: Path
) -> None:
    from autotune.measure import measure

    wl, space = small("pool_chain")
    values = {"tile_rows": 4, "mode_pool1": "rolling", "strip": 8, "parallel": "outer", "vectorize": True}
    values |= {"fuse_pool1": True, "fuse_pool2": True, "unroll_pool1": True, "unroll_pool2": True}
    sch = space.apply(wl.func, values)
    assert [step.op for step in sch.trace if step.op != "sample"] == [
        "split", "split", "reorder", "compute_at", "rolling_buffer", "fuse", "fuse",
        "unroll", "unroll", "unroll", "unroll", "parallel", "vectorize", "set_pools",
    ]  # fmt: skip
    assert sch.get_loops("pool2")[-3:] == ("x_1_1_c_1_fused", "rh_1", "rw_1")
    lowered = lower(sch.func, pools=BIG)
    golden("search/space_pool_chain_fused", str(lowered.func))
    # the fused index is contiguous: no // or % of the fused loop variable is left
    assert "x_c_fused //" not in str(lowered.func) and "x_c_fused %" not in str(lowered.func)
    inputs = wl.make_inputs(0)
    result = measure(
        lowered.func, wl.reference, inputs, lowered.plan, warmup=0, repeats=1, cache_dir=str(tmp_path)
    )
    assert result.status == "ok", result


def test_jam_unrolls_neighbouring_columns_below_the_channels(golden: Any, tmp_path: Path) -> None:
    from autotune.measure import measure

    wl, space = small("pool_chain")
    values = {"tile_rows": 4, "mode_pool1": "rolling", "strip": 8, "parallel": "outer", "vectorize": True}
    values |= {"unroll_pool1": True, "unroll_pool2": True, "jam_pool1": 4, "jam_pool2": 4}
    sch = space.apply(wl.func, values)
    # pool1 has 10 columns per strip: 4 does not divide them, 2 does
    assert [step.kwargs()["factors"] for step in sch.trace if step.op == "split"][-2:] == [
        (None, 2),
        (None, 4),
    ]
    # columns, channels, the unrolled neighbours, then the window: its columns outside its rows
    assert sch.get_loops("pool2")[-5:] == ("x_1_1_0", "c_1", "x_1_1_1", "rw_1", "rh_1")
    lowered = lower(sch.func, pools=BIG)
    golden("search/space_pool_chain_jammed", str(lowered.func))
    text = generate_source(lowered.func).text
    # pool2: 4 neighbours read 6 columns of 3 rows once each, max each column once (12), and the
    # windows share pairs of columns (6 instead of 8)
    pool2 = text[text.index("pool2_flat_acc_0 =") :]
    assert pool2.count("= pool1_data[") == 18 and len(re.findall(r"\bt_\d+ = max", pool2)) == 18
    inputs = wl.make_inputs(0)
    result = measure(
        lowered.func, wl.reference, inputs, lowered.plan, warmup=0, repeats=1, cache_dir=str(tmp_path)
    )
    assert result.status == "ok", result
    # without unroll, or with fuse, jam changes nothing
    plain = {**values, "unroll_pool2": False}
    assert space.apply(wl.func, plain).trace == space.apply(wl.func, {**plain, "jam_pool2": 1}).trace
    fused = {**values, "fuse_pool2": True}
    assert space.apply(wl.func, fused).trace == space.apply(wl.func, {**fused, "jam_pool2": 1}).trace


def test_jamrows_unrolls_neighbouring_rows_outside_the_columns(golden: Any, tmp_path: Path) -> None:
    from autotune.measure import measure

    wl, space = small("pool_chain")
    values = {"tile_rows": 4, "mode_pool1": "rolling", "strip": 8, "parallel": "outer", "vectorize": True}
    values |= {"unroll_pool1": True, "unroll_pool2": True, "jam_pool1": 2, "jam_pool2": 2}
    sch = space.apply(wl.func, {**values, "jamrows_pool1": 4, "jamrows_pool2": 4})
    # pool2 jams the 4 rows of its tile; pool1's rolling window of 6 rows shares 2 with the previous
    # tile, so it steps 2 rows at a time
    assert sch.get_loops("pool2")[-6:] == ("x_1_1_0", "c_1", "y_1_2_1", "x_1_1_1", "rw_1", "rh_1")
    assert sch.get_loops("pool1")[-7:] == ("y_0", "x_0", "c", "y_1", "x_1", "rw", "rh")
    assert [step.kwargs()["factors"] for step in sch.trace if step.op == "split"][-4:] == [
        (None, 2),
        (None, 2),
        (None, 4),
        (None, 2),
    ]
    lowered = lower(sch.func, pools=BIG)
    golden("search/space_pool_chain_jamrows", str(lowered.func))
    text = generate_source(lowered.func).text
    pool1, pool2 = text[: text.index("pool2_flat_acc_0 =")], text[text.index("pool2_flat_acc_0 =") :]
    # 2 x 2 windows of pool1 read a 4 x 4 block once and take 18 max (4 x 8 apart)
    assert pool1.count("= data_flat[") == 16 and len(re.findall(r"\bt(_\d+)? = max", pool1)) == 18
    # 4 x 2 windows of pool2: 6 x 4 loads, 36 max (64 apart): rows 1 and 3 reuse a pair of rows
    assert pool2.count("= pool1_data[") == 24 and len(re.findall(r"\bt_\d+ = max", pool2)) == 36
    result = measure(
        lowered.func,
        wl.reference,
        wl.make_inputs(0),
        lowered.plan,
        warmup=0,
        repeats=1,
        cache_dir=str(tmp_path),
    )
    assert result.status == "ok", result
    # like jam_, it changes nothing without unroll or with fuse
    plain = {**values, "unroll_pool2": False}
    assert space.apply(wl.func, plain).trace == space.apply(wl.func, {**plain, "jamrows_pool2": 4}).trace
    fused = {**values, "fuse_pool2": True}
    assert space.apply(wl.func, fused).trace == space.apply(wl.func, {**fused, "jamrows_pool2": 4}).trace


def test_stages_fuse_nothing_over_their_rows() -> None:
    # NCHW: the two innermost spatial loops are rows and columns; the rows belong to the tile loop
    assert analyze_cascade(get("resize_conv", channels=2, height=32, width=32).func).fusable == ()
    bottleneck = analyze_cascade(get("bottleneck", height=16, width=16, cin=4, expand=8).func)
    # NHWC, but each stage reads a weight that only the channel loop moves (W[ci, e], W[rh, rw, c],
    # W[e, o]): fused, its index would be f % channels, and the fused loop would gather
    assert bottleneck.fusable == ()
    assert bottleneck.unrollable == ("expand", "depthwise", "project")
    # only the depthwise window slides along the columns (expand and project are 1x1)
    assert bottleneck.jammable == ("depthwise",)
    wide = analyze_cascade(get("bottleneck", height=16, width=16, cin=4, expand=96).func)
    assert wide.unrollable == ("expand", "depthwise")  # project sums 96 > UNROLL_LIMIT terms


def test_rolling_without_overlap_is_a_schedule_error() -> None:
    wl, space = small("bottleneck")
    values = {**space.values({}), "mode_depthwise": "rolling"}  # the space itself fixes it to recompute
    with pytest.raises(ScheduleError, match="rolling_buffer: no dimension of 'depthwise' overlaps"):
        FAMILIES["cascade"].apply(Schedule(wl.func), values, space.target)
    with pytest.raises(
        ConfigError, match=r"knobs\.mode_depthwise\[0\]: expected one of 'recompute', got 'rolling'"
    ):
        load_space(
            write_space("family: cascade\nknobs:\n  mode_depthwise: [rolling, recompute]\n"), wl, POOLS
        )


def test_assignment_outside_the_space_is_a_value_error() -> None:
    wl, space = small("pool_chain")
    with pytest.raises(ValueError, match="unknown knob 'tile_row'; did you mean 'tile_rows'"):
        space.apply(wl.func, {"tile_row": 4})
    with pytest.raises(ValueError, match=r"knob 'tile_rows' has choices \[1, 2, 4, 8, 16, 32\], got 3"):
        space.apply(wl.func, {"tile_rows": 3})
    with pytest.raises(ValueError, match="got True"):
        space.apply(wl.func, {"tile_rows": True})
    _, bottleneck = small("bottleneck")
    with pytest.raises(ValueError, match="knob 'mode_depthwise' is fixed to 'recompute', got 'rolling'"):
        bottleneck.values({"mode_depthwise": "rolling"})
    assert bottleneck.values({"mode_depthwise": "recompute"})["mode_depthwise"] == "recompute"


SAMPLED_KERNEL_LINES = 300


def _unrolled_statements(stmt: ir.Stmt) -> int:
    """The statements of ``stmt`` once its unrolled loops are unrolled (about its kernel's lines)."""
    if isinstance(stmt, ir.For):
        inner = _unrolled_statements(stmt.body)
        return inner * (ir.as_int(stmt.extent) or 1) if stmt.kind == ir.ForKind.UNROLLED else inner + 1
    if isinstance(stmt, ir.SeqStmt):
        return sum(_unrolled_statements(s) for s in stmt.seq)
    if isinstance(stmt, (ir.Allocate, ir.DeclBuffer)):
        return _unrolled_statements(stmt.body)
    if isinstance(stmt, ir.IfThenElse):
        return (
            1
            + _unrolled_statements(stmt.then_case)
            + (_unrolled_statements(stmt.else_case) if stmt.else_case else 0)
        )
    return 1


@pytest.mark.slow
@pytest.mark.parametrize("name", list(SMALL))
def test_applied_schedules_match_numpy(name: str) -> None:
    from autotune.measure import measure

    # Random points of the space, but only those whose kernel is short: a 2,000-line register
    # tile compiles for a minute on an AVX2 host, and the register tiles have numeric tests of
    # their own (test_search_regtile, test_search_gemm_panels, tests/lowering/test_reduction_nests).
    wl, space = small(name)
    rng = random.Random(2)
    checked = 0
    while checked < 2:
        # register tiles off: most tiles of tiny_cnn's five contractions give kernels past the limit,
        # and drawing until two are short took minutes
        values = {k: 0 if k.startswith("regtile_") else v for k, v in sample(space, rng).items()}
        try:
            lw = lower(space.apply(wl.func, values).func, pools=POOLS)
        except (ScheduleError, PoolOverflowError):
            continue
        if _unrolled_statements(lw.func.body) > SAMPLED_KERNEL_LINES:
            continue  # (generating the source of a large tile takes long too)
        if len(generate_source(lw.func).text.splitlines()) > SAMPLED_KERNEL_LINES:
            continue
        result = measure(lw.func, wl.reference, wl.make_inputs(0), lw.plan, warmup=0, repeats=1)
        assert result.status == "ok", result
        checked += 1


# ---------------------------------------------------------------- space files


def test_narrow_fix_and_globs() -> None:
    wl, _ = small("bottleneck")
    path = write_space(
        "family: cascade\nknobs:\n  tile_rows: [8, 2]\n  at_*: {value: tile}\n  at_depthwise: [root, tile]\n"
        "  mode_expand: {choices: [rolling]}\n  vectorize: {value: true}\n"
        "  fuse_*: {value: false}\n  unroll_*: [true, false]\n  unroll_project: {value: false}\n"
    )
    space = load_space(path, wl, POOLS[:1])
    assert space.name == "space"
    assert {k.name: k.choices for k in space.knobs} == {
        "tile_rows": (8, 2),
        "at_depthwise": ("root", "tile"),
        "strip": (0, 4, 8),
        "unroll_expand": (True, False),
        "unroll_depthwise": (True, False),
        "jam_depthwise": (1, 2, 4),
        "jamrows_depthwise": (1, 2, 4),
        "regtile_expand": (0, 1, 2, 4, 8, 16),
        "regtile_depthwise": (0, 1, 2, 4, 8, 16),
        "regtile_project": (0, 1, 2, 4, 8, 16),
        "pad_depthwise": ("inline", "copy"),
        "stage_expand_data": ("none", "tile"),
        "dbuf_expand_data": (False, True),
        "parallel": ("none", "outer"),
        "copy_pad": (0, 4096),
    }
    assert dict(space.fixed) == {
        "at_expand": "tile",
        "mode_expand": "rolling",
        "mode_depthwise": "recompute",
        "pool_expand": "dtcm",
        "pool_depthwise": "dtcm",
        "pool_expand_data": "dtcm",
        "unroll_project": False,
        "vectorize": True,
        "padat_depthwise": "tile",  # its producer expand is fixed at the tile loop: so is the copy
    }


SPACE_ERRORS = {
    "a typo in a knob": (
        "family: cascade\nknobs:\n  tile_row: derive\n",
        "3: knobs.tile_row: unknown knob; did you mean 'tile_rows'?",
    ),
    "a typo in a stage": (
        "family: cascade\nknobs:\n  at_pool: [tile]\n",
        "3: knobs.at_pool: unknown knob; did you mean 'at_pool1'?",
    ),
    "a bad glob": (
        "family: cascade\nknobs:\n  a_*: [tile]\n",
        "3: knobs.a_*: unknown knob; did you mean 'at_*'?",
    ),
    "an unknown family": (
        "family: cascad\n",
        "1: family: expected one of 'cascade', 'gemm', got 'cascad'; did you mean 'cascade'?",
    ),
    "no family": ("knobs: {}\n", "1: missing required field 'family'"),
    "a bad choice": (
        "family: cascade\nknobs:\n  at_pool1: {choices: [tile, inline]}\n",
        "3: knobs.at_pool1.choices[1]: expected one of 'tile', 'root', got 'inline'",
    ),
    "a tile too large": (
        "family: cascade\nknobs:\n  tile_rows:\n    - 4\n    - 33\n",
        "5: knobs.tile_rows[1]: expected an integer from 1 to 32, got 33",
    ),
    "a bad value": (
        "family: cascade\nknobs:\n  vectorize: {value: 1}\n",
        "3: knobs.vectorize.value: expected one of False, True, got 1",
    ),
    "a repeated choice": (
        "family: cascade\nknobs:\n  tile_rows: [4, 4]\n",
        "3: knobs.tile_rows[1]: 4 is listed twice",
    ),
    "a bad spec": (
        "family: cascade\nknobs:\n  tile_rows: 4\n",
        "3: knobs.tile_rows: expected 'derive', a non-empty list of choices, {choices: [...]} or {value: ...}, got 4",
    ),
    "both choices and value": (
        "family: cascade\nknobs:\n  tile_rows: {choices: [4], value: 4}\n",
        "3: knobs.tile_rows: expected exactly one of 'choices' or 'value'",
    ),
    "a misspelt spec key": (
        "family: cascade\nknobs:\n  tile_rows: {choice: [4]}\n",
        "3: knobs.tile_rows.choice: unknown field; did you mean 'choices'?",
    ),
    "a pool that is not in the config": (
        "family: cascade\nknobs:\n  pool_pool1: [l2]\n",
        "3: knobs.pool_pool1[0]: expected one of 'dtcm', 'sram', got 'l2'",
    ),
    "a family that does not fit": (
        "family: gemm\n",
        "1: family: gemm: 'pool_chain' has no block computing A[m, k] * B[k, n] summed over k (workload 'pool_chain')",
    ),
    "malformed YAML": (
        "family: cascade\nknobs: [\n",
        "3:1: invalid YAML: expected the node content, but found '<stream end>'",
    ),
}


@pytest.mark.parametrize("case", list(SPACE_ERRORS))
def test_bad_space_file(case: str) -> None:
    text, expected = SPACE_ERRORS[case]
    wl, _ = small("pool_chain")
    path = write_space(text)
    with pytest.raises(ConfigError) as err:
        load_space(path, wl, POOLS)
    assert str(err.value) == f"{path}:{expected}"


def test_mutate_changes_active_knobs_resets_the_inactive_and_draws_the_switched_on() -> None:
    from autotune.search.mutators import mutate

    _, space = small("pool_chain")
    parent = {
        **space.default(),
        "unroll_pool2": True,
        "jam_pool2": 4,
        "jamrows_pool2": 2,
        "parallel": "outer",
    }
    active = set(space.active_values(parent))
    rng = np.random.default_rng(0)
    seen, drawn_on = set(), Counter()
    for _ in range(200):
        child = dict(mutate(space, parent, rng, changes=1))
        assert set(child) == {k.name for k in space.knobs}
        assert all(child[k.name] in k for k in space.knobs)
        changed = {k for k in child if child[k] != parent[k]}
        switched_on = set(space.active_values(child)) - active
        seen |= changed
        if child["unroll_pool2"] is False or child["fuse_pool2"] is True:
            # jam_ and jamrows_ went inactive: back to their defaults
            assert (
                changed - {"unroll_pool2", "fuse_pool2"} == {"jam_pool2", "jamrows_pool2"}
                and len(changed) == 3
            )
        elif child["parallel"] == "none":
            assert changed == {"parallel"}  # copy_pad was at its default already
        else:
            # one decision moved; the knobs it switched on are drawn, anything but moved back
            assert len(changed - switched_on) == 1
            if child["unroll_pool1"] is True:  # switched on: jam_pool1 and jamrows_pool1 drawn
                assert switched_on == {"jam_pool1", "jamrows_pool1"}
                drawn_on.update((k, child[k]) for k in switched_on)
    assert {"tile_rows", "strip", "jam_pool2", "jamrows_pool2", "copy_pad", "unroll_pool1"} <= seen
    # the switched-on knobs take each of their choices, not only the default
    assert {v for (k, v) in drawn_on if k == "jam_pool1"} == {1, 2, 4}
    assert {v for (k, v) in drawn_on if k == "jamrows_pool1"} == {1, 2, 4}
    for seed in range(50):  # two distinct knobs: the second never undoes the first (it may switch
        # the first one off: copy_pad, then parallel none, leaves one change)
        two = dict(mutate(space, parent, np.random.default_rng(seed), changes=2))
        assert 1 <= sum(two[k] != parent[k] for k in two) <= 6


def test_a_knob_of_no_known_kind_is_refused() -> None:
    with pytest.raises(ValueError, match=r"knob 'x': kind must be one of \('tile', .*got 'speed'"):
        Knob("x", (0, 1), kind="speed")


def test_every_derived_knob_has_a_kind_saying_what_it_decides() -> None:
    _, space = small("pool_chain")
    kinds = {k.name: k.kind for k in space.knobs}
    assert {n for n, kind in kinds.items() if kind == "location"} == {
        "at_pool1",
        "stage_pool1_data",
        "dbuf_pool1_data",
    }
    assert {n for n, kind in kinds.items() if kind == "window"} == {"mode_pool1"}
    assert {n for n, kind in kinds.items() if kind == "pool"} == {"pool_pool1", "pool_pool1_data"}


def test_a_rule_turned_off_fixes_its_knobs_where_it_does_nothing() -> None:
    wl, _ = small("bottleneck")
    space = load_space(
        write_space("family: cascade\nrules: {register_tile: off, unroll: off}\n"), wl, POOLS[:1]
    )
    names = {k.name for k in space.knobs}
    assert not any(n.startswith(("regtile_", "chblock_", "pack_", "unroll_", "fuse_", "jam")) for n in names)
    fixed = dict(space.fixed)
    assert (
        fixed["regtile_expand"] == 0 and fixed["regtile_project"] == 0 and fixed["unroll_depthwise"] is False
    )
    assert "at_expand" in names and "tile_rows" in names  # the other rules keep their knobs
    quoted = load_space(write_space("family: cascade\nrules: {location: 'off'}\n"), wl, POOLS[:1])
    assert dict(quoted.fixed)["at_expand"] == "root" and "mode_expand" not in {k.name for k in quoted.knobs}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "rules: {register_tiles: off}\n",
            r"rules\.register_tiles: unknown rule; did you mean 'register_tile'\?",
        ),
        ("rules: {unroll: on}\n", r"rules\.unroll: expected off, got True"),
        (
            "rules: {pools: off}\n",
            r"rules\.pools: rule 'pools' cannot be turned off: every schedule of the family needs it",
        ),
        ("rules: [unroll]\n", r"rules: expected a mapping of rule names to off"),
        (
            "rules: {unroll: off}\nknobs:\n  unroll_*: [true]\n",
            r"knob 'unroll_expand' is fixed by rules\.unroll: off; narrow one or the other",
        ),
    ],
)
def test_a_bad_rules_entry_names_the_field(text: str, message: str) -> None:
    wl, _ = small("bottleneck")
    with pytest.raises(ConfigError, match=message):
        load_space(write_space("family: cascade\n" + text), wl, POOLS[:1])
    with pytest.raises(ConfigError, match="family 'gemm' has no rules to turn off"):
        load_space(write_space("family: gemm\nrules: {unroll: off}\n"), *small("matmul")[:1])
