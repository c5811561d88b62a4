"""Views of an intermediate's storage (``DeclBuffer`` aliases, tvm-rfcs 0063).

``B`` is allocated by the root block; ``B_view`` views its storage with another shape,
an ``elem_offset`` and possibly another dtype. A writer stores through ``B`` and a reader
loads through ``B_view``, both under the same row loop ``i``, so compaction would shrink
``B`` to one row of its own accesses if it ignored the view: the allocation stays whole.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np
import pytest
from ir_helpers import allocations

from autotune import ir
from autotune.codegen import build, generate_source
from autotune.errors import IRError, LoweringError, ScheduleError
from autotune.lowering import lower
from autotune.schedule import Schedule
from autotune.schedule.regions import refresh_regions

ROWS, COLS = 4, 8
A_IN = (np.arange(ROWS * COLS, dtype=np.float32).reshape(ROWS, COLS) - 7.5) / 4


def _block(name: str, i: ir.Var, j: ir.Var, extent_j: int, store: Callable[[ir.Var, ir.Var], ir.Stmt]) -> ir.Block:
    vi, vj = ir.Var(f"v_i_{name}"), ir.Var(f"v_j_{name}")
    ivs = (ir.IterVar(vi, ir.Range.of(0, ROWS), "spatial"), ir.IterVar(vj, ir.Range.of(0, extent_j), "spatial"))
    return refresh_regions(ir.Block(name, ivs, (i, j), store(vi, vj)))


def aliased(offset: int, view_dtype: str, view_cols: int, pad: int = 0, separators: tuple[int, ...] = ()) -> ir.Func:
    """``B[offset*size + i*8 + j] = A[i, j] * 2`` then ``C[i, j] = B_view[i, j]`` (plus 1 when float32)
    under one loop ``i``; ``B_view`` is ``[4, view_cols]`` of ``view_dtype`` at ``elem_offset=offset``."""
    ratio = ir.dtype_bytes("float32") // ir.dtype_bytes(view_dtype)  # view elements per float32
    start = offset // ratio
    a = ir.decl_buffer("A", (ROWS, COLS))
    c = ir.decl_buffer("C", (ROWS, view_cols), view_dtype)
    b = ir.decl_buffer("B", (start + ROWS * COLS + pad,))
    view = ir.decl_buffer("B_view", (ROWS, view_cols), view_dtype, data=b.data, elem_offset=offset, axis_separators=separators)
    i, j, k = ir.Var("i"), ir.Var("j"), ir.Var("k")
    write = _block("W", i, j, COLS, lambda vi, vj: ir.BufferStore(b, a[vi, vj] * 2.0, (vi * COLS + vj + start,)))
    value = (lambda v: v + 1.0) if view_dtype == "float32" else (lambda v: v)
    read = _block("R", i, k, view_cols, lambda vi, vk: ir.BufferStore(c, value(view[vi, vk]), (vi, vk)))
    body = ir.For(i, ir.const(0), ir.const(ROWS), ir.ForKind.SERIAL, ir.seq(
        ir.For(j, ir.const(0), ir.const(COLS), ir.ForKind.SERIAL, write),
        ir.For(k, ir.const(0), ir.const(view_cols), ir.ForKind.SERIAL, read),
    ))  # fmt: skip
    root = ir.Block("root", (), (), ir.DeclBuffer(view, body), alloc_buffers=(b,))
    return ir.Func("aliased", (a, c), root)


def run(func: ir.Func) -> tuple[np.ndarray, ir.Func]:
    lowered = lower(func, verify=True)
    out = np.zeros(func.params[1].const_shape(), func.params[1].dtype)
    build(lowered.func, lowered.plan)(A_IN, out)
    return out, lowered.func


def test_a_view_at_an_offset_reads_what_the_owner_wrote_and_keeps_the_allocation_whole(golden):
    func = aliased(offset=3, view_dtype="float32", view_cols=COLS)
    golden("lowering/alias_offset", str(func))
    out, lowered = run(func)
    np.testing.assert_array_equal(out, A_IN * 2 + 1)
    # both accesses are under loop i: one row of B's own accesses would be 8 elements
    assert allocations(lowered)["B"] == (3 + ROWS * COLS,)
    golden("lowering/alias_offset_lowered", str(lowered))


def test_a_view_of_another_dtype_reinterprets_the_bytes():
    out, lowered = run(aliased(offset=0, view_dtype="int32", view_cols=COLS))
    np.testing.assert_array_equal(out, (A_IN * 2).view(np.int32))
    assert "B_view = B_data[:32].view(np.int32)\n" in generate_source(lowered).text
    # int8 view of the same float32 storage, 4 bytes per element, starting 4 int8 elements (one float32) in
    out, _ = run(aliased(offset=4, view_dtype="int8", view_cols=4 * COLS))
    np.testing.assert_array_equal(out, (A_IN * 2).view(np.int8))


def test_splitting_the_loops_of_aliased_blocks_stays_right():
    sch = Schedule(aliased(offset=3, view_dtype="float32", view_cols=COLS)).split("j", [None, 4]).split("k", [2, None])
    out, _ = run(sch.func)
    np.testing.assert_array_equal(out, A_IN * 2 + 1)


def _refused(primitive: str, block: str, buffer: str, view: str) -> pytest.RaisesContext[ScheduleError]:
    message = (
        f"{primitive}: block '{block}' accesses '{buffer}', whose storage is also viewed as '{view}' (DeclBuffer): "
        f"{primitive} follows producers and consumers by buffer and cannot see through a view"
    )
    return pytest.raises(ScheduleError, match="^" + re.escape(message) + "$")


def test_primitives_that_follow_buffers_refuse_blocks_on_viewed_storage():
    sch = Schedule(aliased(offset=3, view_dtype="float32", view_cols=COLS))
    with _refused("cache_read", "R", "B_view", "B"):
        sch.cache_read("R", 0)
    with _refused("compute_inline", "W", "B", "B_view"):
        sch.compute_inline("W")
    with _refused("parallel", "W", "B", "B_view"):
        sch.parallel("i")
    message = (
        "set_scope: local buffer 'B' lives in registers, one per element: its storage is also viewed as 'B_view' "
        "(DeclBuffer), and registers cannot be viewed"
    )
    with pytest.raises(ScheduleError, match="^" + re.escape(message) + "$"):
        sch.set_scope("W", "B", "local")


def test_a_view_past_its_storage_is_refused_by_the_verifier():
    with pytest.raises(IRError, match=re.escape("buffer 'B_view' views 140 bytes of storage 'B_data' (elem_offset 3, float32), which holds 128")):
        ir.verify(aliased(offset=3, view_dtype="float32", view_cols=COLS, pad=-3))
    with pytest.raises(ValueError, match=re.escape("buffer V: elem_offset must be a constant >= 0, got -1")):
        ir.decl_buffer("V", (4,), data=ir.Var("x", "handle"), elem_offset=-1)


def test_views_lowering_cannot_give_are_refused_by_lowering():
    func = aliased(offset=0, view_dtype="float32", view_cols=COLS)
    a = func.params[0]
    # a parameter read as another dtype
    as_int = ir.decl_buffer("A_bits", (ROWS, COLS), "int32", data=a.data)
    k = ir.Var("k")
    root = func.body
    assert isinstance(root, ir.Block)
    peek = ir.For(k, ir.const(0), ir.const(1), ir.ForKind.SERIAL, ir.BufferStore(func.params[1], ir.Cast("float32", as_int[0, 0]), (0, 0)))
    bad = ir.Func("aliased", func.params, ir.DeclBuffer(as_int, ir.seq(root, peek)))
    with pytest.raises(LoweringError, match=re.escape(
        "flatten_buffers: buffer 'A_bits' views the storage of parameter 'A' as int32: a parameter is the caller's float32 "
        "array and is not reinterpreted (reinterpret an intermediate copy of it)"
    )):  # fmt: skip
        lower(bad)
    # a view split into banks
    with pytest.raises(LoweringError, match=re.escape(
        "flatten_buffers: buffer 'B_view' views the storage of buffer 'B', and one of them has axis separators: "
        "a view of banked storage is not supported"
    )):  # fmt: skip
        lower(aliased(offset=0, view_dtype="float32", view_cols=COLS, separators=(1,)))


def test_a_view_declared_inside_a_block_on_storage_from_outside_is_refused():
    b = ir.decl_buffer("B", (8,))
    view = ir.decl_buffer("B_pair", (4, 2), data=b.data)
    v = ir.Var("v")
    body = ir.DeclBuffer(view, ir.BufferStore(view, ir.FloatImm(1.0), (v, 0)))
    block = ir.Block("X", (ir.IterVar(v, ir.Range.of(0, 4), "spatial"),), (ir.const(0),), body)
    with pytest.raises(IRError, match=re.escape(
        "block_access_regions: buffer 'B_pair' is declared inside a block on storage 'B_data' that the block does not "
        "allocate; declare a view around the blocks that use it"
    )):  # fmt: skip
        refresh_regions(block)


def test_a_view_of_a_parameter_at_an_offset_reads_its_rows():
    a, c = ir.decl_buffer("A", (ROWS, COLS)), ir.decl_buffer("C", (ROWS - 1, COLS))
    tail = ir.decl_buffer("A_tail", (ROWS - 1, COLS), data=a.data, elem_offset=COLS)
    i, j = ir.Var("i"), ir.Var("j")
    block = _block("R", i, j, COLS, lambda vi, vj: ir.BufferStore(c, tail[vi, vj] * 3.0, (vi, vj)))
    block = refresh_regions(
        ir.Block("R", (ir.IterVar(block.iter_vars[0].var, ir.Range.of(0, ROWS - 1), "spatial"), block.iter_vars[1]), block.bindings, block.body)
    )
    body = ir.For(i, ir.const(0), ir.const(ROWS - 1), ir.ForKind.SERIAL, ir.For(j, ir.const(0), ir.const(COLS), ir.ForKind.SERIAL, block))
    func = ir.Func("tail", (a, c), ir.Block("root", (), (), ir.DeclBuffer(tail, body)))
    lowered = lower(func, verify=True)
    assert "C_flat[i * 8 + j] = A_tail[i * 8 + j + 8] * 3.0" in str(lowered.func)
    out = np.zeros((ROWS - 1, COLS), np.float32)
    build(lowered.func, lowered.plan)(A_IN, out)
    np.testing.assert_array_equal(out, A_IN[1:] * 3)


def test_a_view_is_not_placed_or_laid_out_for_itself():
    from autotune.schedule.primitives import PRIMITIVES

    sch = Schedule(aliased(offset=3, view_dtype="float32", view_cols=COLS))
    message = "set_pools: 'B_view' is a view (DeclBuffer) of the storage of 'B'; set_pools 'B' instead"
    with pytest.raises(ScheduleError, match="^" + re.escape(message) + "$"):
        sch.set_pools("R", "B_view", ["sram"])
    # called as a function, outside Schedule's own check of views
    message = "transform_layout: 'B_view' is a view (DeclBuffer) of the storage of 'B'; transform_layout 'B' instead"
    with pytest.raises(ScheduleError, match="^" + re.escape(message) + "$"):
        PRIMITIVES["transform_layout"](sch.func, block="R", buffer="B_view", index_map=[["v", 1], ["v", 0]])
    # the storage itself can be placed
    assert "candidate_memory_pools" in str(sch.set_pools("W", "B", ["sram"]).func)
