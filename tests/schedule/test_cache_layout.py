"""cache_read, cache_write and transform_layout: golden IR, trace round trips, numbers, preconditions."""

from __future__ import annotations

import re
from dataclasses import replace

import numpy as np
import pytest
from ir_helpers import allocations

from autotune import ir, te, workloads
from autotune.errors import ScheduleError
from autotune.schedule import AXIS_SEPARATOR, Schedule

SEED_N, SEED_TILE, SEED_BANK = 4 * 8192, 8192, 4096


@pytest.fixture(scope="module")
def mm():
    return workloads.get("matmul", m=16, n=16, k=16)


def two_readers() -> ir.Func:
    """``B = A * 2; C = B + A``: A is read by two blocks, B is an intermediate."""
    a = te.placeholder((16,), "float32", name="A")
    b = te.compute((16,), lambda i: a[i] * 2.0, name="B")
    c = te.compute((16,), lambda i: b[i] + a[i], name="C")
    return te.create_func([a], [c])


def staged(n: int = SEED_N, tile: int = SEED_TILE) -> Schedule:
    """The seed: ``B = A * 2`` tiled by ``tile``, with A staged tile by tile in ``local.vtcm``."""
    a = te.placeholder((n,), "float32", name="A")
    b = te.compute((n,), lambda i: a[i] * 2.0, name="B")
    sch = Schedule(te.create_func([a], [b], name="stage"))
    sch = sch.split("i", [None, tile], names=["io", "ii"])
    sch = sch.cache_read("B", 0, "local.vtcm")
    return sch.compute_at(sch.last[0], "io")


def banked(n: int = SEED_N, tile: int = SEED_TILE, bank: int = SEED_BANK) -> Schedule:
    """The seed staged tile laid out as ``[tile // bank, bank]`` banks."""
    return staged(n, tile).transform_layout("A_local_vtcm", "A_local_vtcm", lambda i: [i // bank, AXIS_SEPARATOR, i % bank])


def same_text(func: ir.Func, sch: Schedule) -> None:
    assert str(Schedule.replay(func, sch.trace).func) == str(sch.func)
    assert str(Schedule.replay(func, sch.trace_json()).func) == str(sch.func)


# ---- cache_read ------------------------------------------------------------
def test_cache_read_golden(mm, golden):
    sch = Schedule(mm.func).cache_read("matmul", 1, "global")
    assert sch.last == ("A_global",)
    golden("schedule/cache_read", str(sch.func))
    same_text(mm.func, sch)


def test_cache_read_redirects_every_reader(golden):
    func = two_readers()
    sch = Schedule(func).cache_read("C", 1, "shared")
    text = str(sch.func)
    golden("schedule/cache_read_two_readers", text)
    assert sch.get_blocks() == ["A_shared", "B", "C"]
    assert "= A[" not in text.replace("A_shared[v_ax0] = A[v_ax0]", "")
    same_text(func, sch)


def test_cache_read_names_are_unique(mm):
    sch = Schedule(mm.func).cache_read("matmul", 1, "global").cache_read("A_global", 0, "global")
    assert sch.last == ("A_global_1",)
    assert sch.get_loops("A_global_1") == ("ax0_1", "ax1_1")


def test_cache_read_then_compute_at(mm, golden):
    sch = Schedule(mm.func).split("i", [None, 4], names=["io", "ii"]).cache_read("matmul", 1, "global")
    sch = sch.compute_at("A_global", "io")
    golden("schedule/cache_read_compute_at", str(sch.func))
    same_text(mm.func, sch)
    assert sch.get_loops("A_global") == ("io", "ax0", "ax1")


@pytest.mark.slow
def test_cache_read_compute_at_numbers(mm, run_func):
    sch = Schedule(mm.func).split("i", [None, 4], names=["io", "ii"])
    sch = sch.cache_read("matmul", 1, "global").cache_read("matmul", 2, "global")
    sch = sch.compute_at("A_global", "io").compute_at("B_global", "io")
    lowered = run_func(mm, sch.func)
    assert allocations(lowered.func) == {"A_global": (64,), "B_global": (256,)}


# ---- cache_write -----------------------------------------------------------
def test_cache_write_golden(mm, golden):
    sch = Schedule(mm.func).cache_write("matmul", 0, "local")
    assert sch.last == ("matmul_local",)
    golden("schedule/cache_write", str(sch.func))
    same_text(mm.func, sch)


@pytest.mark.slow
def test_cache_write_reverse_compute_at_numbers(mm, golden, run_func):
    # "global": a cache in memory, compacted to the io tile ("local" would be a register tile)
    sch = Schedule(mm.func).split("i", [None, 4], names=["io", "ii"]).cache_write("matmul", 0, "global")
    sch = sch.reverse_compute_at("matmul_global", "io")
    golden("schedule/cache_write_reverse_compute_at", str(sch.func))
    same_text(mm.func, sch)
    lowered = run_func(mm, sch.func)
    assert allocations(lowered.func) == {"matmul_global": (64,)}


@pytest.mark.slow
def test_cache_read_of_an_intermediate_numbers(run_func):
    func = two_readers()
    a = np.arange(16, dtype="float32")

    class _W:
        def make_inputs(self, seed):
            return [a]

        def reference(self, x):
            return (x * 3.0,)

    sch = Schedule(func).cache_read("C", 0, "global")  # B, read by C, written by block B before it
    assert sch.get_blocks() == ["B", "B_global", "C"]
    run_func(_W(), sch.func)


# ---- transform_layout ------------------------------------------------------
def test_transform_layout_golden(golden):
    sch = banked()
    text = str(sch.func)
    golden("schedule/transform_layout", text)
    assert 'A_local_vtcm = T.alloc_buffer((8, 4096), "float32", axis_separators=[1], scope="local.vtcm")' in text
    assert "A_local_vtcm[v_i // 4096, v_i % 4096]" in text
    same_text(sch.original, sch)


def test_transform_layout_permutation_and_trace(mm, golden):
    sch = Schedule(mm.func).cache_read("matmul", 2, "global")
    sch = sch.transform_layout("B_global", "B_global", lambda k, j: [j, k])
    text = str(sch.func)
    golden("schedule/transform_layout_transpose", text)
    assert "B_global[v_j, v_k]" in text
    assert sch.trace[-1].kwargs()["index_map"] == (("v", 1), ("v", 0))
    same_text(mm.func, sch)


@pytest.mark.slow
def test_transform_layout_numbers(mm, run_func):
    sch = Schedule(mm.func).split("i", [None, 8], names=["io", "ii"]).cache_read("matmul", 1, "global")
    sch = sch.compute_at("A_global", "io")
    sch = sch.transform_layout("A_global", "A_global", lambda i, k: [i // 4, AXIS_SEPARATOR, i % 4, k])
    lowered = run_func(mm, sch.func)
    assert allocations(lowered.func) == {"A_global": (2, 64)}


# ---- preconditions ---------------------------------------------------------
@pytest.mark.parametrize("index", [3, -1])
def test_cache_read_bad_index(mm, index):
    with pytest.raises(ScheduleError, match=r"cache_read: block 'matmul' reads 3 buffers, buffer_index .* out of range"):
        Schedule(mm.func).cache_read("matmul", index)


@pytest.mark.parametrize("index", [True, "0"])
def test_cache_read_index_type(mm, index):
    with pytest.raises(ScheduleError, match=re.escape(f"cache_read: argument 'buffer_index' must be an integer, got {index!r}")):
        Schedule(mm.func).cache_read("matmul", index)


@pytest.mark.parametrize("op", ["cache_read", "cache_write"])
def test_cache_missing_block(mm, op):
    with pytest.raises(ScheduleError, match=rf"{op}: no block named 'nope'"):
        getattr(Schedule(mm.func), op)("nope", 0)


@pytest.mark.parametrize("op", ["cache_read", "cache_write"])
def test_cache_empty_scope(mm, op):
    with pytest.raises(ScheduleError, match=rf"{op}: scope must be a non-empty string"):
        getattr(Schedule(mm.func), op)("matmul", 1 if op == "cache_read" else 0, "")


def test_cache_read_of_an_updated_buffer(mm):
    with pytest.raises(ScheduleError, match=r"block 'matmul' reads and writes 'matmul'.*use cache_write"):
        Schedule(mm.func).cache_read("matmul", 0)


def test_cache_read_of_a_buffer_written_in_the_readers_nest():
    sch = Schedule(two_readers()).compute_at("B", "i_1")
    with pytest.raises(ScheduleError, match="block 'B' writes 'B' in or after the loop nest of its first reader"):
        sch.cache_read("C", 0)


def test_cache_write_bad_index(mm):
    with pytest.raises(ScheduleError, match=r"cache_write: block 'matmul' writes 1 buffers, buffer_index 1 is out of range"):
        Schedule(mm.func).cache_write("matmul", 1)


def test_cache_write_with_a_reader_in_the_nest():
    sch = Schedule(two_readers()).compute_at("B", "i_1")
    with pytest.raises(ScheduleError, match="block 'C' reads 'B' inside the loop nest of 'B'"):
        sch.cache_write("B", 0)


def test_cache_write_with_two_writers():
    func = two_readers()
    root = func.body
    assert isinstance(root, ir.Block) and isinstance(root.body, ir.SeqStmt)
    nest_b = root.body.seq[0]
    again = ir.substitute(nest_b, {})

    class _Rename(ir.Transformer):
        def visit_Block(self, b: ir.Block) -> ir.Block:
            return replace(b, name="B_again")

    body = ir.seq(nest_b, _Rename().visit(again), *root.body.seq[1:])
    func = replace(func, body=replace(root, body=body))
    with pytest.raises(ScheduleError, match="'B' is written by blocks 'B', 'B_again'"):
        Schedule(func).cache_write("B", 0)


@pytest.mark.parametrize(
    ("index_map", "message"),
    [
        ((AXIS_SEPARATOR, ["v", 0]), "starts with an axis separator"),
        ((["v", 0], AXIS_SEPARATOR), "ends with an axis separator"),
        ((["//", ["v", 0], 4096], AXIS_SEPARATOR, AXIS_SEPARATOR, ["%", ["v", 0], 4096]), "repeats an axis separator"),
        ((["v", 0], "/"), "unknown string '/'"),
        ((), "must be a non-empty list"),
        ((["%", ["v", 0], 4096],), r"index map is not bijective on 'A_local_vtcm': shape \[32768\]"),
        ((["-", ["v", 0], 1],), r"index 0 of the map of 'A_local_vtcm' \(i0 - 1\) takes values in \[-1, 32766\]"),
        ((["v", 1],), "refers to variable 1, there are 1"),
        ((["max", ["v", 0], 3.5],), "malformed index expression"),
    ],
)
def test_transform_layout_bad_maps(index_map, message):
    sch = staged()
    with pytest.raises(ScheduleError, match=f"transform_layout: .*{message}"):
        sch.transform_layout("A_local_vtcm", "A_local_vtcm", index_map)


def test_transform_layout_of_an_input_stages_a_copy_in_the_new_layout(mm, golden, run_func):
    # the caller still passes A as a flat [16, 16] array: the four banks are a copy of it
    sch = Schedule(mm.func).split("i", [None, 8], names=["io", "ii"])
    sch = sch.transform_layout("matmul", "A", lambda i, k: [i // 4, AXIS_SEPARATOR, i % 4, k])
    assert sch.last == ("A_layout",)
    golden("schedule/transform_layout_input", str(sch.func))
    same_text(mm.func, sch)
    lowered = run_func(mm, sch.func)
    assert allocations(lowered.func) == {"A_layout": (4, 64)}
    # the copy writes at mapped indices: it stays whole (a tiled copy is cache_read + compute_at first)
    with pytest.raises(ScheduleError, match=re.escape("compute_at: block 'A_layout' must write 'A_layout' at its own spatial iter vars")):
        sch.compute_at("A_layout", "io")


def test_transform_layout_of_an_output_stages_a_copy_out(mm, golden, run_func):
    sch = Schedule(mm.func).transform_layout("matmul", "matmul", lambda i, j: [j, i])
    assert sch.last == ("matmul_layout",)
    text = str(sch.func)
    golden("schedule/transform_layout_output", text)
    assert "matmul[v_ax0, v_ax1] = matmul_layout[v_ax1, v_ax0]" in text
    run_func(mm, sch.func)
    # both parameters, one of them banked
    both = sch.transform_layout("matmul", "B", lambda k, j: [j // 8, AXIS_SEPARATOR, j % 8, k])
    lowered = run_func(mm, both.func)
    assert allocations(lowered.func) == {"B_layout": (2, 128), "matmul_layout": (256,)}
    same_text(mm.func, both)


def test_transform_layout_of_a_parameter_preconditions(mm):
    # the map is checked against the parameter itself
    with pytest.raises(ScheduleError, match=re.escape("transform_layout: index map is not bijective on 'A': shape [16, 16] (256 elements) maps into [8, 16] (128)")):
        Schedule(mm.func).transform_layout("matmul", "A", lambda i, k: [i // 2, k])
    # an output with two writers (the init decomposed into a block of its own) cannot be copied out once
    split = Schedule(mm.func).decompose_reduction("matmul", "k")
    message = "transform_layout: 'matmul' is written by blocks 'matmul_init', 'matmul'; the copy-out would overwrite all but 'matmul_init'"
    with pytest.raises(ScheduleError, match="^" + re.escape(message) + "$"):
        split.transform_layout("matmul", "matmul", lambda i, j: [j, i])


def test_transform_layout_of_an_output_its_writer_may_not_fill_is_refused():
    a, out = ir.decl_buffer("A", (8,)), ir.decl_buffer("C", (8,))
    v, i = ir.Var("v"), ir.Var("i")
    store = ir.BufferStore(out, a[v * 2], (v * 2,))
    block = ir.Block("half", (ir.IterVar(v, ir.Range.of(0, 4), "spatial"),), (i,), store, (ir.BufferRegion(a, (ir.Range.of(v * 2, 1),)),), (ir.BufferRegion(out, (ir.Range.of(v * 2, 1),)),))
    func = ir.Func("half", (a, out), ir.Block("root", (), (), ir.For(i, ir.const(0), ir.const(4), ir.ForKind.SERIAL, block)))
    message = (
        "transform_layout: output 'C' is stored by block 'half' at [v * 2], which may not be every element: "
        "a staged copy-out would overwrite the rest with what the block never wrote"
    )
    with pytest.raises(ScheduleError, match="^" + re.escape(message) + "$"):
        Schedule(func).transform_layout("half", "C", lambda j: [j // 4, AXIS_SEPARATOR, j % 4])


def test_transform_layout_unknown_buffer():
    with pytest.raises(ScheduleError, match="transform_layout: block 'B' does not access a buffer named 'Z'"):
        staged().transform_layout("B", "Z", [["v", 0]])


def test_transform_layout_of_an_explicit_region():
    sch = staged().annotate_buffer_access("B", 0, "read", lambda v: [(v, v + 1)])
    with pytest.raises(ScheduleError, match="block 'B' has an explicit read region of 'A_local_vtcm'"):
        sch.transform_layout("A_local_vtcm", "A_local_vtcm", lambda i: [i // 2, AXIS_SEPARATOR, i % 2])
