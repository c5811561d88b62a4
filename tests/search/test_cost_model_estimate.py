"""The roofline estimate among the features: its exact cycles on small loop nests written here."""

from __future__ import annotations

import math

import pytest

from autotune import ir
from autotune.memory import Pool
from autotune.memory.lowering import empty_plan
from autotune.search.features import FEATURE_NAMES, features
from autotune.search.features_estimate import CYCLES_PER_NS, Access, Loop, roofline, slides
from autotune.search.target import Target

TARGET = Target("test", cores=2, vector_bits=512, vector_registers=32)  # 16 float32 lanes
A = ir.decl_buffer("A", (256,))
B = ir.decl_buffer("B", (128,))
O = ir.decl_buffer("O", (4,))
I, K, J = ir.Var("i"), ir.Var("k"), ir.Var("j")
PLAN = empty_plan((Pool("sram", 1 << 20),))


def loop(var: ir.Var, extent: int, body: ir.Stmt, kind: str = "serial") -> ir.Stmt:
    return ir.For(var, ir.const(0), ir.const(extent), kind, body)


def compute_cycles(body: ir.Stmt) -> float:
    x = features(ir.Func("f", (A, B, O), body), PLAN, target=TARGET)
    return (2.0 ** x["log2_compute_ns"] - 1.0) * CYCLES_PER_NS


def test_the_estimate_is_among_the_features() -> None:
    for name in ("log2_estimate_ns", "log2_compute_ns", "log2_memory_ns", "vector_op_frac", "ops_ratio"):
        assert name in FEATURE_NAMES


def test_a_dot_product_along_contiguous_rows_vectorises_and_waits_on_its_accumulator() -> None:
    # for i: O[i] = 0; for k in 64: O[i] = O[i] + A[i*64 + k] * B[k]
    update = ir.BufferStore(O, O[I] + A[I * 64 + K] * B[K], (I,))
    body = loop(I, 4, ir.seq(ir.BufferStore(O, ir.const(0.0), (I,)), loop(K, 64, update)))
    # the update: 16 lanes; issue (2 ops x 0.5 + 2 moving loads x 0.5 + a store) / 16 + a loop step / 16
    # = 0.25 cycles, but O[i] in memory takes 6 cycles per update over 16 lanes: 0.375, 256 times;
    # the init: a loop of 4 stores, which LLVM unrolls whole: 4 scalar stores of a cycle each
    assert compute_cycles(body) == pytest.approx(0.375 * 256 + 4 * 1.0)
    x = features(ir.Func("f", (A, B, O), body), PLAN, target=TARGET)
    assert x["vector_op_frac"] == 1.0 and x["latency_bound_frac"] == pytest.approx(96 / 100)


def test_a_strided_read_keeps_it_on_one_lane() -> None:
    # B[k * 2]: two elements per step of k, a gather: one lane, 3 loads, the chain of 6 cycles wins
    update = ir.BufferStore(O, O[I] + A[I * 64 + K] * B[K * 2], (I,))
    body = loop(I, 4, loop(K, 64, update))
    assert compute_cycles(body) == pytest.approx(6.0 * 256)
    x = features(ir.Func("f", (A, B, O), body), PLAN, target=TARGET)
    assert x["vector_op_frac"] == 0.0


def test_a_register_tile_unrolled_inside_the_reduction_is_free_to_access() -> None:
    # acc (local, 2): for k in 64: for j in unroll(2): acc[j] = acc[j] + A[k] * B[j*64 + k]
    data = ir.Var("acc_data", "handle")
    acc = ir.decl_buffer("acc", (2,), data=data, scope=ir.REGISTER_SCOPE)
    update = ir.BufferStore(acc, acc[J] + A[K] * B[J * 64 + K], (J,))
    nest = loop(K, 64, loop(J, 2, update, "unroll"))
    body = ir.Allocate(data, "float32", (ir.const(2),), ir.DeclBuffer(acc, nest), (("scope", "local"),))
    # issue (2 ops x 0.5 + 2 loads x 0.5) / 16 + a loop step / (16 x 2 unrolled) = 0.15625;
    # the chain: 4 cycles over 2 accumulators x 16 lanes = 0.125; 128 updates
    assert compute_cycles(body) == pytest.approx(0.15625 * 128)


def test_a_parallel_loop_divides_by_the_cores_it_fills() -> None:
    update = ir.BufferStore(O, A[I], (I,))
    # 3 iterations on 2 cores: the slower core runs 2 of them (speed-up 1.5)
    for extent, speedup in ((4, 2.0), (3, 1.5), (1, 1.0)):
        serial = compute_cycles(loop(I, extent, update, "serial"))
        assert compute_cycles(loop(I, extent, update, "parallel")) == pytest.approx(serial / speedup)


def test_memory_time_and_the_parallel_share() -> None:
    none = roofline([], [75.0, 25.0, 20.0], lanes=16, cores=2)
    assert none["log2_memory_ns"] == pytest.approx(math.log2(1.0 + 3.0))  # one ns per level
    assert none["log2_estimate_ns"] == pytest.approx(math.log2(1.0 + 3.0))
    assert none["vector_op_frac"] == 0.0


def test_a_rolling_buffer_reused_along_the_image_stays_in_the_first_cache() -> None:
    # for t in 8: for y in 512: for x in 1024: W[x] = W[x] + R[(y % 3) * 1024 + x]
    # R holds 3 rows (12 KiB): between two uses of a row, one iteration of t touches R's 12 KiB
    # (not 512 rows of it) and W's 4 KiB, so every access is served by L1 (48 KiB here)
    R, W = ir.decl_buffer("R", (3 * 1024,)), ir.decl_buffer("W", (1024,))
    T, Y, X = ir.Var("t"), ir.Var("y"), ir.Var("x")
    update = ir.BufferStore(W, W[X] + R[(Y % 3) * 1024 + X], (X,))
    body = loop(T, 8, loop(Y, 512, loop(X, 1024, update)))
    x = features(ir.Func("f", (R, W), body), PLAN, target=TARGET)
    assert x["log2_bytes_l2"] == x["log2_bytes_l3"] == x["log2_bytes_mem"] == 0.0
    assert x["log2_bytes_l1"] == pytest.approx(math.log2(1.0 + 3 * 8 * 512 * 1024 * 4))
    # R's reuse: 12 KiB + 4 KiB; W's (carried by y): a row of R and W, 8 KiB
    assert x["log2_reuse_distance"] == pytest.approx((math.log2(1.0 + 16384) + 2 * math.log2(1.0 + 8192)) / 3)


def test_the_estimate_is_the_longer_of_compute_and_memory() -> None:
    # a copy of 16 Mi floats read once (64 MiB, more than every cache): memory-bound
    big_in, big_out = ir.decl_buffer("In", (1 << 24,)), ir.decl_buffer("Out", (1 << 24,))
    body = loop(I, 1 << 24, ir.BufferStore(big_out, big_in[I], (I,)))
    x = features(ir.Func("f", (big_in, big_out), body), PLAN, target=TARGET)
    compute, memory = 2.0 ** x["log2_compute_ns"] - 1.0, 2.0 ** x["log2_memory_ns"] - 1.0
    assert memory > compute > 0.0
    assert 2.0 ** x["log2_estimate_ns"] - 1.0 == pytest.approx(memory)  # not their sum


def window_nest(step: int) -> tuple[ir.Func, ir.Buffer]:
    """for y in 64: for x in 256: for r in 3: S[y*256 + x] = S[y*256 + x] + D[(y*step + r)*256 + x]"""
    rows = 64 * step + 2
    D, S = ir.decl_buffer("D", (rows * 256,)), ir.decl_buffer("S", (64 * 256,))
    Y, X, R = ir.Var("y"), ir.Var("x"), ir.Var("r")
    out = Y * 256 + X
    update = ir.BufferStore(S, S[out] + D[(Y * step + R) * 256 + X], (out,))
    return ir.Func("f", (D, S), loop(Y, 64, loop(X, 256, loop(R, 3, update)))), D


def test_a_window_sliding_by_a_row_is_read_again_from_the_first_cache() -> None:
    # every loop indexes D, but y moves it by one row, which r (3 rows) reaches: the next y reads
    # two of this y's rows again. Between uses: one y's 3 rows of D (3 KiB) and a row of S (1 KiB).
    func, _ = window_nest(1)
    x = features(func, PLAN, target=TARGET)
    assert x["log2_bytes_l2"] == x["log2_bytes_l3"] == x["log2_bytes_mem"] == 0.0


def test_a_read_that_no_loop_reuses_comes_from_the_cache_that_holds_its_buffer() -> None:
    # y moves D by 4 rows, further than r reaches: no reuse. D (258 rows, 258 KiB) fits the L2 of
    # 2 MiB, where repeated runs leave it, not memory; S is reused by r in the first cache
    func, D = window_nest(4)
    x = features(func, PLAN, target=TARGET)
    assert x["log2_bytes_mem"] == x["log2_bytes_l3"] == 0.0
    assert x["log2_bytes_l2"] == pytest.approx(math.log2(1.0 + 64 * 256 * 3 * 4))
    assert D.nbytes > (48 << 10)


def test_slides_finds_windows_in_plain_and_rolling_indices() -> None:
    Y, R, X = ir.Var("y"), ir.Var("r"), ir.Var("x")
    loops = (Loop(Y, "serial", 64.0, True), Loop(R, "serial", 3.0, True), Loop(X, "serial", 256.0, True))

    def access(index: ir.Expr) -> Access:
        buf = ir.decl_buffer("W", (1 << 16,))
        names = frozenset(v for v in (Y, R, X) if v in ir.collect(index, ir.Var))
        return Access(buf, (index,), loops, 1.0, False, False, names, False)

    assert slides(access((Y + R) * 256 + X), 0)  # a row further: r reaches it
    assert slides(access((Y * 2 + R) * 256 + X), 0)  # two rows further: r reaches 2
    assert not slides(access((Y * 3 + R) * 256 + X), 0)  # three rows: beyond r's reach
    assert slides(access(((Y + R) % 4) * 256 + X), 0)  # a rolling buffer's row
    assert not slides(access(Y * 256 + X), 0)  # nothing inside y moves along its rows
    assert not slides(access((Y + R) * 256 + X), 2)  # x: nothing inside it
