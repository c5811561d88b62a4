"""rolling_buffer rolls the loop that carries the overlap, among all the loops above the block.

The cascades of TVM's own rolling-buffer tests, written with this project's API: two int8
3x3 max pools (the seed RFC's example) with h, w and c tiled and the producer computed at
the innermost (channel) tile loop; a tile that does not divide the rows; three pools with a
stride of 2; a cascade through a 2x nearest upscale (an index ``y // 2``), whose tiles move by a
varying number of rows when they do not divide the upscale. Each is compared
with numpy, and an instrumented copy counts how often each element of the rolled buffer is
computed. Kernels run as plain Python on their planned storage (``fuzz_steps.run_source``);
the h-w-c cascade is also compiled with numba.
"""

from __future__ import annotations

import numpy as np
import pytest
from fuzz_steps import run_source
from schedule_helpers import count_computations

from autotune import ir, te
from autotune.codegen import build
from autotune.errors import ScheduleError
from autotune.lowering import lower
from autotune.schedule import Schedule
from autotune.workloads import ops
from autotune.workloads import reference as ref


def two_pools(h: int = 12, w: int = 12, c: int = 16) -> Schedule:
    """int8 A[1, h, w, c] -> pool_a (3x3) -> pool_b (3x3); pool_b's loops n_1 y_1 x_1 c_1 rh_1 rw_1."""
    a = te.placeholder((1, h, w, c), "int8", name="A")
    pa = ops.max_pool2d(a, 3, name="pool_a")
    pb = ops.max_pool2d(pa, 3, name="pool_b")
    return Schedule(te.create_func([a], [pb], name="cascade"))


def data(shape: tuple[int, ...]) -> np.ndarray:
    return np.random.default_rng(0).integers(-128, 128, size=shape).astype(np.int8)


def rolled(sch: Schedule, block: str) -> tuple[object, ...]:
    blk = next(b for b in ir.collect(sch.func.body, ir.Block) if b.name == block)
    return tuple(ir.ann_get(blk.annotations, "rolling_buffer"))


def run_counted(sch: Schedule, block: str, x: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """The output, how often each element of ``block`` was computed, and the workspace bytes."""
    func, counter = count_computations(sch.func, block)
    lowered = lower(func, verify=True)
    out = np.zeros(sch.func.outputs[0].const_shape(), np.int8)
    run_source(lowered, (x, counter), [out])
    return out, counter, lowered.plan.total_peak


def pools_ref(x: np.ndarray, *strides: int) -> np.ndarray:
    y = x.astype(np.float32)
    for s in strides:
        y = ref.max_pool2d(y, 3, s)
    return y.astype(np.int8)


def hwc_tiled() -> Schedule:
    sch = two_pools().split("y_1", [None, 4], names=["oi", "ii"]).split("x_1", [None, 4], names=["oj", "ij"])
    sch = sch.split("c_1", [None, 8], names=["oc", "ic"]).reorder("oi", "oj", "oc", "ii", "ij", "ic")
    return sch.compute_at("pool_a", "oc").rolling_buffer("pool_a")


def test_h_w_c_tiled_rolls_the_column_tile_loop_above_the_channel_loop(golden):
    # refused before: "no dimension of 'pool_a' overlaps between consecutive iterations of loop 'oc'"
    sch = hwc_tiled()
    assert rolled(sch, "pool_a") == ("pool_a", 2, "oj", 6, 4)
    golden("schedule/rolling_hwc_tiled", str(sch.func))
    golden("schedule/rolling_hwc_tiled_lowered", str(lower(sch.func).func))
    x = data((1, 12, 12, 16))
    out, counter, peak = run_counted(sch, "pool_a", x)
    np.testing.assert_array_equal(out, pools_ref(x, 1, 1))
    # columns once per row tile; rows 4 and 5 belong to both row tiles; 6 rows x 6 columns x 16 channels
    np.testing.assert_array_equal(counter.sum(axis=(0, 2, 3)), [160] * 4 + [320] * 2 + [160] * 4)
    assert peak == 6 * 6 * 16
    assert str(Schedule.replay(two_pools().func, sch.trace).func) == str(sch.func)


def test_h_w_c_tiled_compiled_matches_numpy():
    sch = hwc_tiled()
    lowered = lower(sch.func, verify=True)
    x = data((1, 12, 12, 16))
    out = np.zeros((1, 8, 8, 16), np.int8)
    build(lowered.func, lowered.plan)(x, out)
    np.testing.assert_array_equal(out, pools_ref(x, 1, 1))


def test_w_tiled_rolls_over_the_channel_tile_loop():
    sch = two_pools().split("x_1", [None, 4], names=["oj", "ij"]).split("c_1", [None, 8], names=["oc", "ic"])
    sch = sch.reorder("oj", "oc", "ij").compute_at("pool_a", "oc").rolling_buffer("pool_a")
    assert rolled(sch, "pool_a") == ("pool_a", 2, "oj", 6, 4)
    x = data((1, 12, 12, 16))
    out, counter, peak = run_counted(sch, "pool_a", x)
    np.testing.assert_array_equal(out, pools_ref(x, 1, 1))
    # each column once per output row; an output row computes 3 rows of pool_a
    np.testing.assert_array_equal(counter.sum(axis=(0, 1, 3)), [16 * (1 + 2 + 3 * 6 + 2 + 1)] * 10)
    assert peak == 3 * 6 * 16


def test_h_tiled_rolls_over_the_channel_tile_loop_and_computes_each_element_once():
    sch = two_pools().split("y_1", [None, 4], names=["oi", "ii"]).split("c_1", [None, 8], names=["oc", "ic"])
    sch = sch.reorder("oi", "oc", "ii", "x_1").compute_at("pool_a", "oc").rolling_buffer("pool_a")
    assert rolled(sch, "pool_a") == ("pool_a", 1, "oi", 6, 4)
    x = data((1, 12, 12, 16))
    out, counter, peak = run_counted(sch, "pool_a", x)
    np.testing.assert_array_equal(out, pools_ref(x, 1, 1))
    np.testing.assert_array_equal(counter, np.ones_like(counter))
    assert peak == 6 * 10 * 16


def test_a_tile_that_does_not_divide_the_rows_rolls():
    # 8 output rows in tiles of 3: the last tile has 2 rows and the block's predicate clips its window
    sch = two_pools().split("y_1", [None, 3], names=["oi", "ii"]).split("c_1", [None, 8], names=["oc", "ic"])
    sch = sch.reorder("oi", "oc", "ii", "x_1").compute_at("pool_a", "oc").rolling_buffer("pool_a")
    assert rolled(sch, "pool_a") == ("pool_a", 1, "oi", 5, 3)
    x = data((1, 12, 12, 16))
    out, counter, peak = run_counted(sch, "pool_a", x)
    np.testing.assert_array_equal(out, pools_ref(x, 1, 1))
    np.testing.assert_array_equal(counter, np.ones_like(counter))
    assert peak == 5 * 10 * 16


def three_pools() -> Schedule:
    """A[1, 20, 12, 4] -> pool_a (3x3) -> pool_b (3x3, stride 2) -> pool_c (3x3): 18, 8 and 6 rows;
    pool_c in tiles of 2 rows and 2 channels, both intermediates computed at the channel tile loop."""
    a = te.placeholder((1, 20, 12, 4), "int8", name="A")
    pa = ops.max_pool2d(a, 3, name="pool_a")
    pb = ops.max_pool2d(pa, 3, 2, name="pool_b")
    pc = ops.max_pool2d(pb, 3, name="pool_c")
    sch = Schedule(te.create_func([a], [pc], name="cascade3")).split("y_2", [None, 2], names=["oi", "ii"])
    sch = sch.split("c_2", [None, 2], names=["oc", "ic"]).reorder("oi", "oc", "ii", "x_2")
    return sch.compute_at("pool_b", "oc").compute_at("pool_a", "oc").rolling_buffer("pool_b").rolling_buffer("pool_a")


def test_three_pools_with_a_stride_of_two_roll_both_intermediates(golden):
    sch = three_pools()
    # pool_c's 2-row tile needs 4 rows of pool_b (2 new), which need 9 rows of pool_a (4 new)
    assert rolled(sch, "pool_b") == ("pool_b", 1, "oi", 4, 2)
    assert rolled(sch, "pool_a") == ("pool_a", 1, "oi", 9, 4)
    lowered = lower(sch.func).func
    golden("schedule/rolling_three_pools_stride2_lowered", str(lowered))
    # pool_a: 9 rows of the 9 columns pool_b reads, pool_b: 4 rows of 4 columns, 4 channels each
    assert sorted(ir.as_int(a.extents[0]) for a in ir.collect(lowered.body, ir.Allocate) if ir.ann_get(a.annotations, "scope") is None) == [64, 324]
    x = data((1, 20, 12, 4))
    for block in ("pool_a", "pool_b"):
        out, counter, _ = run_counted(sch, block, x)
        np.testing.assert_array_equal(out, pools_ref(x, 1, 2, 1))
        assert counter.max() == 1  # never twice (pool_a's last row and column are never read)


def test_a_cascade_through_an_upscale_rolls():
    a = te.placeholder((1, 10, 6, 2), "int8", name="A")
    pa = ops.max_pool2d(a, 3, name="pool_a")
    up = te.compute((1, 16, 8, 2), lambda n, y, x, c: pa[n, y // 2, x // 2, c], name="up")
    pb = ops.max_pool2d(up, 3, name="pool_b")
    sch = Schedule(te.create_func([a], [pb], name="upscale")).split("y_2", [None, 4], names=["oi", "ii"])
    sch = sch.split("c_2", [None, 1], names=["oc", "ic"]).reorder("oi", "oc", "ii", "x_2")
    sch = sch.compute_at("up", "oc").compute_at("pool_a", "oc").rolling_buffer("up").rolling_buffer("pool_a")
    # 4 rows of pool_b need 6 rows of up, rows oi*4 // 2 .. (oi*4 + 5) // 2 of pool_a: 3, moving by 2
    assert rolled(sch, "up") == ("up", 1, "oi", 6, 4)
    assert rolled(sch, "pool_a") == ("pool_a", 1, "oi", 3, 2)
    x = data((1, 10, 6, 2))
    up_ref = ref.max_pool2d(x.astype(np.float32), 3).repeat(2, axis=1).repeat(2, axis=2)
    out, counter, _ = run_counted(sch, "pool_a", x)
    np.testing.assert_array_equal(out, ref.max_pool2d(up_ref, 3).astype(np.int8))
    np.testing.assert_array_equal(counter, np.ones_like(counter))


def test_an_index_that_is_not_linear_rolls_by_the_rows_it_steps(golden):
    # a 3-row tile of a 2x upscale reads pool_a rows oi*3 // 2 .. (oi*3 + 2) // 2: the tiles move by 1 or 2 rows
    a = te.placeholder((1, 10, 6, 2), "int8", name="A")
    pa = ops.max_pool2d(a, 3, name="pool_a")
    up = te.compute((1, 16, 8, 2), lambda n, y, x, c: pa[n, y // 2, x // 2, c], name="up")
    sch = Schedule(te.create_func([a], [up], name="upscale")).split("y_1", [None, 3], names=["oi", "ii"])
    # refused before: "no dimension of 'pool_a' overlaps between consecutive iterations of loop 'oi'"
    sch = sch.compute_at("pool_a", "oi").rolling_buffer("pool_a")
    assert rolled(sch, "pool_a") == ("pool_a", 1, "oi", 2, 1)
    lowered = lower(sch.func, verify=True)
    golden("schedule/rolling_upscale_index_lowered", str(lowered.func))
    x = data((1, 10, 6, 2))
    out, counter, peak = run_counted(sch, "pool_a", x)
    want = ref.max_pool2d(x.astype(np.float32), 3).repeat(2, axis=1).repeat(2, axis=2).astype(np.int8)
    np.testing.assert_array_equal(out, want)
    np.testing.assert_array_equal(counter, np.ones_like(counter))
    assert peak == 2 * 4 * 2


def test_a_row_index_that_is_not_linear_needs_a_row_loop_to_slide():
    x = te.placeholder((2, 3), "float32", name="x")
    w = te.placeholder((4, 3), "float32", name="w")
    r = ops.relu(ops.dense(x, w, name="d"), name="r")
    sch = Schedule(te.create_func([x, w], [r], name="dense_relu")).compute_at("d", "i1").fuse("i0", "i1")
    # d's row is i0_i1_fused // 4, one row per iteration: nothing to slide (lower() refused it late)
    with pytest.raises(ScheduleError, match=r"^rolling_buffer: no dimension of 'd' overlaps between consecutive iterations of loop 'i0_i1_fused'$"):
        sch.rolling_buffer("d")
