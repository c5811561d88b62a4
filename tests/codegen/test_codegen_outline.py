"""Outlined nests: ``set_vectorizer(mode, loop=...)`` annotates a loop, the code generator writes
its nest as a function of the kernel's module, and the build compiles that function with ``mode``."""

from __future__ import annotations

import re
from dataclasses import replace

import numpy as np
import pytest
from codegen_funcs import avx2, register_tiled, tiled_stage

from autotune import ir, workloads
from autotune.codegen import build, generate_source
from autotune.errors import CodegenError, ScheduleError
from autotune.lowering import lower
from autotune.schedule import Schedule


def _matmul(m: int, n: int, k: int) -> ir.Func:
    return workloads.get("matmul", m=m, n=n, k=k).func


# ---- the primitive ---------------------------------------------------------------
def test_set_vectorizer_on_a_loop_annotates_only_that_loop():
    sch = register_tiled(_matmul(8, 16, 2), outline="jo")
    assert 'for jo in T.serial(2, annotations={"autotune.vectorizer": "slp"}):' in str(sch.func)
    assert ir.ann_get(sch.func.attrs, ir.VECTORIZER_ATTR) is None
    assert sch.trace[-1].op == "set_vectorizer"
    replayed = Schedule.replay(_matmul(8, 16, 2), sch.trace_json())
    assert str(replayed.func) == str(sch.func)


def test_set_vectorizer_names_a_missing_loop():
    with pytest.raises(ScheduleError) as info:
        Schedule(_matmul(4, 4, 4)).set_vectorizer("slp", loop="jo")
    assert str(info.value) == "set_vectorizer: no loop named 'jo' (loops: i, j, k)"


def test_an_outlined_nest_may_not_hold_the_parallel_loop():
    sch = Schedule(_matmul(4, 4, 4)).parallel("j")
    with pytest.raises(ScheduleError) as info:
        sch.set_vectorizer("slp", loop="i")
    assert str(info.value) == "set_vectorizer: loop 'i' holds the parallel loop 'j'; an outlined nest runs on one thread"


# ---- the source ---------------------------------------------------------------------
def test_outlined_register_tile_golden(golden):
    src = generate_source(lower(register_tiled(_matmul(8, 16, 2), outline="jo").func).func)
    assert (src.outlined, src.outlined_vectorizer, src.vectorizer) == (("matmul_jo",), "slp", "loop")
    # the callee is compiled for its signature with its vectoriser and the kernel's fast-math flags
    assert '@_nest("void(float32[::1], float32[::1], float32[::1], int64)", vectorizer="slp", fastmath={' in src.text
    golden("codegen/outlined_matmul", src.text)


def test_a_one_iteration_outlined_loop_stays_without_its_variable():
    text = generate_source(lower(register_tiled(_matmul(8, 8, 2), outline="jo").func).func).text
    assert "def matmul_jo(A_flat, B_flat, matmul_flat, io):\n    for jo in range(1):\n" in text
    assert not re.search(r"\bjo \*", text)


def test_same_vectorizer_as_the_kernel_outlines_nothing():
    func = register_tiled(_matmul(8, 16, 2), outline="jo").set_vectorizer("slp").func
    src = generate_source(lower(func).func)
    assert src.outlined == () and src.outlined_vectorizer is None and "def matmul_jo" not in src.text


def test_outlining_errors_are_precise():
    inner = register_tiled(_matmul(8, 16, 2), outline="io").set_vectorizer("loop", loop="jo")
    with pytest.raises(CodegenError, match=r"^codegen: loop 'jo' asks for vectorizer 'loop' inside a nest outlined as 'slp'$"):
        generate_source(lower(inner.func).func)
    # the k loop's nest uses the register tile, which lives in the enclosing jo loop: the primitive refuses
    with pytest.raises(
        ScheduleError,
        match=r"^set_vectorizer: loop 'k' cannot be outlined: local buffer 'matmul_local' is also used "
        r"outside it \(registers cannot be passed\)$",
    ):
        register_tiled(_matmul(8, 16, 2), outline="k")


def test_an_outlined_loop_takes_the_storage_allocated_in_it_unless_it_views_it():
    def outlined(view: bool) -> ir.Func:
        func, _ = tiled_stage(view=view)
        loop = func.body
        assert isinstance(loop, ir.For)
        return replace(func, body=replace(loop, annotations=((ir.VECTORIZER_ATTR, "slp"),)))

    text = generate_source(outlined(False)).text
    assert '"void(float32[::1], float32[::1], float32[::1])", vectorizer="slp"' in text
    assert "def tiled_stage_t(T_data, A, O):\n" in text and "    tiled_stage_t(T_data, A, O)\n" in text
    with pytest.raises(
        CodegenError,
        match=r"^codegen: outlined loop 't' declares buffer T2 as a view of T_data \(a reshape, another dtype "
        r"or banks\); inside an outlined nest a buffer on storage must be the storage itself$",
    ):
        generate_source(outlined(True))


# ---- compiling -----------------------------------------------------------------------
@avx2
@pytest.mark.slow
def test_outlined_nest_is_compiled_with_slp_and_computes_the_product():
    lowered = lower(register_tiled(_matmul(16, 16, 16), outline="jo").func)
    kernel = build(lowered.func, lowered.plan)
    a, b = (np.random.default_rng(s).standard_normal((16, 16), dtype=np.float32) for s in (1, 2))
    c = np.full((16, 16), np.nan, np.float32)
    kernel(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)
    # the outlined function, translated to LLVM IR and optimised with SLP (numba never typed it)
    outlined = kernel.dispatcher.py_func.__globals__["matmul_jo"]
    assert outlined.compiled_by == "llvm"
    asm = outlined.library().get_asm_str()
    assert len(re.findall(r"\bvfmadd\d+ps\b[^\n]*%[yz]mm", asm)) >= 4, asm
    assert "vgather" not in asm
