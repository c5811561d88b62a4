"""The roofline estimate among the features: its exact cycles on small loop nests written here."""

from __future__ import annotations

import math

import pytest

from autotune import ir
from autotune.memory import Pool
from autotune.memory.lowering import empty_plan
from autotune.search.features import FEATURE_NAMES, features
from autotune.search.features_estimate import Access, Loop, _distinct
from autotune.search.features_roofline import (
    CYCLES_PER_NS,
    SCALAR_CALLS,
    TLB_MISS,
    Nests,
    Operation,
    Statement,
    distinct_share,
    iterating,
    loop_bodies,
    roofline,
)
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
    # the update: 16 lanes; issue (a fused multiply-add x 0.5 + 2 moving loads x 0.5 + a store) / 16
    # + a loop step / 16 = 0.21875 cycles, but O[i] in memory takes 6 cycles per update over 16
    # lanes: 0.375, 256 times; the init: a store in the loop over i, which holds the update's loop
    # (not innermost: the loop vectoriser leaves it) and its 64 steps (not unrolled whole): a store
    # and a loop step, 2 cycles, 4 times
    assert compute_cycles(body) == pytest.approx(0.375 * 256 + 4 * 2.0)
    x = features(ir.Func("f", (A, B, O), body), PLAN, target=TARGET)
    assert x["vector_op_frac"] == 1.0 and x["latency_bound_frac"] == pytest.approx(96 / 104)


def test_a_strided_read_is_gathered_one_load_per_lane() -> None:
    # B[k * 2]: two elements per step of k, gathered on 16 lanes: issue (a fused multiply-add x 0.5
    # + A's load x 0.5 + B's 16 loads x 0.5 + O's store) / 16 + a loop step / 16 = 0.6875, over the
    # chain of 6 cycles in memory over 16 lanes (0.375); 256 updates
    update = ir.BufferStore(O, O[I] + A[I * 64 + K] * B[K * 2], (I,))
    body = loop(I, 4, loop(K, 64, update))
    assert compute_cycles(body) == pytest.approx(0.6875 * 256)
    x = features(ir.Func("f", (A, B, O), body), PLAN, target=TARGET)
    assert x["vector_op_frac"] == 1.0


def test_a_read_that_moves_a_page_per_step_waits_on_the_tlb() -> None:
    """D[k * 1024 + i]: each step of k a new page (4 KB); past the 64 pages the first-level TLB
    holds, each costs TLB_MISS, shared by the executions of one step."""
    d = ir.decl_buffer("D", (1024 * 128,))

    def cycles(body: ir.Stmt) -> float:
        x = features(ir.Func("f", (A, d, O), body), PLAN, target=TARGET)
        return (2.0 ** x["log2_compute_ns"] - 1.0) * CYCLES_PER_NS

    def update(k: int) -> ir.Stmt:
        return loop(I, 4, loop(K, k, ir.BufferStore(O, O[I] + d[K * 1024 + I] * A[K], (I,))))

    # gathered like the read above: 0.6875 cycles an update; 128 pages: 4.5 cycles an update, which wins
    assert cycles(update(128)) == pytest.approx(TLB_MISS * 4 * 128)
    assert cycles(update(64)) == pytest.approx(0.6875 * 4 * 64)  # 64 pages: the TLB holds them
    # a register tile of 8 unrolled inside the step: one page for the 8 updates of a step
    data = ir.Var("acc_data", "handle")
    acc = ir.decl_buffer("acc", (8,), data=data, scope=ir.REGISTER_SCOPE)
    tile = loop(K, 128, loop(J, 8, ir.BufferStore(acc, acc[J] + d[K * 1024 + J] * A[K], (J,)), "unroll"))
    body = ir.Allocate(data, "float32", (ir.const(8),), ir.DeclBuffer(acc, tile), (("scope", "local"),))
    assert cycles(body) == pytest.approx(TLB_MISS / 8 * 8 * 128)


def test_a_register_tile_unrolled_inside_the_reduction_is_free_to_access() -> None:
    # acc (local, 2): for k in 64: for j in unroll(2): acc[j] = acc[j] + A[k] * B[j*64 + k]
    data = ir.Var("acc_data", "handle")
    acc = ir.decl_buffer("acc", (2,), data=data, scope=ir.REGISTER_SCOPE)
    update = ir.BufferStore(acc, acc[J] + A[K] * B[J * 64 + K], (J,))
    nest = loop(K, 64, loop(J, 2, update, "unroll"))
    body = ir.Allocate(data, "float32", (ir.const(2),), ir.DeclBuffer(acc, nest), (("scope", "local"),))
    # issue (a fused multiply-add x 0.5 + B's load x 0.5 + A[k]'s, shared by the 2 unrolled copies,
    # x 0.25) / 16 + a loop step / (16 x 2 unrolled) = 0.109375, which wins; the chain: 4 cycles over
    # 2 accumulators x 16 lanes x 4 interleaved copies = 0.03125; 128 updates
    assert compute_cycles(body) == pytest.approx(0.109375 * 128)


def test_a_reduction_in_a_register_is_interleaved() -> None:
    # acc (local, 1): for k in 64: acc[0] = acc[0] + A[k] * A[k + 64]: 16 lanes; the chain of 4
    # cycles over 16 lanes and 4 interleaved copies (0.0625) hides under the issue:
    # (a fused multiply-add x 0.5 + 2 loads x 0.5) / 16 + a loop step / 16 = 0.15625
    data = ir.Var("acc_data", "handle")
    acc = ir.decl_buffer("acc", (1,), data=data, scope=ir.REGISTER_SCOPE)
    zero = ir.const(0)
    update = ir.BufferStore(acc, acc[zero] + A[K] * A[K + 64], (zero,))
    body = ir.Allocate(
        data, "float32", (ir.const(1),), ir.DeclBuffer(acc, loop(K, 64, update)), (("scope", "local"),)
    )
    assert compute_cycles(body) == pytest.approx(0.15625 * 64)


C = ir.decl_buffer("C", (64,))
X, R = ir.Var("x"), ir.Var("r")


def cycles_storing_c(body: ir.Stmt) -> float:
    x = features(ir.Func("f", (A, C), body), PLAN, target=TARGET)
    return (2.0 ** x["log2_compute_ns"] - 1.0) * CYCLES_PER_NS


def test_a_multiply_feeding_a_float_add_is_one_fused_instruction() -> None:
    # 16 lanes along i, a loop step each 16 executions; 3 moving loads and a store
    fused = ir.BufferStore(C, A[I] * A[I + 128] + A[I + 64], (I,))
    # one fused multiply-add: (0.5 + 3 x 0.5 + 1) / 16 + 1/16 = 0.25 a store, 64 stores
    assert cycles_storing_c(loop(I, 64, fused)) == pytest.approx(0.25 * 64)
    product = ir.BufferStore(C, A[I] * A[I + 128] * A[I + 64], (I,))
    # two multiplies: (2 x 0.5 + 3 x 0.5 + 1) / 16 + 1/16 = 0.28125
    assert cycles_storing_c(loop(I, 64, product)) == pytest.approx(0.28125 * 64)


def test_exp_is_a_scalar_call_per_lane_computed_once_for_the_unrolled_copies_that_share_it() -> None:
    call = SCALAR_CALLS["exp"]
    # for i in 64: C[i] = exp(A[i]): 16 lanes, but a call per lane
    vector = ir.BufferStore(C, ir.Call("float32", "exp", (A[I],)), (I,))
    assert cycles_storing_c(loop(I, 64, vector)) == pytest.approx((call + 1.5 / 16 + 1 / 16) * 64)
    # for i in 32: for j in unroll(2): C[i*2 + j] = exp(A[i]) (a stride of 2: one lane): the two
    # copies of a step share exp(A[i]) and its load: (call x 1/2 + 0.5 x 1/2 + 1) + a loop step / 2
    shared = ir.BufferStore(C, ir.Call("float32", "exp", (A[I],)), (I * 2 + J,))
    body = loop(I, 32, loop(J, 2, shared, "unroll"))
    assert cycles_storing_c(body) == pytest.approx((call / 2 + 0.25 + 1.0 + 0.5) * 64)


def test_an_operation_that_does_not_move_with_the_lanes_is_made_once_for_them() -> None:
    # for i in 4: for j in unroll(64) (SLP along j, 4 vectors of 16): C[j] = C[j] + exp(A[i]):
    # exp(A[i]) is one value for the 64 lanes: one call per step of i, 1/64 of one per execution;
    # A[i] does not move along the lanes: loaded once; the add, C's load and store are vector:
    # (call / 64 x 16 + 0.5 + 0.5 + 1) / 16 + a loop step / 64
    update = ir.BufferStore(C, C[J] + ir.Call("float32", "exp", (A[I],)), (J,))
    nest = ir.For(I, ir.const(0), ir.const(4), "serial", loop(J, 64, update, "unroll"),
                  annotations=((ir.VECTORIZER_ATTR, "slp"),))  # fmt: skip
    per = (SCALAR_CALLS["exp"] / 64 * 16 + 2.0) / 16 + 1 / 64
    assert cycles_storing_c(nest) == pytest.approx(per * 256)
    # the loop vectoriser's lanes are the steps of i's loop: exp(B[k]) is made once before it
    # for k in 4: for i in 64: C[i] = exp(B[k]) * A[i]
    hoisted = ir.BufferStore(C, ir.Call("float32", "exp", (B[K],)) * A[I], (I,))
    # (the multiply 0.5 + A[i] 0.5 + a store 1 + a loop step 1) / 16
    assert cycles_storing_c(loop(K, 4, loop(I, 64, hoisted))) == pytest.approx(3.0 / 16 * 256)


def test_a_padded_window_jammed_under_unrolled_loops_selects_and_loads_once_per_address() -> None:
    # for x in 32: for j in unroll(2): for r in unroll(3):
    #     C[x*2 + j] = C[x*2 + j] + select(x*2 + j + r >= 1, A[x*2 + j + r], 0)
    # the 6 executions of a step of x meet 4 addresses x*2 + (j + r): the select and A's load count
    # 4/6; the add reads C, which the step changes: it counts whole, as does C's load; a stride of
    # 2 along x: one lane. (0.5 + 0.5 x 4/6 + 0.5 x 4/6 + 0.5 + a store) + a loop step / 6
    at = X * 2 + J + R
    window = ir.Select(ir.GE(at, ir.const(1)), A[at], ir.const(0.0))
    update = ir.BufferStore(C, C[X * 2 + J] + window, (X * 2 + J,))
    body = loop(X, 32, loop(J, 2, loop(R, 3, update, "unroll"), "unroll"))
    assert cycles_storing_c(body) == pytest.approx((0.5 + 1 / 3 + 1 / 3 + 0.5 + 1.0 + 1 / 6) * 192)


def test_a_parallel_loop_divides_by_the_cores_it_fills() -> None:
    update = ir.BufferStore(O, A[I], (I,))
    # 3 iterations on 2 cores: the slower core runs 2 of them (speed-up 1.5)
    for extent, speedup in ((4, 2.0), (3, 1.5), (1, 1.0)):
        serial = compute_cycles(loop(I, extent, update, "serial"))
        assert compute_cycles(loop(I, extent, update, "parallel")) == pytest.approx(serial / speedup)


def test_a_parallel_loop_waits_for_the_core_that_runs_the_most() -> None:
    """Rows split into as many parts as cores, then tiles of 8: the last part's tail tile is cut by a
    guard, so the first core runs 32 rows and the second 24 (``row < rows``)."""
    P, T, R = ir.Var("p"), ir.Var("t"), ir.Var("r")
    row = P * 32 + T * 8 + R

    def split(rows: int, kind: str) -> ir.Stmt:
        store = ir.IfThenElse(row < rows, ir.BufferStore(A, B[R] + 1.0, (row,)))
        return loop(P, 2, loop(T, 4, loop(R, 8, store, "unrolled")), kind)

    for rows, busiest in ((56, 32), (64, 32), (40, 32), (33, 32), (32, 32)):
        serial = compute_cycles(split(rows, "serial"))
        assert compute_cycles(split(rows, "parallel")) == pytest.approx(serial * busiest / rows)
    # a trip count that depends on the part: ``for r in range(8 - 4 * p)``, 32 rows then 16
    inner = loop(T, 4, ir.For(R, ir.const(0), 8 - P * 4, "serial", ir.BufferStore(A, B[R], (R,))))
    ragged = compute_cycles(loop(P, 2, inner, "serial"))
    assert compute_cycles(loop(P, 2, inner, "parallel")) == pytest.approx(ragged * 32 / 48)


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
    # in lines of 16 floats: across x, a line of R and one of W (192 bytes: W's load and store share
    # it), 15 of every 16 reads; across y, a row of R and of W (8 KiB): of 512 rows of 64 lines per
    # t, R's 3 rows and W's one are touched first in t; across t (R's 12 KiB and W, 16 KiB): the rest
    # of R's 3 rows and W's row, 7 of 8 times
    across_x = 3 * 8 * 512 * (1024 - 64)
    across_y = 8 * (512 * 64 - 3 * 64) + 2 * 8 * (512 * 64 - 64)
    across_t = 7 * 3 * 64 + 2 * 7 * 64
    weights = {192: across_x, 8192: across_y, 16384: across_t}
    distance = sum(w * math.log2(1.0 + d) for d, w in weights.items()) / sum(weights.values())
    assert x["log2_reuse_distance"] == pytest.approx(distance)


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
    # The 66 rows of D and 64 of S (66 and 64 KiB) are read first where repeated runs leave them,
    # in the L2 (2 MiB); the update's store follows its load
    func, _ = window_nest(1)
    x = features(func, PLAN, target=TARGET)
    assert x["log2_bytes_l3"] == x["log2_bytes_mem"] == 0.0
    assert x["log2_bytes_l2"] == pytest.approx(math.log2(1.0 + (66 + 64) * 256 * 4))
    # the first cache serves the other accesses 4 bytes each: D, S's load and its store, 64 x 256 x 3
    # times each, less the first touches of the lines of D and of S's load (16 floats a line)
    accesses = 3 * 64 * 256 * 3 - (66 + 64) * 256 // 16
    assert x["log2_bytes_l1"] == pytest.approx(math.log2(1.0 + accesses * 4))


def test_a_read_that_no_loop_reuses_comes_from_the_cache_that_holds_its_buffer() -> None:
    # y moves D by 4 rows, further than r reaches: no reuse. D (258 rows, 258 KiB) fits the L2 of
    # 2 MiB, where repeated runs leave it, not memory; S (64 KiB) too, read first there and reused
    # by r in the first cache
    func, D = window_nest(4)
    x = features(func, PLAN, target=TARGET)
    assert x["log2_bytes_mem"] == x["log2_bytes_l3"] == 0.0
    assert x["log2_bytes_l2"] == pytest.approx(math.log2(1.0 + (64 * 256 * 3 + 64 * 256) * 4))
    assert D.nbytes > (48 << 10)


def test_distinct_elements_count_a_sliding_window_and_a_rolling_row_once() -> None:
    Y, R, X = ir.Var("y"), ir.Var("r"), ir.Var("x")
    loops = (Loop(Y, "serial", 64.0, True), Loop(R, "serial", 3.0, True), Loop(X, "serial", 256.0, True))

    def rows(index: ir.Expr) -> list[float]:
        """Rows of 256 that the loops from y, from r and from x touch, then one element."""
        buf = ir.decl_buffer("W", (1 << 16,))
        names = frozenset(v for v in (Y, R, X) if v in ir.collect(index, ir.Var))
        out = _distinct(Access(buf, (index,), loops, 1.0, False, False, names, False))
        return [n / 256 for n in out[:3]] + [out[3]]

    assert rows((Y + R) * 256 + X) == [66, 3, 1, 1]  # each y a row further: 64 + 2 rows
    assert rows((Y * 2 + R) * 256 + X) == [129, 3, 1, 1]  # two rows further: r reaches 2
    assert rows((Y * 4 + R) * 256 + X) == [192, 3, 1, 1]  # four rows: beyond r's reach, 3 per y
    assert rows(((Y + R) % 4) * 256 + X) == [4, 3, 1, 1]  # a rolling buffer's 4 rows
    assert rows(Y * 256 + X) == [64, 1, 1, 1]  # r does not move it
    assert rows(X * 64 + R) == [3, 3, 1, 1]  # 3 of every 64 elements, 256 times: 768


def statement(store: Access, loads: tuple[Access, ...], ops: int = 0) -> Statement:
    return Statement(store, loads, tuple(Operation(frozenset()) for _ in range(ops)))


def test_a_loop_is_unrolled_whole_only_when_every_statement_in_it_fits() -> None:
    outer, inner = Loop(I, "serial", 8.0, True), Loop(K, "serial", 32.0, True)
    loops = (outer, inner)

    def access(buf: ir.Buffer, index: ir.Expr, store: bool = False, register: bool = False) -> Access:
        names = frozenset(v for v in (I, K) if v in ir.collect(index, ir.Var))
        return Access(buf, (index,), loops, 256.0, store, False, names, False, register)

    # T[k] = A[i*32 + k]: 2 instructions, 64 over the 32 steps of k: LLVM unrolls k whole
    copy = statement(access(B, K, store=True), (access(A, I * 32 + K),))
    assert iterating(copy) == 0
    # beside a statement of 3 operations and 2 accesses, k's body is 7 instructions, 224 in all: a loop
    busy = statement(access(O, K % 4, store=True), (access(A, K),), ops=3)
    nests = Nests.of([copy, busy])
    assert loop_bodies([copy, busy]) == {K: 7.0, I: 224.0}
    assert iterating(copy, nests.bodies) == iterating(busy, nests.bodies) == 1
    assert I in nests.outer and K not in nests.outer
    # a register tile's element at a constant index is a register: no instruction
    scalar = ir.decl_buffer("acc", (1,), scope=ir.REGISTER_SCOPE)
    element = ir.const(0)
    accumulate = statement(access(scalar, element, True, True), (access(scalar, element, False, True),), 1)
    assert loop_bodies([accumulate]) == {K: 1.0, I: 32.0}


def test_distinct_share_counts_the_values_met_in_one_unrolled_step() -> None:
    J2, R3 = Loop(J, "unroll", 2.0, True), Loop(R, "unroll", 3.0, True)
    assert distinct_share([X * 2 + J + R], [J2, R3]) == pytest.approx(4 / 6)  # j + r: 0..3
    assert distinct_share([X * 2 + J * 3 + R], [J2, R3]) == 1.0  # j * 3 + r: 0..5
    assert distinct_share([X], [J2, R3]) == pytest.approx(1 / 6)  # one value for the step
    assert distinct_share([(X + J + R) % 3], [J2, R3]) == pytest.approx(4 / 6)  # told by its numerator
    assert distinct_share([J + R, J], [J2, R3]) == 1.0  # (j + r, j) tells every point apart
    assert distinct_share([J + R], []) == 1.0
