"""split, reorder, fuse, parallel, vectorize, unroll: golden IR, trace replay, numbers, preconditions."""

from __future__ import annotations

import re

import pytest

from autotune import workloads
from autotune.errors import ScheduleError
from autotune.schedule import Schedule


@pytest.fixture(scope="module")
def pool():
    return workloads.get("pool_chain", height=10, width=9, channels=4)


@pytest.fixture(scope="module")
def mm():
    return workloads.get("matmul", m=12, n=10, k=8)


def tiled(pool) -> Schedule:
    sch = Schedule(pool.func)
    loops = sch.get_loops("pool2")
    sch = sch.split(loops[1], [None, 4])
    return sch


def test_split_golden_replay_and_numbers(pool, golden, run_func):
    sch = tiled(pool)
    assert sch.last == ("y_1_0", "y_1_1")
    golden("schedule/split", str(sch.func))
    assert str(Schedule.replay(pool.func, sch.trace_json()).func) == str(sch.func)
    run_func(pool, sch.func)


def test_split_tail_predicate(pool):
    text = str(tiled(pool).func)
    # 6 output rows split by 4: the tail is guarded
    assert "T.where(y_1_0 * 4 + y_1_1 < 6)" in text


@pytest.mark.parametrize(
    ("factors", "message"),
    [
        ([0, None], "factors must be positive integers, got 0"),
        ([None, None], "at most one factor may be None"),
        ([2, 2], "factors [2, 2] cover 4 iterations, loop 'y_1' has 6"),
        ([6], "needs at least two factors"),
    ],
)
def test_split_preconditions(pool, factors, message):
    with pytest.raises(ScheduleError, match=re.escape(message)):
        Schedule(pool.func).split("y_1", factors)


def test_split_missing_loop(pool):
    with pytest.raises(ScheduleError, match="split: no loop named 'zz'"):
        Schedule(pool.func).split("zz", [None, 2])


def test_reorder_fuse_parallel_vectorize_unroll(mm, golden, run_func):
    sch = Schedule(mm.func)
    i, j, k = sch.get_loops("matmul")
    sch = sch.split(j, [None, 5])
    jo, ji = sch.last
    sch = sch.reorder(i, jo, k, ji)
    sch = sch.fuse(i, jo)
    (fused,) = sch.last
    sch = sch.parallel(fused).vectorize(ji).unroll(k)
    golden("schedule/reorder_fuse_kinds", str(sch.func))
    assert str(Schedule.replay(mm.func, sch.trace).func) == str(sch.func)
    run_func(mm, sch.func)


def test_reorder_preconditions(mm, pool):
    sch = Schedule(mm.func)
    i, _j, _k = sch.get_loops("matmul")
    with pytest.raises(ScheduleError, match="reorder: loops repeated"):
        sch.reorder(i, i)
    other = Schedule(pool.func)
    with pytest.raises(ScheduleError, match=re.escape("reorder: loops ['y', 'y_1'] are not nested in one another")):
        other.reorder("y", "y_1")


def test_fuse_preconditions(mm):
    sch = Schedule(mm.func)
    i, _j, k = sch.get_loops("matmul")
    with pytest.raises(ScheduleError, match="fuse: needs at least two loops"):
        sch.fuse(i)
    with pytest.raises(ScheduleError, match="must be consecutive and listed outermost first"):
        sch.fuse(i, k)


def test_parallel_on_reduction_is_rejected(mm):
    sch = Schedule(mm.func)
    k = sch.get_loops("matmul")[2]
    with pytest.raises(ScheduleError, match="parallel: loop 'k' binds reduction axis 'v_k' of block 'matmul'"):
        sch.parallel(k)
    with pytest.raises(ScheduleError, match="vectorize: loop 'k' binds reduction axis"):
        sch.vectorize(k)


@pytest.mark.parametrize("pad", [0, -64, 100])
def test_copy_pad_is_a_positive_multiple_of_a_cache_line(pool, pad):
    sch = tiled(pool)
    with pytest.raises(ScheduleError, match=re.escape(f"parallel: copy_pad must be a positive multiple of 64 bytes, got {pad}")):
        sch.parallel(sch.last[0], copy_pad=pad)


def test_copy_pad_in_a_trace_must_be_an_integer(pool):
    steps = '{"version": 1, "steps": [{"op": "parallel", "args": {"loop": "y_1", "copy_pad": "64KiB"}}]}'
    with pytest.raises(ScheduleError, match=re.escape("argument 'copy_pad' must be an integer, got '64KiB'")):
        Schedule.replay(pool.func, steps)


def test_unknown_primitive_and_bad_trace(pool):
    with pytest.raises(ScheduleError, match="unknown primitive"):
        Schedule(pool.func).apply("tile_everything")
    with pytest.raises(ScheduleError, match="trace format version 99 is newer"):
        Schedule.replay(pool.func, '{"version": 99, "steps": []}')
    with pytest.raises(ScheduleError, match="trace step 0 does not apply"):
        Schedule.replay(pool.func, '{"version": 1, "steps": [{"op": "split", "args": {"loop": "q", "factors": [2, null]}}]}')
