"""compute_at, reverse_compute_at, compute_inline, reverse_compute_inline, rolling_buffer."""

from __future__ import annotations

import re
from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pytest
from ir_helpers import allocations
from schedule_helpers import count_computations

from autotune import ir, te, workloads
from autotune.errors import LoweringError, ScheduleError
from autotune.lowering import lower
from autotune.schedule import AXIS_SEPARATOR, Schedule
from autotune.schedule.recipes import cascade
from autotune.schedule.tree import loop_path, replace_stmt
from autotune.workloads import ops
from autotune.workloads import reference as ref


@pytest.fixture(scope="module")
def pool():
    return workloads.get("pool_chain", height=14, width=9, channels=4)


@pytest.fixture(scope="module")
def neck():
    return workloads.get("bottleneck", height=7, width=5, cin=4, expand=8)


def test_compute_at_derives_halo_rows(pool, golden, run_func):
    sch = cascade(pool.func, "pool2", ["pool1"], tile=4)
    text = str(sch.func)
    golden("schedule/compute_at_pool", text)
    # a 4-row tile of a 3x3 pool reads 6 rows of its input
    assert re.search(r"for y in T.serial\(6\):", text)
    assert str(Schedule.replay(pool.func, sch.trace).func) == text
    lowered = run_func(pool, sch.func)
    assert allocations(lowered.func)["pool1"] == (6 * 7 * 4,)


def test_compute_at_clips_at_the_border(neck, golden, run_func):
    sch = cascade(neck.func, "project", ["depthwise", "expand"], tile=2)
    text = str(sch.func)
    golden("schedule/compute_at_bottleneck", text)
    # padding 1: the first tile reads row -1, which the predicate keeps out
    assert "T.where(0 <= y_2_0 * 2 + y - 1 and y_2_0 * 2 + y - 1 < 7)" in text
    # every tile reads columns -1..5, the same region: it is clipped to the 5 columns, not guarded
    assert "for x in T.serial(5):" in text and "v_x = T.axis.spatial(5, x)" in text
    run_func(neck, sch.func)


def test_recompute_counts_the_halo_twice(pool, run_func):
    sch = cascade(pool.func, "pool2", ["pool1"], tile=4)
    func, counter = count_computations(sch.func, "pool1")
    run_func(pool, func, extra=(counter,))
    # 12 output rows in 3 tiles of 4: rows shared by consecutive tiles are computed twice
    assert counter.sum() > counter.size
    assert counter.max() == 2


@pytest.mark.parametrize("tile", [1, 4, 5])
def test_rolling_buffer_computes_each_row_once(pool, run_func, tile):
    sch = cascade(pool.func, "pool2", ["pool1"], tile=tile, rolling=["pool1"])
    func, counter = count_computations(sch.func, "pool1")
    lowered = run_func(pool, func, extra=(counter,))
    np.testing.assert_array_equal(counter, np.ones_like(counter))
    # the intermediate keeps only its window: tile + 2 rows
    assert allocations(lowered.func)["pool1"] == ((tile + 2) * 7 * 4,)


def test_rolling_buffer_under_a_split_row_loop(pool, run_func):
    # an unroll-and-jam of two rows splits the producer's row loop: its outer part slides by one step
    sch = cascade(pool.func, "pool2", ["pool1"], tile=4, rolling=["pool1"])
    func, counter = count_computations(sch.split("y", [None, 2]).func, "pool1")
    lowered = run_func(pool, func, extra=(counter,))
    np.testing.assert_array_equal(counter, np.ones_like(counter))
    assert "for y_0 in T.serial(T.Select(y_1_0 == 0, 0, 1), 3):" in str(lowered.func)
    # steps of three rows do not divide the two rows that consecutive tiles share: every step
    # starts from the first row again (0 // 3 steps skipped), recomputing the two shared rows
    func, counter = count_computations(sch.split("y", [None, 3]).func, "pool1")
    lowered = run_func(pool, func, extra=(counter,))
    assert "for y_0 in T.serial(2):" in str(lowered.func)
    np.testing.assert_array_equal(counter[0, :, 0, 0], [1, 1, 1, 1, 2, 2, 1, 1, 2, 2, 1, 1])
    assert allocations(lowered.func)["pool1"] == (6 * 7 * 4,)


def pools_3_then_5(height: int) -> SimpleNamespace:
    """data[1, H, 8, 2] -> 3x3 max pool -> 5x5 max pool: consecutive tiles of the second share 4 rows of the first."""
    data = te.placeholder((1, height, 8, 2), "float32", name="data")
    pool1 = ops.max_pool2d(data, 3, name="pool1")
    pool2 = ops.max_pool2d(pool1, 5, name="pool2")
    func = te.create_func([data], [pool2], name="pools_3_5")
    rng = np.random.default_rng(0)
    return SimpleNamespace(
        func=func,
        make_inputs=lambda seed: (rng.uniform(-1, 1, (1, height, 8, 2)).astype(np.float32),),
        reference=lambda x: (ref.max_pool2d(ref.max_pool2d(x, 3), 5),),
    )


def test_rolling_buffer_under_a_split_row_loop_that_does_not_divide_the_overlap_steps_back(run_func):
    chain = pools_3_then_5(16)
    # tiles of 2 rows of pool2 need windows of 6 rows of pool1, 4 of them shared with the previous tile
    sch = cascade(chain.func, "pool2", ["pool1"], tile=2, rolling=["pool1"]).split("y", [None, 3])
    func, counter = count_computations(sch.func, "pool1")
    lowered = run_func(chain, func, extra=(counter,))
    # after the first tile, one step of 3 rows is skipped (4 // 3) and the next computes the
    # last shared row again with the 2 new ones
    assert "for y_0 in T.serial(T.Select(y_1_0 == 0, 0, 1), 2):" in str(lowered.func)
    np.testing.assert_array_equal(counter[0, :, 0, 0], [1, 1, 1, 1, 1, 2, 1, 2, 1, 2, 1, 2, 1, 1])
    assert allocations(lowered.func)["pool1"] == (6 * 6 * 2,)


def test_rolling_buffer_golden(pool, golden):
    sch = cascade(pool.func, "pool2", ["pool1"], tile=4, rolling=["pool1"])
    golden("schedule/rolling_buffer_pool", str(sch.func))
    from autotune.lowering import lower

    golden("schedule/rolling_buffer_pool_lowered", str(lower(sch.func).func))
    assert str(Schedule.replay(pool.func, sch.trace).func) == str(sch.func)


def test_rolling_bottleneck_row_by_row(neck, run_func):
    sch = cascade(neck.func, "project", ["depthwise", "expand"], tile=1, rolling=["expand"])
    func, counter = count_computations(sch.func, "expand")
    lowered = run_func(neck, func, extra=(counter,))
    np.testing.assert_array_equal(counter, np.ones_like(counter))
    sizes = allocations(lowered.func)
    assert sizes["expand"] == (3 * 5 * 8,)
    assert sizes["depthwise"] == (1 * 5 * 8,)


def test_rolling_with_stride_two_and_two_rolling_buffers(run_func):
    cnn = workloads.get("tiny_cnn", height=16, width=16)
    sch = Schedule(cnn.func)
    rows = sch.get_loops("pw2")[1]
    sch = sch.split(rows, [None, 1])
    outer = sch.last[0]
    for p in ["dw2", "pw1", "dw1", "conv1"]:
        sch = sch.compute_at(p, outer)
    # dw2 is a 3x3 stride-2 window over pw1; dw1 a 3x3 window over conv1: both roll
    sch = sch.rolling_buffer("pw1", 0).rolling_buffer("conv1", 0)
    for name in ["pw1", "conv1"]:
        func, counter = count_computations(sch.func, name)
        run_func(cnn, func, extra=(counter,))
        np.testing.assert_array_equal(counter, np.ones_like(counter), err_msg=name)


def test_rolling_buffer_preconditions(pool):
    with pytest.raises(ScheduleError, match="rolling_buffer: block 'pool1' is not inside any loop of its consumer"):
        Schedule(pool.func).rolling_buffer("pool1", 0)
    sch = cascade(pool.func, "pool2", ["pool1"], tile=4)
    with pytest.raises(ScheduleError, match="'pool2' is a function parameter, not an intermediate"):
        sch.split(sch.get_loops("pool2")[2], [None, 1]).rolling_buffer("pool2", 0)
    with pytest.raises(ScheduleError, match="index 3 is out of range"):
        sch.rolling_buffer("pool1", 3)
    par = Schedule(pool.func)
    rows = par.get_loops("pool2")[1]
    par = par.split(rows, [None, 4])
    outer = par.last[0]
    par = par.compute_at("pool1", outer).parallel(outer)
    with pytest.raises(ScheduleError, match=f"loop '{outer}' is parallel"):
        par.rolling_buffer("pool1", 0)


def test_rolling_buffer_without_overlap(neck):
    sch = cascade(neck.func, "project", ["depthwise"], tile=1)
    with pytest.raises(ScheduleError, match="no dimension of 'depthwise' overlaps between consecutive iterations"):
        sch.rolling_buffer("depthwise", 0)


def test_parallel_rolling_loop_is_rejected(pool):
    sch = cascade(pool.func, "pool2", ["pool1"], tile=4, rolling=["pool1"])
    outer = sch.get_loops("pool2")[1]
    with pytest.raises(ScheduleError, match="carries the rolling buffer of block 'pool1'"):
        sch.parallel(outer)


def test_parallel_tiles_get_private_buffers(pool, run_func):
    sch = cascade(pool.func, "pool2", ["pool1"], tile=3)
    outer = sch.get_loops("pool2")[1]
    lowered = run_func(pool, sch.parallel(outer).func)
    # one 5-row buffer per iteration of the 4-iteration parallel loop
    assert allocations(lowered.func)["pool1"] == (4 * 5 * 7 * 4,)


def test_copy_pad_follows_each_private_buffer(pool, run_func):
    sch = cascade(pool.func, "pool2", ["pool1"], tile=3)
    outer = sch.get_loops("pool2")[1]
    sch = sch.parallel(outer, copy_pad=1024)
    assert f'for {outer} in T.parallel(4, annotations={{"autotune.copy_pad": 1024}}):' in str(sch.func)
    assert str(Schedule.replay(pool.func, sch.trace_json()).func) == str(sch.func)
    compacted = str(lower(sch.func, until="compact_buffers").func)
    # 140 elements + 256 of pad (1024 bytes), rounded up to 16 (64 bytes): 400
    assert 'pool1 = T.alloc_buffer((4, 1, 5, 7, 4), "float32", strides=(400, 140, 28, 4, 1))' in compacted
    lowered = run_func(pool, sch.func)
    # four 5-row copies, each followed by its padding, the last one too
    assert allocations(lowered.func)["pool1"] == (4 * 400,)
    assert lowered.plan.total_peak == 4 * 400 * 4
    assert f"pool1[{outer} * 400 + y * 28 + x * 4 + c] = pool1_acc[0]" in str(lowered.func)


def test_copy_pad_needs_unbanked_copies_of_whole_elements(pool):
    sch = cascade(pool.func, "pool2", ["pool1"], tile=3)
    outer = sch.get_loops("pool2")[1]
    banked = sch.transform_layout("pool1", "pool1", lambda n, y, x, c: [n, y, AXIS_SEPARATOR, x, c])
    with pytest.raises(
        LoweringError,
        match=re.escape(
            f"compact_buffers: copy_pad on loop '{outer}' cannot pad the copies of banked buffer 'pool1' "
            "(axis separators [2]): its copies are banks of their own"
        ),
    ):
        lower(banked.parallel(outer, copy_pad=1024).func)
    # the primitive asks for a multiple of 64; an annotation written by hand may not be one
    func = sch.parallel(outer).func
    loop = loop_path(func, outer, "test")[-1]
    odd = replace_stmt(func, loop, replace(loop, annotations=ir.ann_set(loop.annotations, ir.COPY_PAD_ATTR, 6)))
    with pytest.raises(LoweringError, match=re.escape("compact_buffers: copy_pad 6 is not a multiple of the 4-byte elements of 'pool1'")):
        lower(odd)


def test_compute_at_preconditions(pool):
    sch = Schedule(pool.func)
    with pytest.raises(ScheduleError, match="compute_at: no block named 'nope'"):
        sch.compute_at("nope", "y_1")
    with pytest.raises(ScheduleError, match="'pool2', a function parameter, not an intermediate"):
        sch.compute_at("pool2", "y")
    with pytest.raises(ScheduleError, match="loop 'y' encloses block 'pool1' itself"):
        sch.compute_at("pool1", "y")
    with pytest.raises(ScheduleError, match="compute_at: no loop named 'zz'"):
        sch.compute_at("pool1", "zz")


def test_compute_inline_and_reverse(neck, golden, run_func):
    mm = workloads.get("tiny_cnn", height=8, width=8)
    with pytest.raises(ScheduleError, match="compute_inline: block 'conv1' is a reduction"):
        Schedule(mm.func).compute_inline("conv1")
    with pytest.raises(ScheduleError, match="reverse_compute_inline: block 'fc' is a reduction"):
        Schedule(mm.func).reverse_compute_inline("fc")


def test_reverse_compute_at(run_func, golden):
    from autotune import te

    a = te.placeholder((8, 6), name="A")
    b = te.compute((8, 6), lambda i, j: a[i, j] * 2.0, name="B")
    c = te.compute((8, 6), lambda i, j: b[i, j] + 1.0, name="C")
    func = te.create_func([a], [c], "elementwise")
    sch = Schedule(func)
    i = sch.get_loops("B")[0]
    sch = sch.split(i, [None, 2])
    sch = sch.reverse_compute_at("C", sch.last[0])
    golden("schedule/reverse_compute_at", str(sch.func))

    class W:
        def make_inputs(self, seed):
            return (np.arange(48, dtype=np.float32).reshape(8, 6),)

        def reference(self, x):
            return (x * 2 + 1,)

    lowered = run_func(W(), sch.func)
    assert allocations(lowered.func)["B"] == (2 * 6,)
    inl = Schedule(func).compute_inline("B")
    golden("schedule/compute_inline", str(inl.func))
    run_func(W(), inl.func)
    rev = Schedule(func).reverse_compute_inline("C")
    golden("schedule/reverse_compute_inline", str(rev.func))
    run_func(W(), rev.func)


def test_compute_inline_resize_into_conv(golden, run_func):
    rc = workloads.get("resize_conv", channels=2, height=16, width=12)
    sch = Schedule(rc.func).compute_inline("resize")
    golden("schedule/compute_inline_resize_conv", str(sch.func))
    assert str(Schedule.replay(rc.func, sch.trace).func) == str(sch.func)
    lowered = run_func(rc, sch.func)
    assert "resize" not in allocations(lowered.func)


def test_loop_kinds_on_pool_chain(pool, run_func):
    sch = Schedule(pool.func)
    _n, y, x, c, _rh, rw = sch.get_loops("pool2")
    sch = sch.fuse(y, x).unroll(rw).vectorize(c)
    sch = sch.reorder(sch.get_loops("pool2")[1], sch.get_loops("pool2")[2])
    run_func(pool, sch.parallel(sch.get_loops("pool2")[1]).func)
