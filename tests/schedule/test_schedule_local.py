"""``set_scope(..., "local")`` refuses a buffer that cannot live in registers, and is right when it can.

A local buffer becomes one scalar per element, so after compaction to its site every index
of it must be a constant once unrolled loops are replaced by their values. The primitive
checks that (``register_problem``); before, it accepted any buffer and the code generator
refused the kernel ("local buffer B lives in registers and needs constant in-bounds indices").
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from fuzz_steps import run_source

from autotune import ir, te
from autotune.codegen import generate_source
from autotune.errors import ScheduleError
from autotune.lowering import lower
from autotune.schedule import Schedule

A = np.arange(32, dtype=np.float32).reshape(8, 4)


def two_stages() -> Schedule:
    """``B = A + 1; C = B * 2`` on [8, 4], C's row loop split in two-row tiles (``io``, ``ii``, ``j_1``)."""
    a = te.placeholder((8, 4), "float32", name="A")
    b = te.compute((8, 4), lambda i, j: a[i, j] + 1.0, name="B")
    c = te.compute((8, 4), lambda i, j: b[i, j] * 2.0, name="C")
    return Schedule(te.create_func([a], [c], name="two")).split("i_1", [None, 2], names=["io", "ii"])


def refused(message: str) -> pytest.RaisesContext[ScheduleError]:
    return pytest.raises(ScheduleError, match="^" + re.escape(f"set_scope: local buffer 'B' lives in registers, one per element: {message}") + "$")


def run(sch: Schedule) -> np.ndarray:
    out = np.full((8, 4), np.nan, np.float32)
    run_source(lower(sch.func, verify=True), (A,), [out])
    return out


def test_a_buffer_indexed_by_a_serial_loop_is_refused():
    with refused("block 'B' indexes it with i, which varies with loop 'i' (serial); unroll the loops over it"):
        two_stages().set_scope("B", "B", "local")
    tile = two_stages().compute_at("B", "io")
    # per tile B is [2, 4], indexed from the tile's first row: its own loop i must be unrolled
    with refused("block 'B' indexes it with i, which varies with loop 'i' (serial); unroll the loops over it"):
        tile.set_scope("B", "B", "local")
    with refused("block 'B' indexes it with j, which varies with loop 'j' (serial); unroll the loops over it"):
        tile.unroll("i").set_scope("B", "B", "local")
    # and so must the consumer's
    with refused("block 'C' indexes it with ii, which varies with loop 'ii' (serial); unroll the loops over it"):
        tile.unroll("i").unroll("j").set_scope("B", "B", "local")


def test_a_tile_under_unrolled_loops_is_registers_and_right():
    sch = two_stages().compute_at("B", "io").unroll("i").unroll("j").unroll("ii").unroll("j_1").set_scope("B", "B", "local")
    lowered = lower(sch.func, verify=True)
    assert [ir.ann_get(a.annotations, "scope") for a in ir.collect(lowered.func.body, ir.Allocate)] == ["local"]
    text = generate_source(lowered.func).text
    assert "B_data" not in text and "B_7 = " in text and "B_8" not in text
    np.testing.assert_allclose(run(sch), (A + 1) * 2)


def test_a_loop_of_one_iteration_needs_no_unroll():
    sch = two_stages().split("io", [None, 4], names=["io0", "io1"]).compute_at("B", "io1")
    sch = sch.split("j_1", [1, None], names=["jo", "ji"]).unroll("i").unroll("j").unroll("ii").unroll("ji")
    # jo runs once: its variable is the constant 0 in every index
    np.testing.assert_allclose(run(sch.set_scope("B", "B", "local")), (A + 1) * 2)


def test_a_rolled_buffer_cannot_be_local():
    a = te.placeholder((10, 4), "float32", name="A")
    b = te.compute((9, 4), lambda i, j: a[i, j] + a[i + 1, j], name="B")
    c = te.compute((8, 4), lambda i, j: b[i, j] + b[i + 1, j], name="C")
    sch = Schedule(te.create_func([a], [c], name="rolled")).split("i_1", [None, 2], names=["io", "ii"])
    sch = sch.compute_at("B", "io").rolling_buffer("B").unroll("i").unroll("j").unroll("ii").unroll("j_1")
    with refused("block 'B' makes it a rolling buffer, indexed by a loop"):
        sch.set_scope("B", "B", "local")


def test_loops_changed_after_set_scope_leave_the_buffer_in_memory_and_right():
    sch = two_stages().compute_at("B", "io").unroll("i").unroll("j").unroll("ii").unroll("j_1").set_scope("B", "B", "local")
    # splitting an unrolled loop makes serial loops: compaction keeps B in memory instead of registers
    split = sch.split("j", [None, 2])
    allocs = [dict(a.annotations) for a in ir.collect(lower(split.func).func.body, ir.Allocate)]
    assert [a.get("scope") for a in allocs] == [None] and "pool" in allocs[0]
    np.testing.assert_allclose(run(split), (A + 1) * 2)


def wide_stages(rows: int, tile: int, cols: int = 64) -> Schedule:
    """``B = A + 1; C = B * 2`` on [rows, cols], B computed per ``tile`` rows of C, every loop under ``io`` unrolled."""
    a = te.placeholder((rows, cols), "float32", name="A")
    b = te.compute((rows, cols), lambda i, j: a[i, j] + 1.0, name="B")
    c = te.compute((rows, cols), lambda i, j: b[i, j] * 2.0, name="C")
    sch = Schedule(te.create_func([a], [c], name="wide")).split("i_1", [None, tile], names=["io", "ii"])
    return sch.compute_at("B", "io").unroll("i").unroll("j").unroll("ii").unroll("j_1")


def test_a_tile_of_the_register_limit_is_registers_and_right():
    sch = wide_stages(32, 16).set_scope("B", "B", "local")
    lowered = lower(sch.func, verify=True)
    [alloc] = ir.collect(lowered.func.body, ir.Allocate)
    assert ir.ann_get(alloc.annotations, "scope") == "local" and [ir.as_int(e) for e in alloc.extents] == [1024]
    a = np.arange(32 * 64, dtype=np.float32).reshape(32, 64)
    out = np.full((32, 64), np.nan, np.float32)
    run_source(lowered, (a,), [out])
    np.testing.assert_allclose(out, (a + 1) * 2)


def test_a_tile_over_the_register_limit_is_refused_by_set_scope():
    with refused("at its site (loop 'io') it holds [32, 64], 2048 elements, over the limit of 1024"):
        wide_stages(64, 32).set_scope("B", "B", "local")
    root = Schedule(wide_stages(40, 40, cols=32).original).unroll("i").unroll("j").unroll("i_1").unroll("j_1")
    with refused("at its site (the function body) it holds [40, 32], 1280 elements, over the limit of 1024"):
        root.set_scope("B", "B", "local")


def test_an_unrolled_loop_longer_than_the_code_generator_unrolls_is_refused_by_set_scope():
    with refused(
        "block 'B' indexes it with j, which varies with loop 'j' (unroll, 128 iterations: the code generator "
        "writes out at most 64); split it and unroll the inner loops"
    ):
        wide_stages(8, 2, cols=128).set_scope("B", "B", "local")


def later_refusal(primitive: str, reason: str) -> pytest.RaisesContext[ScheduleError]:
    message = f"{primitive}: local buffer 'B' lives in registers, one per element: {reason}"
    return pytest.raises(ScheduleError, match="^" + re.escape(message) + "$")


def test_a_later_step_that_enlarges_a_local_tile_past_the_limit_is_refused_by_that_step():
    sch = wide_stages(32, 16).set_scope("B", "B", "local")
    # a padded layout: each row of 64 becomes 2 x 48 places
    with later_refusal("transform_layout", "at its site (loop 'io') it holds [16, 2, 48], 1536 elements, over the limit of 1024"):
        sch.transform_layout("B", "B", lambda i, j: [i, j // 48, j % 48])
    # a wider read region of the consumer: 16 + 3 rows per tile
    with later_refusal("annotate_buffer_access", "at its site (loop 'io') it holds [19, 64], 1216 elements, over the limit of 1024"):
        sch.annotate_buffer_access("C", 0, "read", lambda i, j: [(i, i + 4), j])
    # the same steps within the limit are accepted
    sch.transform_layout("B", "B", lambda i, j: [i, j // 32, j % 32])
    small = wide_stages(32, 8).set_scope("B", "B", "local")
    small.annotate_buffer_access("C", 0, "read", lambda i, j: [(i, i + 4), j])


def test_an_unroll_that_makes_a_cached_local_buffer_registers_past_the_limit_is_refused():
    a = te.placeholder((64, 64), "float32", name="A")
    b = te.compute((64, 64), lambda i, j: a[i, j] + 1.0, name="B")
    c = te.compute((64, 64), lambda i, j: b[i, j] * 2.0, name="C")
    # a local cache indexed by serial loops stays in memory; unrolling its last loop would make it registers
    sch = Schedule(te.create_func([a], [c], name="cached")).cache_read("C", 0, "local")
    sch = sch.unroll("ax0").unroll("ax1").unroll("i_1")
    message = "unroll: local buffer 'B_local' lives in registers, one per element: at its site (the function body) it holds [64, 64], 4096 elements, over the limit of 1024"
    with pytest.raises(ScheduleError, match="^" + re.escape(message) + "$"):
        sch.unroll("j_1")


def test_a_local_buffer_over_the_limit_in_the_given_function_is_not_blamed_on_a_later_step():
    over = wide_stages(64, 32).func
    buf = next(b for b in ir.collect(over.body, ir.Block) if b.name == "root").alloc_buffers[0]
    func = ir.substitute(over, bmap={buf: buf.with_(scope="local")})
    Schedule(func).split("io", [None, 1])  # the step does not change B's size: accepted
