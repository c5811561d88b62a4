"""inject_double_buffer: the seed's banked double buffer, the matmul staging, numbers, errors."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from ir_helpers import allocations

from autotune import ir, te, workloads
from autotune.errors import LoweringError
from autotune.lowering import lower
from autotune.lowering.double_buffer import inject_double_buffer
from autotune.schedule import AXIS_SEPARATOR, Schedule
from autotune.schedule.tree import replace_stmt


def staged(n: int = 4 * 8192, tile: int = 8192) -> Schedule:
    """The seed: ``B = A * 2`` tiled by ``tile``, with A staged tile by tile in ``local.vtcm``."""
    a = te.placeholder((n,), "float32", name="A")
    b = te.compute((n,), lambda i: a[i] * 2.0, name="B")
    sch = Schedule(te.create_func([a], [b], name="stage")).split("i", [None, tile], names=["io", "ii"])
    sch = sch.cache_read("B", 0, "local.vtcm")
    return sch.compute_at("A_local_vtcm", "io")


def banked(n: int = 4 * 8192, tile: int = 8192, bank: int = 4096) -> Schedule:
    """The staged tile laid out as ``[tile // bank | bank]``: banks of ``bank`` elements."""
    return staged(n, tile).transform_layout("A_local_vtcm", "A_local_vtcm", lambda i: [i // bank, AXIS_SEPARATOR, i % bank])


def decls(func: ir.Func) -> dict[str, ir.Buffer]:
    return {d.buffer.name: d.buffer for d in ir.collect(func.body, ir.DeclBuffer)}


@pytest.fixture(scope="module")
def mm():
    return workloads.get("matmul", m=16, n=16, k=16)


def mm_staged(mm) -> Schedule:  # type: ignore[no-untyped-def]
    sch = Schedule(mm.func).split("i", [None, 8], names=["io", "ii"])
    sch = sch.cache_read("matmul", 1, "global").compute_at("A_global", "io")
    return sch.double_buffer("A_global")


def run_seed(sch: Schedule) -> ir.Func:
    """Lower, compile and run the staged ``B = A * 2``; return the lowered function."""
    from autotune.codegen import build

    lowered = lower(sch.func, verify=True)
    kernel = build(lowered.func, lowered.plan)
    n = sch.func.params[0].const_shape()[0]
    a = np.random.default_rng(0).random(n, dtype=np.float32)
    b = np.full(n, np.nan, dtype=np.float32)
    kernel(a, b)
    np.testing.assert_array_equal(b, a * 2.0)
    return lowered.func


def test_seed_banked_double_buffer(golden):
    """A cached [8192] tile laid out [2, 4096] with an axis separator, then double-buffered."""
    sch = banked().double_buffer("A_local_vtcm")
    assert str(Schedule.replay(sch.original, sch.trace).func) == str(sch.func)
    staged_ir = lower(sch.func, until="inject_double_buffer", verify=True).func
    golden("lowering/double_buffer_banked", str(staged_ir))
    buf = allocations_blocks(staged_ir)["A_local_vtcm"]
    assert buf.const_shape() == (2, 2, 4096) and buf.axis_separators == (2,)
    golden("lowering/double_buffer_banked_final", str(lower(sch.func, until="simplify", verify=True).func))
    final = lower(sch.func, verify=True).func
    # four physical banks of 4096: [slot, bank] merged into the first physical axis
    assert allocations(final) == {"A_local_vtcm": (4, 4096)}
    flat = decls(final)["A_local_vtcm"]
    assert flat.const_shape() == (4, 4096) and flat.axis_separators == (1,)


def allocations_blocks(func: ir.Func) -> dict[str, ir.Buffer]:
    return {b.name: b for blk in ir.collect(func.body, ir.Block) for b in blk.alloc_buffers}


@pytest.mark.slow
def test_seed_banked_double_buffer_numbers():
    func = run_seed(banked(n=64, tile=16, bank=8).double_buffer("A_local_vtcm"))
    assert allocations(func) == {"A_local_vtcm": (4, 8)}


@pytest.mark.slow
def test_flat_double_buffer_numbers():
    func = run_seed(staged(n=64, tile=16).double_buffer("A_local_vtcm"))
    assert allocations(func) == {"A_local_vtcm": (2, 16)}  # one bank per slot


@pytest.mark.slow
def test_double_buffer_keeps_spaced_private_copies():
    """Two threads each stage their tiles of A into their own copy, each followed by 64 elements (256 bytes)
    of padding (a stride of 8 + 64 rounded up to 16: 80); the slot is a group of its own, so each slot
    holds both padded copies."""
    a = te.placeholder((64,), "float32", name="A")
    b = te.compute((64,), lambda i: a[i] * 2.0, name="B")
    sch = Schedule(te.create_func([a], [b], name="stage")).split("i", [2, None, 8], names=["ip", "io", "ii"])
    sch = sch.cache_read("B", 0, "global").compute_at("A_global", "io")
    sch = sch.parallel("ip", copy_pad=256).double_buffer("A_global")
    staged_ir = lower(sch.func, until="inject_double_buffer", verify=True).func
    buf = allocations_blocks(staged_ir)["A_global"]
    assert (buf.const_shape(), buf.axis_separators, buf.element_strides()) == ((2, 2, 8), (1,), (1, 80, 1))
    func = run_seed(sch)
    assert allocations(func) == {"A_global": (2, 2 * 80)}


def test_matmul_double_buffer_golden(mm, golden):
    sch = mm_staged(mm)
    assert str(Schedule.replay(mm.func, sch.trace_json()).func) == str(sch.func)
    out = lower(sch.func, until="inject_double_buffer", verify=True).func
    golden("lowering/double_buffer_matmul", str(out))
    text = str(out)
    assert "A_global[io % 2, " in text or "A_global[io, " in text  # io < 2: io % 2 simplifies to io
    assert "T.where(io + 1 < 2)" in text
    assert 0 < text.index('T.block("A_global_prologue")') < text.index("for io in") < text.index('T.block("A_global")')


@pytest.mark.slow
def test_matmul_double_buffer_numbers(mm, run_func):
    lowered = run_func(mm, mm_staged(mm).func)
    assert allocations(lowered.func) == {"A_global": (2, 128)}


@pytest.mark.slow
def test_matmul_double_buffer_two_stages_numbers(mm, run_func):
    sch = Schedule(mm.func).split("i", [None, 4], names=["io", "ii"]).split("k", [None, 8], names=["ko", "ki"])
    sch = sch.reorder("io", "ko", "ii", "j", "ki")
    sch = sch.cache_read("matmul", 1, "global").cache_read("matmul", 2, "global")
    sch = sch.compute_at("A_global", "ko").compute_at("B_global", "ko")
    sch = sch.double_buffer("A_global").double_buffer("B_global")
    lowered = run_func(mm, sch.func)
    assert allocations(lowered.func) == {"A_global": (2, 32), "B_global": (2, 128)}


def test_pass_is_a_no_op_without_tags(mm):
    assert inject_double_buffer(mm.func) is mm.func


def test_missing_loop_is_a_lowering_error():
    sch = banked(n=64, tile=16, bank=8).double_buffer("A_local_vtcm")
    func = lower(sch.func, until="compact_buffers").func
    blk = next(b for b in ir.collect(func.body, ir.Block) if b.name == "A_local_vtcm")
    bad = replace_stmt(func, blk, replace(blk, annotations=ir.ann_set(blk.annotations, "double_buffer", "nope")))
    with pytest.raises(LoweringError, match="block 'A_local_vtcm' is tagged to double-buffer over loop 'nope', which is not around it"):
        inject_double_buffer(bad)
