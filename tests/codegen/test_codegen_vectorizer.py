"""set_vectorizer: the schedule primitive, the kernel header, the compile options, and
what LLVM makes of the kernels (numba's ``inspect_asm``)."""

from __future__ import annotations

import re
from dataclasses import replace

import numpy as np
import pytest
from codegen_funcs import avx2, fresh_asm, register_tiled

from autotune import ir, te, workloads
from autotune.codegen import build, generate_source
from autotune.errors import CodegenError, ScheduleError
from autotune.lowering import lower
from autotune.schedule import Schedule
from autotune.workloads import ops, reference

SLP_HEADER = "# vectorizer: slp (compiled with LLVM's loop vectorizer off and SLP on)\n"


@pytest.fixture(scope="module")
def mm():
    return workloads.get("matmul", m=16, n=16, k=16)


# ---- the primitive ---------------------------------------------------------------
def test_set_vectorizer_is_a_function_attribute(mm):
    sch = Schedule(mm.func).set_vectorizer("slp")
    assert ir.ann_get(sch.func.attrs, ir.VECTORIZER_ATTR) == "slp"
    assert 'T.func_attr({"autotune.vectorizer": "slp"})' in str(sch.func)
    assert ir.ann_get(sch.set_vectorizer("loop").func.attrs, ir.VECTORIZER_ATTR) == "loop"
    # lowering keeps it
    assert ir.ann_get(lower(sch.func).func.attrs, ir.VECTORIZER_ATTR) == "slp"


def test_set_vectorizer_trace_round_trip(mm):
    sch = register_tiled(mm.func)
    assert sch.trace[-1].op == "set_vectorizer"
    for trace in (sch.trace, sch.trace_json()):
        replayed = Schedule.replay(mm.func, trace)
        assert str(replayed.func) == str(sch.func)
        assert replayed.trace_json() == sch.trace_json()


def test_set_vectorizer_rejects_an_unknown_mode(mm):
    with pytest.raises(ScheduleError) as info:
        Schedule(mm.func).set_vectorizer("simd")
    assert str(info.value) == "set_vectorizer: mode must be one of loop, slp, got 'simd'"
    assert info.value.primitive == "set_vectorizer"


# ---- the kernel source --------------------------------------------------------------
def test_slp_kernel_has_the_header_and_records_the_mode(mm):
    src = generate_source(lower(Schedule(mm.func).set_vectorizer("slp").func).func)
    assert src.vectorizer == "slp"
    assert src.text.splitlines()[2] + "\n" == SLP_HEADER
    # the mode is in the source, hence in the kernel key: loop and slp never share a cache entry
    loop = generate_source(lower(mm.func).func)
    assert loop.vectorizer == "loop" and "# vectorizer" not in loop.text
    assert generate_source(lower(Schedule(mm.func).set_vectorizer("loop").func).func).text == loop.text


def test_unknown_vectorizer_attribute_is_a_codegen_error(mm):
    func = lower(mm.func).func
    bad = replace(func, attrs=ir.ann_set(func.attrs, ir.VECTORIZER_ATTR, "simd"))
    with pytest.raises(CodegenError, match=r"codegen: unknown vectorizer 'simd' \(attribute autotune.vectorizer\)"):
        generate_source(bad)


# ---- compiling -----------------------------------------------------------------------
@pytest.mark.slow
def test_slp_compile_restores_numba_settings(mm):
    import numba

    codegen = numba.core.registry.cpu_target.target_context.codegen()
    before = (numba.core.config.LOOP_VECTORIZE, numba.core.config.SLP_VECTORIZE, codegen._loopvect)
    lowered = lower(register_tiled(mm.func).func)
    fresh_asm(build(lowered.func, lowered.plan))
    assert (numba.core.config.LOOP_VECTORIZE, numba.core.config.SLP_VECTORIZE, codegen._loopvect) == before


@avx2
@pytest.mark.slow
def test_register_tile_becomes_packed_fmas(mm):
    lowered = lower(register_tiled(mm.func).func)
    kernel = build(lowered.func, lowered.plan)
    asm = fresh_asm(kernel)
    packed = re.findall(r"\bvfmadd\d+ps\b[^\n]*%[yz]mm", asm)
    # a 4x8 tile: one 8-wide FMA per row and k (unrolled by LLVM), on ymm or zmm registers
    assert len(packed) >= 4, asm
    assert "vgather" not in asm
    a, b = (np.random.default_rng(s).standard_normal((16, 16), dtype=np.float32) for s in (1, 2))
    c = np.full((16, 16), np.nan, np.float32)
    kernel(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


@avx2
@pytest.mark.slow
def test_pool_chain_default_kernel_is_vector_max_without_gathers():
    # channels = 32: the channel loop is long enough for the loop vectorizer (with 4, 8 or 16
    # channels it stays scalar, vmaxss, on this code); rows and columns small
    pool = workloads.get("pool_chain", height=6, width=6, channels=32)
    lowered = lower(pool.func)
    kernel = build(lowered.func, lowered.plan)
    asm = fresh_asm(kernel)
    assert re.search(r"\bvmaxps\b[^\n]*%[xyz]mm", asm), asm
    assert "vgather" not in asm


@avx2
@pytest.mark.slow
def test_depthwise_default_kernel_is_packed_fmas_without_gathers():
    # the 3x3 window is unrolled by LLVM and the 32-channel loop vectorised: packed FMAs over the
    # channels, the padding's Select as a blend, no gathers
    data = te.placeholder((1, 6, 6, 32), "float32", name="data")
    weight = te.placeholder((3, 3, 32), "float32", name="w")
    func = te.create_func([data, weight], [ops.depthwise_conv2d_nhwc(data, weight, 1, 1)], name="dw")
    lowered = lower(func)
    kernel = build(lowered.func, lowered.plan)
    asm = fresh_asm(kernel)
    assert len(re.findall(r"\bvfmadd\d+ps\b[^\n]*%[yz]mm", asm)) >= 9, asm
    assert "vgather" not in asm
    x, w = (np.random.default_rng(s).standard_normal(shape, dtype=np.float32) for s, shape in ((1, (1, 6, 6, 32)), (2, (3, 3, 32))))
    out = np.full((1, 6, 6, 32), np.nan, np.float32)
    kernel(x, w, out)
    np.testing.assert_allclose(out, reference.depthwise_conv2d_nhwc(x, w, 1, 1), rtol=1e-4, atol=1e-4)
