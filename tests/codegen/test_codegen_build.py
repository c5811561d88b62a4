"""build: numeric results against numpy, the kernel cache, argument checks, compile errors."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import replace

import numpy as np
import pytest
from codegen_funcs import (
    banked,
    matmul,
    padded_conv,
    padded_conv_inline,
    pool_chain,
    tiled_stage,
    tiled_stages,
)

from autotune import ir
from autotune.codegen import Kernel, build, generate_source
from autotune.codegen.build import default_cache_dir, kernel_key
from autotune.errors import CodegenError
from autotune.lowering import plan_lowered
from autotune.memory import Pool

pytestmark = pytest.mark.slow

FUNCS: dict[str, Callable[[], tuple[ir.Func, Callable[..., tuple[np.ndarray, ...]]]]] = {
    "pool_chain": pool_chain,
    "matmul": matmul,
    "padded_conv": padded_conv,
    "padded_conv_inline": padded_conv_inline,
    "banked": banked,
    "tiled_stage": tiled_stage,
    "tiled_stage_view": lambda: tiled_stage(view=True),
}


def run(kernel: Kernel, func: ir.Func, seed: int = 0) -> tuple[list[np.ndarray], list[np.ndarray]]:
    rng = np.random.default_rng(seed)
    inputs = [rng.standard_normal(b.const_shape()).astype(b.dtype) for b in func.inputs]
    outputs = [np.full(b.const_shape(), np.nan, b.dtype) for b in func.outputs]
    kernel(*inputs, *outputs)
    return inputs, outputs


@pytest.mark.parametrize("name", sorted(FUNCS))
def test_kernel_matches_numpy(name: str) -> None:
    func, reference = FUNCS[name]()
    kernel = build(func)
    inputs, outputs = run(kernel, func)
    for out, ref in zip(outputs, reference(*inputs)):
        np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)
    assert kernel.compile_seconds is not None and kernel.compile_seconds >= 0


def test_a_kernel_on_planned_shared_bytes_matches_numpy() -> None:
    # T and V of each tile share bytes of pool p (the plan reuses T's for V): the body holds both
    # without noalias on them, and computes the chain
    func, reference = tiled_stages()
    planned = plan_lowered(func, pools=(Pool("p", 1024),))
    kernel = build(planned.func, planned.plan)
    t, _, v = kernel.storage
    assert np.shares_memory(t, v) and kernel.workspace_bytes == planned.plan.total_peak
    inputs, outputs = run(kernel, planned.func)
    np.testing.assert_allclose(outputs[0], reference(*inputs)[0], rtol=1e-6)


class _ParallelRows(ir.Transformer):
    """Mark the row loops (``y``) parallel."""

    def visit_For(self, node: ir.For) -> ir.For:
        node = self.generic_visit(node)
        return replace(node, kind=ir.ForKind.PARALLEL) if node.loop_var.name.split("_")[0] == "y" else node


def test_parallel_kernel_matches_numpy() -> None:
    func, reference = pool_chain(height=10, width=9, channels=3)
    par = _ParallelRows().visit(func)
    assert generate_source(par).text.count("numba.prange") == 2
    kernel = build(par)
    assert kernel.parallel and not build(func).parallel
    inputs, outputs = run(kernel, par)
    np.testing.assert_array_equal(outputs[0], reference(*inputs)[0])


def test_kernel_source_and_file(tmp_path) -> None:
    func, _ = matmul()
    kernel = build(func, cache_dir=tmp_path)
    key = kernel_key(kernel.source)
    assert kernel.key == key
    assert kernel.path == tmp_path / "kernels" / f"k_{key[:16]}.py"
    assert kernel.path.read_text() == kernel.source == generate_source(func).text
    assert f"autotune_kernel_{key[:16]}" in sys.modules
    assert not list(kernel.path.parent.glob("*.tmp"))  # written atomically, no leftovers


def test_default_cache_dir_follows_env(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("AUTOTUNE_CACHE_DIR", str(tmp_path))
    assert default_cache_dir() == tmp_path
    monkeypatch.delenv("AUTOTUNE_CACHE_DIR")
    assert default_cache_dir().parts[-2:] == (".cache", "autotune")


def test_same_source_is_compiled_once_per_process() -> None:
    func, _ = padded_conv(height=4, width=4)
    first = build(func)
    first.compile()
    start = time.perf_counter()
    second = build(func)
    seconds = second.compile()
    assert time.perf_counter() - start < 0.5
    assert second.dispatcher is first.dispatcher
    assert len(second.dispatcher.overloads) == 1
    assert seconds < 0.05
    assert second.storage[0] is not first.storage[0]  # each kernel has its own storage


def test_compile_does_not_run_the_kernel() -> None:
    func, _ = pool_chain(height=7, width=7, channels=1)
    kernel = build(func)
    out = np.full(func.outputs[0].const_shape(), np.nan, np.float32)
    kernel.compile(np.zeros(func.inputs[0].const_shape(), np.float32), out)
    assert np.isnan(out).all()


def test_wrong_arguments_raise_codegen_error() -> None:
    func, _ = matmul(m=4, n=3, k=2)
    kernel = build(func)
    a, b, c = np.zeros((4, 2), np.float32), np.zeros((2, 3), np.float32), np.zeros((4, 3), np.float32)
    with pytest.raises(CodegenError, match=r"expected 3 arrays \(A, B, C\), got 2"):
        kernel(a, b)
    with pytest.raises(CodegenError, match=r"argument 1 \(B\) must be float32\[2, 3\], got float32\[3, 2\]"):
        kernel(a, b.T.copy(), c)
    with pytest.raises(CodegenError, match=r"argument 2 \(C\) must be float32\[4, 3\], got float64\[4, 3\]"):
        kernel(a, b, c.astype(np.float64))
    with pytest.raises(CodegenError, match="must be a numpy array"):
        kernel(a, b, c.tolist())
    with pytest.raises(CodegenError, match="C-contiguous"):
        kernel(np.zeros((2, 4), np.float32).T, b, c)


def test_numba_compile_failure_is_a_codegen_error() -> None:
    a, b = ir.decl_buffer("A", (4,)), ir.decl_buffer("B", (4,))
    i = ir.Var("i")
    float_index = ir.Cast("float32", i) * 0.5  # numba cannot index an array with a float
    func = ir.Func(
        "bad", (a, b), ir.For(i, ir.const(0), ir.const(4), "serial", ir.BufferStore(b, a[float_index], (i,)))
    )
    kernel = build(func)
    with pytest.raises(CodegenError) as info:
        kernel(np.zeros(4, np.float32), np.zeros(4, np.float32))
    message = str(info.value)
    assert str(kernel.path) in message and "numba failed to compile" in message
    assert "float32" in message  # numba's own explanation is kept


def test_compile_seconds_count_the_import_that_compiles_outlined_nests(tmp_path) -> None:
    """An outlined nest has an explicit signature, so numba compiles it when the kernel's module is
    imported: that import is part of the kernel's compile time, and a second build in the same
    process imports nothing."""
    from autotune import te
    from autotune.lowering import lower
    from autotune.schedule import Schedule
    from autotune.workloads import ops

    x = te.placeholder((1, 7, 7, 3), "float32", name="x")  # a shape no other test builds
    p2 = ops.max_pool2d(ops.max_pool2d(x, 3, name="p1"), 2, name="p2")
    sch = Schedule(te.create_func([x], [p2], name="outlined_import")).set_vectorizer("slp", loop="y_1")
    func = lower(sch.func).func
    kernel = build(func, cache_dir=tmp_path)
    assert "# outlined: outlined_import_y_1" in kernel.source
    assert kernel.import_seconds > 0
    run(kernel, func)
    assert kernel.compile_seconds is not None and kernel.compile_seconds >= kernel.import_seconds
    assert build(func, cache_dir=tmp_path).import_seconds == 0.0
