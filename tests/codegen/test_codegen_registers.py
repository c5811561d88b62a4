"""``local`` allocations are register tiles: one scalar variable per element, in no memory pool.

The register-tiled matmul (a 4x8 accumulator tile over unrolled loops), its
source, memory plan and numbers; the errors for a tile that cannot live in
registers (a non-constant index, too many elements).
"""

from __future__ import annotations

import re
from dataclasses import replace

import pytest
from codegen_funcs import register_tiled

from autotune import ir, workloads
from autotune.codegen import generate_source
from autotune.codegen.declare import REGISTER_LIMIT
from autotune.errors import CodegenError
from autotune.lowering import lower
from autotune.memory.lowering import allocations_of
from autotune.schedule import Schedule


@pytest.fixture(scope="module")
def mm():
    return workloads.get("matmul", m=16, n=16, k=16)


def test_register_tile_is_scalar_variables(mm):
    lowered = lower(register_tiled(mm.func).func, verify=True)
    src = generate_source(lowered.func)
    text = src.text
    # 32 accumulators, zeroed where the tile is allocated (under jo), 8 to a line
    names = [f"matmul_local_{k}" for k in range(32)]
    assert "            " + "; ".join(f"{n} = _c0" for n in names[:8]) + "\n" in text
    assert re.findall(r"\bmatmul_local_\d+\b", text).count("matmul_local_31") >= 3  # zeroed, updated, stored
    # the update of the first row of the tile, and its store to C
    assert "matmul_local_0 = matmul_local_0 + ld * ld_1" in text
    assert "ix_2 = io * 64 + jo * 8\n" in text and "matmul_flat[np.uintp(ix_2 + 55)] = matmul_local_31" in text
    # no array for the tile: not an argument, never indexed, not in the plan
    assert "matmul_local[" not in text and "matmul_local_data" not in text
    assert src.storage == () and src.arg_names == ("A", "B", "matmul_1")
    assert lowered.plan.placements == () and allocations_of(lowered.func) == []
    assert lowered.plan.total_peak == 0


@pytest.mark.slow
def test_register_tile_numbers(mm, run_func):
    lowered = run_func(mm, register_tiled(mm.func).func)
    assert lowered.plan.placements == ()


@pytest.mark.slow
def test_register_tile_under_a_parallel_loop_numbers(mm, run_func):
    # each thread's tile is its own (no per-iteration copies, the scalars are private to the prange body)
    sch = register_tiled(mm.func).parallel("io")
    lowered = run_func(mm, sch.func)
    assert lowered.plan.placements == ()
    assert "for io in numba.prange(4):" in generate_source(lowered.func).text


def _as_registers(func: ir.Func, name: str) -> ir.Func:
    """``func`` with allocation ``name`` in registers (scope ``local``, in no pool): IR that the
    schedule no longer produces (set_scope and compaction keep such a tile in memory), to test the
    code generator's own refusal."""
    alloc = next(a for a in ir.collect(func.body, ir.Allocate) if a.data.name == f"{name}_data")
    old = next(d.buffer for d in ir.collect(func.body, ir.DeclBuffer) if d.buffer.name == name)
    new = replace(old, scope=ir.REGISTER_SCOPE)

    class _Local(ir.Transformer):
        def visit_Allocate(self, a: ir.Allocate) -> ir.Stmt:
            a = self.generic_visit(a)
            if a.data is alloc.data:
                return replace(a, annotations=(("scope", ir.REGISTER_SCOPE),))
            return a

    return replace(func, body=ir.substitute(_Local().visit(func.body), bmap={old: new}))


def test_register_tile_indexed_by_a_loop_that_is_not_unrolled(mm):
    lowered = lower(register_tiled(mm.func, unroll=False).func)
    with pytest.raises(CodegenError) as info:
        generate_source(_as_registers(lowered.func, "matmul_local"))
    assert str(info.value) == (
        "codegen: local buffer matmul_local lives in registers and needs constant in-bounds indices, "
        "got ii * 8 + ji (unroll the loops over it)"
    )


def test_register_tile_larger_than_the_register_limit():
    big = workloads.get("matmul", m=64, n=32, k=2)
    assert REGISTER_LIMIT < 64 * 32
    lowered = lower(Schedule(big.func).cache_write("matmul", 0, "local").func)
    with pytest.raises(CodegenError) as info:
        generate_source(_as_registers(lowered.func, "matmul_local"))
    assert str(info.value) == (
        f"codegen: local allocation matmul_local_data of [2048] must have constant extents and at most "
        f"{REGISTER_LIMIT} elements (it lives in registers)"
    )


def test_promoted_accumulator_is_one_scalar():
    pool = workloads.get("pool_chain", height=8, width=8, channels=4)
    text = generate_source(lower(pool.func).func).text
    assert "pool1_acc_0 = _c1\n" in text  # -inf, the max-pool identity
    assert "pool1_acc_0 = max(pool1_acc_0, data_flat[np.uintp(" in text
    assert "pool1_data[np.uintp(y * 24 + x * 4 + c)] = pool1_acc_0\n" in text
    assert "pool1_acc[" not in text and "pool1_acc_data" not in text


def test_float_register_of_another_dtype_is_zeroed_in_that_dtype():
    from autotune import ir

    acc = ir.decl_buffer("acc", (2,), "float64", scope="local")
    out = ir.decl_buffer("O", (2,), "float64")
    k = ir.Var("k")
    body = ir.seq(
        ir.For(k, ir.const(0), ir.const(2), "unroll", ir.BufferStore(acc, acc[k] + 1.0, (k,))),
        ir.For(k, ir.const(0), ir.const(2), "unroll", ir.BufferStore(out, acc[k], (k,))),
    )
    alloc = ir.Allocate(acc.data, "float64", (ir.const(2),), ir.DeclBuffer(acc, body), (("scope", "local"),))
    text = generate_source(ir.Func("f", (out,), alloc)).text
    assert "_c0 = np.float64(0.0)" in text
    assert "acc_0 = _c0; acc_1 = _c0\n" in text
    assert "acc_1 = acc_1 + _c1\n" in text and "O[1] = acc_1\n" in text


def test_register_buffer_indexed_with_the_wrong_number_of_indices():
    from autotune import ir

    acc = ir.decl_buffer("acc", (2, 2), scope="local")
    out = ir.decl_buffer("O", (2,))
    body = ir.BufferStore(out, acc[1], (0,))  # one index for two dimensions
    alloc = ir.Allocate(acc.data, "float32", (ir.const(4),), ir.DeclBuffer(acc, body), (("scope", "local"),))
    with pytest.raises(CodegenError, match=r"local buffer acc of shape \(2, 2\) indexed with 1 indices over 4 registers"):
        generate_source(ir.Func("f", (out,), alloc))
    # a view larger than its registers
    view = ir.decl_buffer("acc", (3, 2), scope="local", data=acc.data)
    body = ir.BufferStore(out, view[2, 1], (0,))
    alloc = ir.Allocate(acc.data, "float32", (ir.const(4),), ir.DeclBuffer(view, body), (("scope", "local"),))
    with pytest.raises(CodegenError, match=r"shape \(3, 2\) indexed with 2 indices over 4 registers"):
        generate_source(ir.Func("f", (out,), alloc))
