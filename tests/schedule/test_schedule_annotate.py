"""annotate_buffer_access: the seed's resize tile example (apache/tvm#17423) as tests.

The resize block reads ``data_global[.., floor(y * 2.0 + 0.5), floor(x * 2.0 + 0.5)]``:
region inference cannot bound float index math, so without an annotation the
cache stage computed at a 10x10 output tile still covers the whole 200x200
plane; with ``(2y - 3, 2y + 3)`` per spatial axis it covers 24x24.
"""

from __future__ import annotations

import math
import re

import pytest
from ir_helpers import allocations

from autotune import workloads
from autotune.errors import ScheduleError
from autotune.lowering import lower
from autotune.measure import measure
from autotune.schedule import Schedule
from autotune.schedule.tree import get_block

CACHE = "data_global"


def seed_region(n, c, h, w):  # type: ignore[no-untyped-def]
    """The seed's annotation: each output row/column reads input rows/columns 2h - 3 .. 2h + 2."""
    return (n, c, (h * 2 - 3, h * 2 + 3), (w * 2 - 3, w * 2 + 3))


def too_small(n, c, h, w):  # type: ignore[no-untyped-def]
    """Wrong on purpose: output row h reads input row 2h, which this leaves out."""
    return (n, c, (h * 2 + 1, h * 2 + 2), (w * 2 + 1, w * 2 + 2))


@pytest.fixture(scope="module")
def seed():
    """The seed's shapes: resize (1,3,200,200) -> (1,3,100,100), then a 3x3 conv."""
    return workloads.get("resize_conv", channels=3, height=200, width=200)


@pytest.fixture(scope="module")
def small():
    return workloads.get("resize_conv", channels=2, height=40, width=40)


def cache_index(sch: Schedule) -> int:
    """Position of the cached buffer among the resize block's reads."""
    return [r.buffer.name for r in get_block(sch.func, "resize", "test").reads].index(CACHE)


def tiled(func, tile: int = 10, region=None) -> Schedule:  # type: ignore[no-untyped-def]
    """The seed's schedule: cache the resize input, tile its rows and columns by ``tile``,
    reorder to (.., ho, wo, hi, wi), annotate (if ``region``), compute the cache at wo."""
    sch = Schedule(func).cache_read("resize", 0, "global")
    assert sch.last == (CACHE,)
    _, _, h, w = sch.get_loops("resize")
    sch = sch.split(h, [None, tile])
    ho, hi = sch.last
    sch = sch.split(w, [None, tile])
    wo, wi = sch.last
    sch = sch.reorder(ho, wo, hi, wi)
    if region is not None:
        sch = sch.annotate_buffer_access("resize", cache_index(sch), "read", region)
    return sch.compute_at(CACHE, wo)


def same_text(func, sch: Schedule) -> None:  # type: ignore[no-untyped-def]
    assert str(Schedule.replay(func, sch.trace).func) == str(sch.func)
    assert str(Schedule.replay(func, sch.trace_json()).func) == str(sch.func)


# ---- the seed's example ----------------------------------------------------
def test_without_annotation_the_cache_covers_the_whole_plane(seed, golden):
    sch = tiled(seed.func)
    text = str(sch.func)
    golden("schedule/annotate_resize_unannotated", text)
    assert f"T.reads({CACHE}[v_n, v_c, 0:200, 0:200])" in text
    assert "for ax2 in T.serial(200):" in text and "for ax3 in T.serial(200):" in text
    # computed at the column tile loop, the cache is one channel's whole 200x200 plane
    assert allocations(lower(sch.func, verify=True).func)[CACHE] == (1 * 1 * 200 * 200,)


def test_annotated_10x10_tile_needs_a_24x24_cache(seed, golden):
    sch = tiled(seed.func, region=seed_region)
    text = str(sch.func)
    golden("schedule/annotate_resize", text)
    assert f"T.reads({CACHE}[v_n, v_c, v_y * 2 - 3:v_y * 2 - 3 + 6, v_x * 2 - 3:v_x * 2 - 3 + 6])" in text
    assert 'T.block_attr({"explicit_read_region": [0]})' in text
    assert "for ax2 in T.serial(24):" in text and "for ax3 in T.serial(24):" in text
    # the tile's first input row is 20 * ho - 3; the border rows are kept out by a predicate
    assert "v_ax2 = T.axis.spatial(200, y_0 * 20 + ax2 - 3)" in text
    assert "T.where(0 <= y_0 * 20 + ax2 - 3 and y_0 * 20 + ax2 - 3 < 200" in text
    assert allocations(lower(sch.func, verify=True).func)[CACHE] == (1 * 1 * 24 * 24,)


@pytest.mark.parametrize("region", [None, seed_region], ids=["unannotated", "seed"])
def test_trace_round_trip(seed, region):
    same_text(seed.func, tiled(seed.func, region=region))


def test_trace_holds_the_region_as_json(seed):
    sch = tiled(seed.func, region=seed_region)
    step = next(s for s in sch.trace if s.op == "annotate_buffer_access")
    args = step.kwargs()
    assert args["access"] == "read" and args["block"] == "resize" and args["buffer_index"] == 0
    assert args["region"] == (
        ("v", 0),
        ("v", 1),
        ("range", ("-", ("*", ("v", 2), 2), 3), ("+", ("*", ("v", 2), 2), 3)),
        ("range", ("-", ("*", ("v", 3), 2), 3), ("+", ("*", ("v", 3), 2), 3)),
    )


# ---- numbers ---------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("tile", [10, 5])
@pytest.mark.parametrize("region", [None, seed_region], ids=["unannotated", "seed"])
def test_both_schedules_equal_numpy(small, run_func, tile, region):
    # 40x40 input, 20x20 resize: tile 10 gives 2x2 tiles, tile 5 gives 4x4
    lowered = run_func(small, tiled(small.func, tile, region).func)
    side = 40 if region is None else 2 * tile + 4
    assert allocations(lowered.func)[CACHE] == (side * side,)


@pytest.mark.slow
def test_too_small_annotation_is_caught_as_wrong(small):
    lowered = lower(tiled(small.func, 10, too_small).func, verify=True)
    # compaction honours the (wrong) annotation: 19 rows and columns instead of 24
    assert allocations(lowered.func)[CACHE] == (19 * 19,)
    result = measure(lowered.func, small, small.make_inputs(0), plan=lowered.plan, repeats=1)
    assert result.status == "wrong"
    assert result.median_ms is None
    err = result.max_abs_err
    assert err is not None and (math.isnan(err) or err > 0.1), err


# ---- where the annotation goes in the schedule -----------------------------
def test_trivial_example_on_the_input(small):
    """The seed's first example: the resize block reads the function's input directly."""
    sch = Schedule(small.func)
    assert "T.reads(data[v_n, v_c, 0:40, 0:40])" in str(sch.func)
    sch = sch.annotate_buffer_access("resize", 0, "read", seed_region)
    text = str(sch.func)
    assert "T.reads(data[v_n, v_c, v_y * 2 - 3:v_y * 2 - 3 + 6, v_x * 2 - 3:v_x * 2 - 3 + 6])" in text
    assert 'T.block_attr({"explicit_read_region": [0]})' in text
    assert "autotune.full_region" not in text
    same_text(small.func, sch)


def test_write_annotation(small):
    sch = Schedule(small.func).annotate_buffer_access("resize", 0, "write", lambda n, c, h, w: (n, c, h, w))
    text = str(sch.func)
    assert "T.writes(resize[v_n, v_c, v_y, v_x])" in text
    assert 'T.block_attr({"autotune.full_region": ["data"], "explicit_write_region": [0]})' in text
    same_text(small.func, sch)


@pytest.mark.slow
def test_annotation_before_cache_read_moves_to_the_cache(small, run_func):
    sch = Schedule(small.func).annotate_buffer_access("resize", 0, "read", seed_region)
    sch = sch.cache_read("resize", 0, "global")
    assert f"T.reads({CACHE}[v_n, v_c, v_y * 2 - 3:v_y * 2 - 3 + 6" in str(sch.func)
    _, _, h, w = sch.get_loops("resize")
    sch = sch.split(h, [None, 10])
    ho, hi = sch.last
    sch = sch.split(w, [None, 10])
    wo, wi = sch.last
    sch = sch.reorder(ho, wo, hi, wi).compute_at(CACHE, wo)
    lowered = run_func(small, sch.func)
    assert allocations(lowered.func)[CACHE] == (24 * 24,)
    same_text(small.func, sch)


@pytest.mark.slow
def test_annotation_after_compute_at_keeps_the_whole_plane(small, run_func):
    """compute_at sizes the cache loops from the regions it sees: annotating later changes
    the resize block's region, but the cache block still writes the whole plane, so
    compaction keeps it whole (safe, not smaller)."""
    sch = tiled(small.func).annotate_buffer_access("resize", 0, "read", seed_region)
    assert "for ax2 in T.serial(40):" in str(sch.func)
    lowered = run_func(small, sch.func)
    assert allocations(lowered.func)[CACHE] == (40 * 40,)


# ---- preconditions ---------------------------------------------------------
@pytest.fixture(scope="module")
def cached(small):
    return Schedule(small.func).cache_read("resize", 0, "global")


def raises(message: str):  # type: ignore[no-untyped-def]
    return pytest.raises(ScheduleError, match=f"^{re.escape(message)}$")


def test_bad_access_string(cached):
    with raises("annotate_buffer_access: access must be 'read' or 'write', got 'readwrite'"):
        cached.annotate_buffer_access("resize", 0, "readwrite", seed_region)


@pytest.mark.parametrize(
    ("index", "access", "message"),
    [
        (1, "read", "block 'resize' has 1 read buffers, index 1 is out of range"),
        (-1, "read", "block 'resize' has 1 read buffers, index -1 is out of range"),
        (1, "write", "block 'resize' has 1 write buffers, index 1 is out of range"),
    ],
)
def test_buffer_index_out_of_range(cached, index, access, message):
    with raises(f"annotate_buffer_access: {message}"):
        cached.annotate_buffer_access("resize", index, access, seed_region)


def test_unknown_block(cached):
    with raises(f"annotate_buffer_access: no block named 'nope' (blocks: {CACHE}, resize, conv)"):
        cached.annotate_buffer_access("nope", 0, "read", seed_region)


def test_region_with_the_wrong_number_of_dims(cached):
    with raises(f"annotate_buffer_access: the region has 3 entries, buffer '{CACHE}' has 4 dimensions"):
        cached.annotate_buffer_access("resize", 0, "read", lambda n, c, h, w: (n, (h * 2 - 3, h * 2 + 3), w))


@pytest.mark.parametrize(
    ("rows", "shown"),
    [
        (lambda h: (h * 2 + 3, h * 2 - 3), "v_y * 2 + 3, v_y * 2 - 3"),
        (lambda h: (h * 2, h * 2), "v_y * 2, v_y * 2"),
        (lambda h: (h, h * 2), "v_y, v_y * 2"),
    ],
    ids=["negative", "empty", "not-constant"],
)
def test_range_needs_a_positive_constant_extent(cached, rows, shown):
    with raises(f"annotate_buffer_access: range ({shown}) must have a positive constant extent"):
        cached.annotate_buffer_access("resize", 0, "read", lambda n, c, h, w: (n, c, rows(h), w))


@pytest.mark.parametrize(
    ("rows", "shown"),
    [(lambda h: (h / 2, h / 2 + 3), "v_y / 2"), (lambda h: (h * 2.0, h * 2.0 + 3), "2.0")],
    ids=["true-division", "float"],
)
def test_index_must_use_integer_ops(cached, rows, shown):
    reason = f"only integer + - * // % min max are allowed in index expressions, got {shown}"
    with pytest.raises(ScheduleError, match=f"{re.escape(reason)}$"):
        cached.annotate_buffer_access("resize", 0, "read", lambda n, c, h, w: (n, c, rows(h), w))


def test_integer_op_error_names_the_primitive(cached):
    with pytest.raises(ScheduleError) as info:
        cached.annotate_buffer_access("resize", 0, "read", lambda n, c, h, w: (n, c, (h / 2, h / 2 + 3), w))
    assert info.value.primitive == "annotate_buffer_access"


def test_malformed_json_region(cached):
    # what a trace step holds: JSON lists arrive as tuples
    region = (("v", 0), ("v", 1), ("v", 2), ("/", ("v", 3), 2))
    with raises("annotate_buffer_access: malformed index expression ('/', ('v', 3), 2)"):
        cached.apply("annotate_buffer_access", block="resize", buffer_index=0, access="read", region=region)
