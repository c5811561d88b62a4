"""Schedules that would compute wrong results are refused by the primitive; their correct neighbours still run.

Each refusal names the primitive, the block, loop or buffer and the reason; next to each one a
schedule that differs only in what made it wrong is compiled and compared with numpy.
"""

from __future__ import annotations

import re
from dataclasses import replace

import numpy as np
import pytest

from autotune import ir, te
from autotune.codegen import build, generate_source
from autotune.errors import CodegenError, ScheduleError
from autotune.lowering import lower
from autotune.schedule import AXIS_SEPARATOR, Schedule
from autotune.schedule.recipes import cascade
from autotune.schedule.tree import replace_stmt
from autotune.workloads import ops


def run(sch: Schedule, *inputs: np.ndarray) -> list[np.ndarray]:
    """Lower, compile and run ``sch`` on ``inputs``; the outputs, NaN-filled before the call."""
    lowered = lower(sch.func, verify=True)
    kernel = build(lowered.func, lowered.plan)
    outputs = [np.full(b.const_shape(), np.nan, b.dtype) for b in sch.func.outputs]
    kernel(*inputs, *outputs)
    return outputs


def refused(primitive: str, message: str) -> pytest.RaisesContext[ScheduleError]:
    """``pytest.raises`` for a ScheduleError whose whole text is ``primitive: message``."""
    return pytest.raises(ScheduleError, match="^" + re.escape(f"{primitive}: {message}") + "$")


def rng_inputs(func: ir.Func, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(b.const_shape()).astype(b.dtype) for b in func.inputs]


# ---- parallel and double_buffer ---------------------------------------------------------------


def staged(n: int = 32, splits: tuple[int | None, ...] = (None, 4), names: tuple[str, ...] = ("io", "ii")) -> Schedule:
    """``B = A * 2`` with its loop split, A staged tile by tile (``A_global``) at loop ``io``."""
    a = te.placeholder((n,), "float32", name="A")
    b = te.compute((n,), lambda i: a[i] * 2.0, name="B")
    sch = Schedule(te.create_func([a], [b], name="stage")).split("i", list(splits), names=list(names))
    return sch.cache_read("B", 0, "global").compute_at("A_global", "io")


RACE = "on several threads the prefetch of iteration i+1"


def test_parallel_refuses_the_loop_that_fills_a_double_buffer() -> None:
    # accepted before, and 19 of 20 runs were wrong: the prefetch of io+1 wrote the slot io-1 read
    sch = staged().double_buffer("A_global")
    with refused(
        "parallel",
        f"loop 'io' fills the double buffer of block 'A_global': {RACE} overwrites the slot that iteration i-1 reads",
    ):
        sch.parallel("io")


def test_double_buffer_refuses_a_parallel_loop() -> None:
    sch = staged().parallel("io")
    with refused(
        "double_buffer",
        f"loop 'io' is parallel: {RACE} of block 'A_global' overwrites the slot that iteration i-1 reads",
    ):
        sch.double_buffer("A_global")


@pytest.mark.parametrize("primitive", ["split", "fuse"])
def test_the_double_buffered_loop_keeps_its_name(primitive: str) -> None:
    # a renamed loop left the tag naming 'io', and lowering refused what the schedule had accepted
    sch = staged(splits=(2, None, 4), names=("par", "io", "ii")).double_buffer("A_global")
    with refused(primitive, f"loop 'io' carries the double buffer of block 'A_global'; {primitive} it before double_buffer"):
        if primitive == "split":
            sch.split("io", [2, None])
        else:
            sch.fuse("par", "io")


@pytest.mark.slow
def test_double_buffer_under_a_parallel_outer_loop_equals_numpy() -> None:
    # the outer loop is parallel, the double-buffered loop inside it serial: each thread has its own two slots
    sch = staged(n=64, splits=(2, None, 4), names=("par", "io", "ii")).double_buffer("A_global").parallel("par")
    assert sch.get_loop("par").kind == ir.ForKind.PARALLEL
    for seed in range(3):
        (x,) = rng_inputs(sch.func, seed)
        (out,) = run(sch, x)
        np.testing.assert_array_equal(out, x * 2.0)


@pytest.mark.slow
def test_parallel_staging_without_double_buffer_equals_numpy() -> None:
    sch = staged().parallel("io")
    (x,) = rng_inputs(sch.func)
    (out,) = run(sch, x)
    np.testing.assert_array_equal(out, x * 2.0)


# ---- transform_layout ------------------------------------------------------------------------


def scaled(rows: int = 4, cols: int = 3) -> Schedule:
    """``B = A * 2; C = B + 1`` over [rows, cols]: B is the intermediate to lay out."""
    a = te.placeholder((rows, cols), "float32", name="A")
    b = te.compute((rows, cols), lambda i, j: a[i, j] * 2.0, name="B")
    c = te.compute((rows, cols), lambda i, j: b[i, j] + 1.0, name="C")
    return Schedule(te.create_func([a], [c]))


def test_transform_layout_refuses_a_map_that_is_not_injective() -> None:
    # [i // 2 | i // 2, j] has as many places as B has elements, but rows 0 and 1 share them
    with refused("transform_layout", "index map is not injective on 'B': elements [0, 0] and [1, 0] both map to [0, 0, 0]"):
        scaled().transform_layout("B", "B", lambda i, j: [i // 2, AXIS_SEPARATOR, i // 2, j])


@pytest.mark.slow
@pytest.mark.parametrize(
    "index_map",
    [
        lambda i, j: [i // 2, AXIS_SEPARATOR, i % 2, j],
        lambda i, j: [j, i],
        lambda i, j: [i * 3 + j],
        lambda i, j: [i % 2, AXIS_SEPARATOR, i // 2, j],
    ],
    ids=["banks", "transpose", "flat", "interleaved"],
)
def test_transform_layout_bijections_equal_numpy(index_map) -> None:  # type: ignore[no-untyped-def]
    sch = scaled().transform_layout("B", "B", index_map)
    (x,) = rng_inputs(sch.func)
    (out,) = run(sch, x)
    np.testing.assert_array_equal(out, x * np.float32(2.0) + np.float32(1.0))


# ---- reverse_compute_at ----------------------------------------------------------------------


def matmul_relu(m: int = 4, k: int = 6, n: int = 5) -> Schedule:
    """``relu(A @ B)``: matmul loops i, j, k; relu loops i0, i1."""
    a = te.placeholder((m, k), "float32", name="A")
    b = te.placeholder((k, n), "float32", name="B")
    return Schedule(te.create_func([a, b], [ops.relu(ops.matmul(a, b))]))


@pytest.mark.parametrize(
    ("steps", "carrier", "loop"),
    [
        (lambda s: s, "k", "k"),
        (lambda s: s.reorder("k", "j"), "k", "j"),
        (lambda s: s.split("k", [None, 2]), "k_0", "k_1"),
    ],
    ids=["at-k", "under-k", "under-split-k"],
)
def test_reverse_compute_at_refuses_a_reduction_loop_of_the_producer(steps, carrier: str, loop: str) -> None:  # type: ignore[no-untyped-def]
    # accepted before: with k outside j, relu read partial sums (max error 1.54 on these shapes)
    with refused(
        "reverse_compute_at",
        f"loop '{carrier}' runs reduction axis 'v_k' of block 'matmul': under loop '{loop}', 'relu' would read "
        "partial results of 'matmul'",
    ):
        steps(matmul_relu()).reverse_compute_at("relu", loop)


@pytest.mark.slow
@pytest.mark.parametrize("loop", ["i", "j"])
def test_reverse_compute_at_above_the_reduction_equals_numpy(loop: str) -> None:
    sch = matmul_relu().reverse_compute_at("relu", loop)
    x, y = rng_inputs(sch.func)
    (out,) = run(sch, x, y)
    np.testing.assert_allclose(out, np.maximum(x @ y, 0), rtol=1e-5, atol=1e-5)


def two_activations() -> Schedule:
    """``q = relu(A); r = relu6(A); s = q + r``: loops i0 (q), i0_1 (r), i0_2 (s)."""
    a = te.placeholder((4, 6), "float32", name="A")
    q, r = ops.relu(a, name="q"), ops.relu6(a, name="r")
    return Schedule(te.create_func([a], [ops.add(q, r, name="s")]))


def test_reverse_compute_at_refuses_a_loop_before_another_producer() -> None:
    # accepted before: s moved into q's loop read r before r's loop ran (NaN on every run)
    with refused(
        "reverse_compute_at",
        "block 'r' writes 'r' after loop 'i0': under the loop, 's' would read 'r' before it is written",
    ):
        two_activations().reverse_compute_at("s", "i0")


def test_reverse_compute_at_refuses_a_loop_before_a_staged_copy() -> None:
    # the copy of the bias that cache_read places before dense_bias comes after dense's loops
    d, w, b = (te.placeholder(s, "float32", name=n) for s, n in (((3, 4), "D"), ((5, 4), "W"), ((5,), "bias")))
    sch = Schedule(te.create_func([d, w, b], [ops.dense(d, w, b)])).cache_read("dense_bias", 1, "global")
    with refused(
        "reverse_compute_at",
        "block 'bias_global' writes 'bias_global' after loop 'i': under the loop, 'dense_bias' would read "
        "'bias_global' before it is written",
    ):
        sch.reverse_compute_at("dense_bias", "i")


@pytest.mark.slow
def test_reverse_compute_at_after_both_producers_equals_numpy() -> None:
    sch = two_activations().reverse_compute_at("s", "i0_1")
    (x,) = rng_inputs(sch.func)
    x *= 4
    (out,) = run(sch, x)
    np.testing.assert_allclose(out, np.maximum(x, 0) + np.clip(x, 0, 6), rtol=1e-6)


# ---- moving a block after rolling_buffer or double_buffer ------------------------------------


def pools(rows: int = 8) -> Schedule:
    """Two 3x3 max pools and a relu over X[1, rows, 5, 1], cascaded over 2-row tiles of p2, p1 rolling at y_1_0."""
    x = te.placeholder((1, rows, 5, 1), "float32", name="X")
    p2 = ops.max_pool2d(ops.max_pool2d(x, 3, name="p1"), 3, name="p2")
    sch = Schedule(te.create_func([x], [ops.relu(p2, name="p3")]))
    return cascade(sch.func, "p2", ["p1"], tile=2, rolling=["p1"])


def pools_reference(x: np.ndarray) -> np.ndarray:
    windows = np.lib.stride_tricks.sliding_window_view(x, (5, 5), axis=(1, 2))
    return np.maximum(windows.max(axis=(-2, -1)), 0)


def test_compute_at_refuses_to_move_a_rolled_block() -> None:
    # accepted before: p1 moved under p2's reduction loop was refused only by lowering
    sch = pools()
    with refused(
        "compute_at",
        "block 'p1' keeps a rolling buffer over loop 'y_1_0', which depends on where it is computed; "
        "apply rolling_buffer after compute_at",
    ):
        sch.compute_at("p1", "rw_1")


def test_compute_at_refuses_to_move_the_reader_of_a_rolled_buffer() -> None:
    # accepted before: p2 moved out of y_1_0 read rows p1's window no longer held (2 of 4 outputs wrong)
    sch = pools()
    with refused(
        "compute_at",
        "block 'p2' reads 'p1', which block 'p1' keeps in a rolling buffer over loop 'y_1_0'; moved, it would read "
        "it out of step with that loop (apply rolling_buffer after compute_at)",
    ):
        sch.compute_at("p2", "i1")


def test_reverse_compute_at_refuses_to_move_the_reader_of_a_double_buffer() -> None:
    sch = staged(splits=(2, None, 4), names=("par", "io", "ii")).double_buffer("A_global")
    with refused(
        "reverse_compute_at",
        "block 'B' reads 'A_global', which block 'A_global' keeps in a double buffer over loop 'io'; moved, it would "
        "read it out of step with that loop (apply double_buffer after reverse_compute_at)",
    ):
        sch.reverse_compute_at("B", "par")


@pytest.mark.slow
def test_rolling_buffer_after_every_move_equals_numpy() -> None:
    # the same moves, rolling applied last: p2 computed at p3's row loop and p1 rolling under it
    x = te.placeholder((1, 8, 5, 1), "float32", name="X")
    p2 = ops.max_pool2d(ops.max_pool2d(x, 3, name="p1"), 3, name="p2")
    sch = Schedule(te.create_func([x], [ops.relu(p2, name="p3")])).split("i1", [None, 2], names=["t", "r"])
    sch = sch.compute_at("p2", "t").compute_at("p1", "t").rolling_buffer("p1", 0)
    (xi,) = rng_inputs(sch.func)
    (out,) = run(sch, xi)
    np.testing.assert_allclose(out, pools_reference(xi), rtol=1e-6)
    (out,) = run(pools(), xi)
    np.testing.assert_allclose(out, pools_reference(xi), rtol=1e-6)


# ---- annotate_buffer_access ------------------------------------------------------------------


def doubled_relu() -> Schedule:
    """``B = A * 2; C = relu(B)`` over [4, 8]: loops i, j (B) and i0, i1 (C)."""
    a = te.placeholder((4, 8), "float32", name="A")
    b = te.compute((4, 8), lambda i, j: a[i, j] * 2.0, name="B")
    return Schedule(te.create_func([a], [ops.relu(b, name="C")]))


@pytest.mark.parametrize(
    ("region", "shown", "dim"),
    [
        (lambda i, j: ((i - 1, i + 1), j), "B[v_i - 1:v_i - 1 + 2, v_j]", 0),
        (lambda i, j: (i, (j, j + 2)), "B[v_i, v_j:v_j + 2]", 1),
    ],
    ids=["rows", "columns"],
)
def test_annotate_buffer_access_refuses_a_wider_write_region(region, shown: str, dim: int) -> None:  # type: ignore[no-untyped-def]
    # accepted before: with C then moved under B's loop i, 24 of 32 outputs read rows no iteration wrote
    with refused(
        "annotate_buffer_access",
        f"the write region {shown} of block 'B' is wider than what it writes, B[v_i, v_j] (dimension {dim}): "
        "a consumer computed over it would read elements that no iteration wrote",
    ):
        doubled_relu().annotate_buffer_access("B", 0, "write", region)


def test_annotate_buffer_access_refuses_a_shifted_write_region() -> None:
    with refused(
        "annotate_buffer_access",
        "the write region B[v_i, v_j + 1] of block 'B' is not what it writes, B[v_i, v_j] (dimension 1): "
        "a write region must be exactly what the block writes",
    ):
        doubled_relu().annotate_buffer_access("B", 0, "write", lambda i, j: (i, j + 1))


@pytest.mark.slow
def test_exact_write_region_then_reverse_compute_at_equals_numpy() -> None:
    sch = doubled_relu().annotate_buffer_access("B", 0, "write", lambda i, j: (i, j)).reverse_compute_at("C", "i")
    (x,) = rng_inputs(sch.func)
    (out,) = run(sch, x)
    np.testing.assert_array_equal(out, np.maximum(x * np.float32(2.0), 0))


def test_transform_layout_refuses_a_rolled_buffer() -> None:
    # accepted before, then refused by lowering: "inject_rolling_buffer: block 'p1' has no loop of extent 4 over dimension 1"
    with refused(
        "transform_layout",
        "'p1' is a rolling buffer of block 'p1' over its dimension 1; transform the layout before rolling_buffer",
    ):
        pools().transform_layout("p1", "p1", lambda n, y, x, c: [n, x, y, c])


@pytest.mark.slow
def test_transform_layout_before_rolling_buffer_equals_numpy() -> None:
    x = te.placeholder((1, 8, 5, 1), "float32", name="X")
    p2 = ops.max_pool2d(ops.max_pool2d(x, 3, name="p1"), 3, name="p2")
    sch = cascade(te.create_func([x], [ops.relu(p2, name="p3")]), "p2", ["p1"], tile=2)
    sch = sch.transform_layout("p1", "p1", lambda n, y, x, c: [n, y, c, x]).rolling_buffer("p1", 0)
    (xi,) = rng_inputs(sch.func)
    (out,) = run(sch, xi)
    np.testing.assert_allclose(out, pools_reference(xi), rtol=1e-6)


def test_double_buffer_refuses_a_copy_of_a_tile_computed_in_the_same_loop() -> None:
    # accepted before, then refused by the code generator: "buffer B is used outside its declaration"
    a = te.placeholder((16,), "float32", name="A")
    b = te.compute((16,), lambda i: a[i] * 2.0, name="B")
    c = te.compute((16,), lambda i: b[i] + 1.0, name="C")
    sch = Schedule(te.create_func([a], [c])).split("i_1", [None, 4], names=["o", "t"]).cache_read("C", 0, "global")
    sch = sch.compute_at("B_global", "o").compute_at("B", "o")
    with refused(
        "double_buffer",
        "block 'B' produces 'B', which 'B_global' reads, inside loop 'o': the prefetch of iteration i+1 would read "
        "it before it is computed",
    ):
        sch.double_buffer("B_global")


def test_more_banks_than_numba_takes_are_refused_before_numba() -> None:
    # accepted by every step before and refused by numba at the kernel's first call; the bank count is
    # known only after compaction, so the code generator refuses it, before numba
    a = te.placeholder((202,), "float32", name="A")
    b = te.compute((202,), lambda i: a[i] * 2.0, name="B")
    c = te.compute((202,), lambda i: b[i] + 1.0, name="C")
    sch = Schedule(te.create_func([a], [c])).transform_layout("B", "B", lambda i: [i // 2, AXIS_SEPARATOR, i % 2])
    with pytest.raises(CodegenError, match=r"^codegen: buffer B has 101 banks; a kernel takes at most 100 \("):
        generate_source(lower(sch.func).func)


# ---- compute_at moves a block's predicate onto its new loops ---------------------------------


def doubled_plus_one(rows: int = 5) -> Schedule:
    """``B = A * 2; C = B + 1`` over [rows, 4]: loops x, y (B) and x_1, y_1 (C)."""
    a = te.placeholder((rows, 4), "float32", name="A")
    b = te.compute((rows, 4), lambda x, y: a[x, y] * 2.0, name="B")
    return Schedule(te.create_func([a], [te.compute((rows, 4), lambda x, y: b[x, y] + 1.0, name="C")]))


@pytest.mark.slow
def test_compute_at_after_a_non_dividing_split_of_the_producer_equals_numpy() -> None:
    # the predicate x_0 * 3 + x_1_1 < 5 of the split used to stay, naming loops compute_at removed:
    # build() refused with "variable x_0 is used outside any loop that defines it"
    sch = doubled_plus_one().split("x", [None, 3]).split("x_1", [None, 2], names=["co", "ci"]).compute_at("B", "co")
    text = str(sch.func)
    assert "T.where(co * 2 + ax < 5)" in text and "x_0" not in text
    (x,) = rng_inputs(sch.func)
    (out,) = run(sch, x)
    np.testing.assert_array_equal(out, x * np.float32(2.0) + np.float32(1.0))


@pytest.mark.slow
def test_compute_at_twice_keeps_only_the_new_clipping() -> None:
    # the first compute_at clips B's rows at the padding with conditions on its loop i1; the second replaces them
    x = te.placeholder((1, 7, 5, 2), "float32", name="X")
    pool = ops.max_pool2d(ops.relu(x, name="B"), 3, padding=1, name="P")
    sch = Schedule(te.create_func([x], [pool])).split("y", [None, 2, 2], names=["yo", "yi", "yr"])
    sch = sch.compute_at("B", "yi").compute_at("B", "yr")
    assert "T.where(0 <= yo * 4 + yi * 2 + yr + ax - 1 and yo * 4 + yi * 2 + yr + ax - 1 < 7)" in str(sch.func)
    (xi,) = rng_inputs(sch.func)
    (out,) = run(sch, xi)
    padded = np.pad(np.maximum(xi, 0), ((0, 0), (1, 1), (1, 1), (0, 0)), constant_values=-np.inf)
    want = np.lib.stride_tricks.sliding_window_view(padded, (3, 3), axis=(1, 2)).max(axis=(-2, -1))
    np.testing.assert_array_equal(out, want)


def test_compute_at_refuses_a_predicate_it_cannot_move() -> None:
    # a condition on a loop of the old nest that is no binding of the block cannot be written on the new loops
    sch = doubled_plus_one(rows=6).split("x", [None, 2], names=["xo", "xi"])
    block = next(b for b in ir.collect(sch.func.body, ir.Block) if b.name == "B")
    xi = next(f.loop_var for f in ir.collect(sch.func.body, ir.For) if f.loop_var.name == "xi")
    func = replace_stmt(sch.func, block, replace(block, predicate=ir.LT(xi, ir.const(1))))
    with refused("compute_at", "the predicate xi < 1 of block 'B' needs loops ['xi'], which are not around its new place"):
        Schedule(func).compute_at("B", "x_1")


def relu_pool() -> Schedule:
    """``B = relu(X); P = max_pool2d(B, 3)`` over X[1, 8, 5, 1]: P reads B through a 3x3 window."""
    x = te.placeholder((1, 8, 5, 1), "float32", name="X")
    return Schedule(te.create_func([x], [ops.max_pool2d(ops.relu(x, name="B"), 3, name="P")]))


def test_annotate_buffer_access_refuses_a_read_region_that_misses_the_window() -> None:
    # accepted before: B computed at P's 2-row tiles then covered 2 of the 3 rows each window reads (4 of 12 wrong)
    with refused(
        "annotate_buffer_access",
        "the read region B[v_n, v_y:v_y + 2, v_x:v_x + 3, v_c] of block 'P' misses elements it reads, "
        "B[v_n, v_y:v_y + 3, v_x:v_x + 3, v_c] (dimension 1): compute_at and compaction would leave them uncomputed",
    ):
        relu_pool().annotate_buffer_access("P", 1, "read", lambda n, y, x, c, rh, rw: (n, (y, y + 2), (x, x + 3), c))


@pytest.mark.slow
def test_a_wider_read_region_equals_numpy() -> None:
    sch = relu_pool().annotate_buffer_access("P", 1, "read", lambda n, y, x, c, rh, rw: (n, (y - 1, y + 4), (x, x + 3), c))
    sch = sch.split("y", [None, 2]).compute_at("B", "y_0")
    (xi,) = rng_inputs(sch.func)
    (out,) = run(sch, xi)
    want = np.lib.stride_tricks.sliding_window_view(np.maximum(xi, 0), (3, 3), axis=(1, 2)).max(axis=(-2, -1))
    np.testing.assert_array_equal(out, want)


def test_reorder_refuses_to_move_the_double_buffered_loop() -> None:
    # accepted before, then refused by the verifier after inject_double_buffer: "variable 'par' is used outside ..."
    sch = staged(splits=(2, None, 4), names=("par", "io", "ii")).double_buffer("A_global")
    with refused("reorder", "loop 'io' carries the double buffer of block 'A_global'; reorder it before double_buffer"):
        sch.reorder("io", "par")


def test_transform_layout_padding_can_be_forbidden() -> None:
    # [i // 4 | i % 4] on 7 elements has 8 places: padded unless the caller says padding=False
    sch = doubled_plus_one(rows=7)
    index_map = [["//", ["v", 0], 4], AXIS_SEPARATOR, ["%", ["v", 0], 4], ["v", 1]]
    padded = sch.apply("transform_layout", block="B", buffer="B", index_map=index_map)
    assert "B = T.alloc_buffer((2, 4, 4)" in str(padded.func)
    with refused("transform_layout", "index map pads 'B' [7, 4] to [2, 4, 4] (32 places for 28 elements) and padding is off"):
        sch.apply("transform_layout", block="B", buffer="B", index_map=index_map, padding=False)
    exact = sch.apply("transform_layout", block="B", buffer="B", index_map=[["v", 1], ["v", 0]], padding=False)
    assert str(Schedule.replay(exact.original, exact.trace).func) == str(exact.func)
    # the Schedule method takes it too, and records it only when it is off
    with refused("transform_layout", "index map pads 'B' [7, 4] to [2, 4, 4] (32 places for 28 elements) and padding is off"):
        sch.transform_layout("B", "B", lambda i, j: [i // 4, AXIS_SEPARATOR, i % 4, j], padding=False)
    assert sch.transform_layout("B", "B", lambda i, j: [j, i], padding=False).trace[-1] == exact.trace[-1]
    assert "padding" not in sch.transform_layout("B", "B", lambda i, j: [j, i]).trace_json()


@pytest.mark.slow
def test_a_padded_layout_equals_numpy() -> None:
    index_map = [["//", ["v", 0], 4], AXIS_SEPARATOR, ["%", ["v", 0], 4], ["v", 1]]
    sch = doubled_plus_one(rows=7).apply("transform_layout", block="B", buffer="B", index_map=index_map)
    (x,) = rng_inputs(sch.func)
    (out,) = run(sch, x)
    np.testing.assert_array_equal(out, x * np.float32(2.0) + np.float32(1.0))
