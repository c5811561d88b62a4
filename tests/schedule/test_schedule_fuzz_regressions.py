"""Defects the schedule fuzzer found, each as the smallest schedule that showed it.

Each was accepted by every primitive and then gave a wrong result, or was refused late by
``lower()`` or the code generator. Now the primitive refuses it (the exact message is asserted)
or the schedule computes the reference; next to each refusal a neighbouring schedule that is
right runs and matches numpy. Kernels run as plain Python on their planned storage
(``fuzz_steps.run_source``) unless a test says it compiles.
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
from autotune.schedule import AXIS_SEPARATOR, Schedule
from autotune.workloads import ops
from autotune.workloads import reference as ref


def refused(primitive: str, message: str) -> pytest.RaisesContext[ScheduleError]:
    return pytest.raises(ScheduleError, match="^" + re.escape(f"{primitive}: {message}") + "$")


def outputs(sch: Schedule, *inputs: np.ndarray) -> list[np.ndarray]:
    lowered = lower(sch.func, verify=True)
    out = [np.full(b.const_shape(), np.nan, b.dtype) for b in sch.func.outputs]
    run_source(lowered, inputs, out)
    return out


def pools() -> Schedule:
    """A 3x3 max pool then a 2x2 one, NHWC (``p1`` loops n y x_1 c rh rw; ``p2`` loops n_1 y_1 x_2 c_1 rh_1 rw_1)."""
    x = te.placeholder((1, 6, 6, 2), "float32", name="x")
    p1 = ops.max_pool2d(x, 3, name="p1")
    p2 = ops.max_pool2d(p1, 2, name="p2")
    return Schedule(te.create_func([x], [p2], name="pools"))


X = np.random.default_rng(0).standard_normal((1, 6, 6, 2)).astype(np.float32)
POOLS_REF = ref.max_pool2d(ref.max_pool2d(X, 3), 2)


# ---- decomposed reductions ------------------------------------------------------------------------


def test_compute_at_refuses_to_move_an_init_after_its_update():
    # accepted before: the init ran under the consumer's loop, after the update, and every output was -inf
    with refused(
        "compute_at",
        "block 'p1' also writes 'p1' after 'p1_init' and is not under loop 'y_1': computed there, 'p1_init' would run after it",
    ):
        pools().decompose_reduction("p1", "y").compute_at("p1_init", "y_1")


def test_compute_at_refuses_an_update_whose_init_is_decomposed():
    # accepted before: rows that consecutive tiles share were accumulated onto twice
    with refused(
        "compute_at",
        "block 'p1' accumulates into 'p1' and its init is a block of its own (decompose_reduction): the elements that "
        "consumers' tiles share would be accumulated again; compute_at before decompose_reduction",
    ):
        pools().decompose_reduction("p1", "rh").compute_at("p1", "y_1")
    right = pools().compute_at("p1", "y_1").decompose_reduction("p1", "rh")
    np.testing.assert_allclose(outputs(right, X)[0], POOLS_REF)


def test_compute_inline_refuses_a_buffer_that_another_block_writes():
    with refused("compute_inline", "'p1' is also written by ['p1']: inlined, their writes would be lost"):
        pools().decompose_reduction("p1", "y").compute_inline("p1_init")


def test_reverse_compute_inline_names_itself():
    a = te.placeholder((4, 4), "float32", name="A")
    b = te.compute((4, 4), lambda i, j: a[i, j] * 2.0, name="B")
    c = te.compute((2, 4), lambda i, j: b[i * 2, j] + 1.0, name="C")
    sch = Schedule(te.create_func([a], [c], name="strided"))
    # the refusal used to name reverse_compute_at, whose check it shares
    with refused("reverse_compute_inline", "block 'C' must read 'B' at its own spatial iter vars (elementwise)"):
        sch.reverse_compute_inline("C")


# ---- double buffers and rolling buffers ----------------------------------------------------------


def staged() -> Schedule:
    """``B = A + 1; C = B * 2`` over 16 elements, C's loop split (io, ii), B staged as B_global at io."""
    a = te.placeholder((16,), "float32", name="A")
    b = te.compute((16,), lambda i: a[i] + 1.0, name="B")
    c = te.compute((16,), lambda i: b[i] * 2.0, name="C")
    sch = Schedule(te.create_func([a], [c], name="staged")).split("i_1", [None, 4], names=["io", "ii"])
    return sch.cache_read("C", 0, "global").compute_at("B_global", "io")


def test_compute_at_refuses_the_source_of_a_double_buffer_under_its_prefetch_loop():
    # accepted before, and lower() failed: "buffer 'B' is used out of scope"
    with refused(
        "compute_at",
        "block 'B_global' copies 'B' in a double buffer prefetched over loop 'io'; under loop 'io', 'B' would write it "
        "after the prefetch of the next iteration has read it",
    ):
        staged().double_buffer("B_global").compute_at("B", "io")
    a = np.arange(16, dtype=np.float32)
    np.testing.assert_allclose(outputs(staged().double_buffer("B_global"), a)[0], (a + 1) * 2)


def test_compute_inline_refuses_a_producer_that_reads_a_double_buffer():
    a = te.placeholder((16,), "float32", name="A")
    b = te.compute((16,), lambda i: a[i] + 1.0, name="B")
    c = te.compute((16,), lambda i: b[i] * 2.0, name="C")
    d = te.compute((16,), lambda i: c[i] - 3.0, name="D")
    sch = Schedule(te.create_func([a], [d], name="chain3")).split("i_1", [None, 4], names=["io", "ii"])
    sch = sch.cache_read("C", 0, "global").compute_at("B_global", "io").double_buffer("B_global")
    # inlined into D, C's read of B_global would move out of loop io: lower() failed late
    with refused(
        "compute_inline",
        "block 'C' reads 'B_global', which block 'B_global' keeps in a double buffer over loop 'io'; moved, it would read "
        "it out of step with that loop (apply double_buffer after compute_inline)",
    ):
        sch.compute_inline("C")


def test_fuse_refuses_the_row_loop_of_a_rolled_block():
    sch = pools().compute_at("p1", "y_1").rolling_buffer("p1", 0)
    # accepted before; lower() then found no loop of the window's extent over the rolled dimension
    with refused("fuse", "loop 'y' runs the rows of block 'p1', which keeps a rolling buffer over loop 'y_1'; fuse it before rolling_buffer"):
        sch.fuse("y", "x_1")
    np.testing.assert_allclose(outputs(sch.fuse("x_1", "c"), X)[0], POOLS_REF)


# ---- regions ---------------------------------------------------------------------------------------


def test_a_constant_annotated_region_is_cut_to_the_buffer():
    a = te.placeholder((4, 4), "float32", name="A")
    b = te.compute((4, 4), lambda i, j: a[i, j] + 1.0, name="B")
    c = te.compute((4, 4), lambda i, j: b[i, j] * 2.0, name="C")
    sch = Schedule(te.create_func([a], [c], name="tiny"))
    # a region reaching row -1 and row 4 was kept, and the verifier refused it in lower()
    sch = sch.annotate_buffer_access("C", 0, "read", lambda i, j: [(-1, 5), (0, 4)])
    reads = next(blk for blk in ir.collect(sch.func.body, ir.Block) if blk.name == "C").reads
    assert ir.to_text(reads[0]) == "B[0:4, 0:4]"
    x = np.arange(16, dtype=np.float32).reshape(4, 4)
    np.testing.assert_allclose(outputs(sch, x)[0], (x + 1) * 2)


# ---- registers and outlined nests -------------------------------------------------------------------


def dense_chain() -> Schedule:
    x = te.placeholder((2, 3), "float32", name="x")
    w = te.placeholder((4, 3), "float32", name="w")
    d = ops.dense(x, w, name="d")
    r = ops.relu(d, name="r")
    return Schedule(te.create_func([x, w], [r], name="dense_relu"))


def test_a_local_cache_whose_loops_stay_serial_is_memory():
    # cache_write into `local` without unrolling its loops: the code generator refused the kernel
    # ("local buffer d_local lives in registers and needs constant in-bounds indices")
    sch = dense_chain().cache_write("d", 0, "local")
    lowered = lower(sch.func, verify=True)
    allocs = {a.data.name: dict(a.annotations) for a in ir.collect(lowered.func.body, ir.Allocate)}
    assert allocs["d_local_data"].get("scope") is None and "pool" in allocs["d_local_data"]
    generate_source(lowered.func)
    rng = np.random.default_rng(1)
    x, w = rng.standard_normal((2, 3)).astype(np.float32), rng.standard_normal((4, 3)).astype(np.float32)
    np.testing.assert_allclose(outputs(sch, x, w)[0], np.maximum(x @ w.T, 0), rtol=1e-5, atol=1e-6)


def test_set_vectorizer_refuses_an_outlined_reduction_loop():
    with refused(
        "set_vectorizer",
        "loop 'rh' cannot be outlined: it runs reduction axis 'v_rh' of block 'p1', whose accumulator is kept outside it",
    ):
        pools().set_vectorizer("slp", loop="rh")


def test_outlined_nests_refuse_threads_and_take_their_buffers_and_banks_as_arguments():
    sch = pools().compute_at("p1", "x_2").set_vectorizer("slp", loop="y_1")
    # p1 is used only inside y_1's nest: it is allocated above it and passed in
    # (the code generator refused "outlined loop 'y_1' declares buffer p1")
    text = generate_source(lower(sch.func).func).text
    assert "pools_y_1(x_flat, p1_data, p2_flat)\n" in text
    np.testing.assert_allclose(outputs(sch, X)[0], POOLS_REF)
    # a banked buffer is passed as its tuple of banks: one per row of p1's tile (4 rows)
    banked = sch.transform_layout("p1", "p1", lambda n, y, x, c: [n, y, AXIS_SEPARATOR, x, c])
    text = generate_source(lower(banked.func).func).text
    assert '"void(float32[::1], UniTuple(float32[::1], 4), float32[::1])"' in text, text
    assert "pools_y_1(x_flat, p1, p2_flat)\n" in text
    np.testing.assert_allclose(outputs(banked, X)[0], POOLS_REF)
    with refused("parallel", "loop 'c_1' is in the nest of loop 'y_1', outlined by set_vectorizer: an outlined nest runs on one thread"):
        sch.parallel("c_1")


@pytest.mark.parametrize("order", ["outline first", "double buffer first"])
def test_a_double_buffer_inside_an_outlined_nest_is_passed_as_its_two_slots(order: str):
    # the two slots of a double buffer reach the outlined function as a tuple of two arrays
    # (refused before: "an outlined nest cannot take the two slots of a double buffer")
    if order == "outline first":
        sch = staged().set_vectorizer("slp", loop="io").double_buffer("B_global")
    else:
        sch = staged().double_buffer("B_global").set_vectorizer("slp", loop="io")
    text = generate_source(lower(sch.func).func).text
    assert "UniTuple(float32[::1], 2)" in text, text
    a = np.arange(16, dtype=np.float32)
    np.testing.assert_allclose(outputs(sch, a)[0], (a + 1) * 2)


def test_reverse_compute_inline_refuses_a_double_buffered_producer():
    a = te.placeholder((16,), "float32", name="A")
    b = te.compute((16,), lambda i: a[i] + 1.0, name="B")
    c = te.compute((16,), lambda i: b[i] * 2.0, name="C")
    d = te.compute((16,), lambda i: c[i] - 1.0, name="D")
    sch = Schedule(te.create_func([a], [d], name="chain3")).split("i_2", [None, 4], names=["io", "ii"])
    sch = sch.compute_at("C", "io").double_buffer("C")
    # accepted before: C then wrote the function's output D through a double buffer, and lower() failed
    with refused(
        "reverse_compute_inline",
        "block 'C' keeps a double buffer over loop 'io', which depends on where it is computed; apply double_buffer "
        "after reverse_compute_inline",
    ):
        sch.reverse_compute_inline("D")


# ---- open: decompose_reduction (primitives/reduction.py) ---------------------------------------------


def avg_then_max() -> tuple[Schedule, np.ndarray]:
    x = te.placeholder((1, 6, 6, 2), "float32", name="x")
    p1 = ops.avg_pool2d(x, 3, name="p1")
    p2 = ops.max_pool2d(p1, 2, name="p2")
    return Schedule(te.create_func([x], [p2], name="pools")), ref.max_pool2d(ref.avg_pool2d(X, 3), 2)


def test_decompose_reduction_of_a_block_recomputed_under_the_loop_is_refused():
    # p1 is computed at the consumer's reduction loop rw_1, so each p1 element is computed again for
    # every window that reads it; one init above y_1 would let the repeats accumulate (12 of 18 outputs wrong)
    sch, _ = avg_then_max()
    sch = sch.compute_at("p1", "rw_1")
    with pytest.raises(ScheduleError, match=r"^decompose_reduction: .*one init before 'y_1' would let the repeats accumulate$"):
        sch.decompose_reduction("p1", "y_1")


def test_decompose_reduction_of_a_double_buffered_block_is_refused():
    x = te.placeholder((4, 3), "float32", name="x")
    w = te.placeholder((2, 3), "float32", name="w")
    r = ops.relu(ops.dense(x, w, name="d"), name="r")
    sch = Schedule(te.create_func([x, w], [r], name="dense_relu")).split("i0", [None, 2])
    sch = sch.compute_at("d", "i0_0").double_buffer("d")
    with pytest.raises(ScheduleError, match=r"^decompose_reduction: block 'd' keeps a double buffer over loop 'i0_0'"):
        sch.decompose_reduction("d", "i0_0")


def test_compute_at_moves_a_reader_of_banks_into_an_outlined_nest():
    a = te.placeholder((16,), "float32", name="A")
    b = te.compute((16,), lambda i: a[i] + 1.0, name="B")
    c = te.compute((16,), lambda i: b[i] * 2.0, name="C")
    d = te.compute((16,), lambda i: c[i] - 1.0, name="D")
    sch = Schedule(te.create_func([a], [d], name="chain3")).split("i_2", [None, 4], names=["io", "ii"])
    sch = sch.transform_layout("B", "B", lambda i: [i // 8, AXIS_SEPARATOR, i % 8]).set_vectorizer("slp", loop="io")
    # the outlined function takes B's two banks as a tuple of arrays
    moved = sch.compute_at("C", "io")
    assert "UniTuple(float32[::1], 2)" in generate_source(lower(moved.func).func).text
    x = np.arange(16, dtype=np.float32)
    np.testing.assert_allclose(outputs(sch, x)[0], (x + 1) * 2 - 1)
    np.testing.assert_allclose(outputs(moved, x)[0], (x + 1) * 2 - 1)


def test_a_trusted_read_region_wholly_outside_the_buffer_is_refused():
    x = te.placeholder((1, 2, 3, 6), "float32", name="x")
    r = ops.resize2d_nchw(x, (2, 5), "nearest", name="resize")
    sch = Schedule(te.create_func([x], [r], name="resize"))
    # the resize's index needs float math, so its annotation is trusted; batch row n + 1 does not exist
    # (accepted before: with a producer computed at the resize's loop, the fuzzer's case computed only
    # that missing row, and every output was NaN)
    with refused(
        "annotate_buffer_access",
        "the region x[v_n + 1, v_c, 0:3, 0:6] of block 'resize' lies outside 'x' (dimension 0, extent 1) for some of its iterations",
    ):
        sch.annotate_buffer_access("resize", 0, "read", lambda n, c, y, w: [n + 1, c, (0, 3), (0, 6)])
    sch.annotate_buffer_access("resize", 0, "read", lambda n, c, y, w: [n, c, (0, 3), (0, 6)])


def test_rolling_buffer_refuses_a_buffer_with_another_writer():
    x = te.placeholder((1, 6, 6, 2), "float32", name="x")
    p2 = ops.max_pool2d(ops.avg_pool2d(x, 3, name="p1"), 2, name="p2")
    sch = Schedule(te.create_func([x], [p2], name="pools")).compute_at("p1", "y_1").decompose_reduction("p1", "rh")
    # accepted before: the init skipped the rows that the tiles share, the update added to them again
    with refused("rolling_buffer", "'p1' has other writers besides 'p1_init': ['p1']"):
        sch.rolling_buffer("p1_init")


def test_split_of_a_rolled_row_loop_keeps_whole_steps():
    sch = pools().split("y_1", [None, 2]).compute_at("p1", "y_1_0").rolling_buffer("p1")
    # 3 rows split by 2 left a predicate and no loop over the window: lower() refused it late
    with refused(
        "split",
        "loop 'y' runs the rows of block 'p1', which keeps a rolling buffer over loop 'y_1_0'; split it into two loops "
        "whose inner one divides its 3 rows, or before rolling_buffer",
    ):
        sch.split("y", [None, 2])
    np.testing.assert_allclose(outputs(sch.split("y", [None, 1]), X)[0], POOLS_REF)
