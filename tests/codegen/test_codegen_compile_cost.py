"""What keeps numba's frontend cheap on register tiles: outlined nests compiled without numba's SSA
reconstruction, and the copies of an unrolled region indexing relative to one shared local."""

from __future__ import annotations

import re
from pathlib import Path

import numba
import numpy as np

from autotune import ir
from autotune.codegen import build, generate_source
from autotune.codegen.runtime import NestCompiler


def _accumulate(a: np.ndarray) -> np.float32:
    # two accumulators assigned before the loop and in it: what numba's SSA pass rebuilds
    acc_0 = np.float32(0.0)
    acc_1 = np.float32(0.0)
    for i in range(a.size // 2):
        acc_0 = acc_0 + a[2 * i]
        acc_1 = acc_1 + a[2 * i + 1] * np.float32(2.0)
    return acc_0 - acc_1


def _passes(dispatcher: numba.core.registry.CPUDispatcher) -> list[str]:
    timings = dispatcher.get_metadata(dispatcher.signatures[0])["pipeline_times"]["nopython"]
    return [name.split("_", 1)[1] for name in timings]


def test_the_nest_pipeline_computes_the_same_without_the_ssa_pass() -> None:
    nest = numba.njit("float32(float32[::1])", pipeline_class=NestCompiler)(_accumulate)
    default = numba.njit("float32(float32[::1])")(_accumulate)
    a = np.arange(11, dtype=np.float32)
    assert nest(a) == default(a) == np.float32(a[0:10:2].sum() - 2 * a[1:10:2].sum())
    assert "reconstruct_ssa" in _passes(default)  # numba's default pipeline rebuilds SSA...
    assert "reconstruct_ssa" not in _passes(nest)  # ...the nests' does not
    assert "nopython_type_inference" in _passes(nest)


def _tile_func() -> tuple[ir.Func, ir.Buffer]:
    """``B[i*16 + j*4 + k] = A[i*16 + j*4 + k] + A[i*16 + j*4 + k + 1]``, k unrolled 0..2."""
    a, b = ir.decl_buffer("A", (64,)), ir.decl_buffer("B", (64,))
    i, j, k = (ir.Var(n) for n in "ijk")
    base = i * 16 + j * 4
    store = ir.BufferStore(b, a[base + k] + a[base + k + 1], (base + k,))
    inner = ir.For(k, ir.const(0), ir.const(3), "unroll", store)
    body = ir.For(i, ir.const(0), ir.const(4), "serial", ir.For(j, ir.const(0), ir.const(4), "serial", inner))
    return ir.Func("f", (a, b), body), a


def test_unrolled_copies_index_relative_to_one_local_and_load_each_element_once() -> None:
    func, _ = _tile_func()
    lines = [ln.strip() for ln in generate_source(func).text.splitlines()]
    body = lines[lines.index("for j in range(4):") + 1 :]
    assert body[0] == "ix = i * 16 + j * 4"  # the base, computed once for the three copies
    assert sum(ln.startswith("ix") for ln in body) == 1
    # A[base + 1] and A[base + 2] are read by two copies each and loaded once
    loads = [ln for ln in body if ln.startswith("ld")]
    assert loads == [
        "ld = A[np.uintp(ix)]",
        "ld_1 = A[np.uintp(ix + 1)]",
        "ld_2 = A[np.uintp(ix + 2)]",
        "ld_3 = A[np.uintp(ix + 3)]",
    ]
    assert "B[np.uintp(ix + 2)] = ld_2 + ld_3" in body
    # no index in the region repeats the base's arithmetic
    assert not any(re.search(r"i \* 16", ln) for ln in body[1:])


def test_a_base_of_one_operation_stays_inline() -> None:
    # `j * 4 + k`: sharing `j * 4` would cost a statement and save nothing
    a, b = ir.decl_buffer("A", (16,)), ir.decl_buffer("B", (16,))
    j, k = ir.Var("j"), ir.Var("k")
    inner = ir.For(k, ir.const(0), ir.const(2), "unroll", ir.BufferStore(b, a[j * 4 + k], (j * 4 + k,)))
    text = generate_source(ir.Func("g", (a, b), ir.For(j, ir.const(0), ir.const(4), "serial", inner))).text
    assert "ix" not in text
    assert "B[np.uintp(j * 4 + 1)] = ld_1" in text


def test_shared_indices_compute_what_inline_ones_do(tmp_path: Path) -> None:
    func, _ = _tile_func()
    kernel = build(func, cache_dir=tmp_path)
    a = np.arange(64, dtype=np.float32)
    b = np.full(64, np.nan, np.float32)
    kernel(a, b)
    want = np.full(64, np.nan, np.float32)
    for i in range(4):
        for j in range(4):
            for k in range(3):
                want[i * 16 + j * 4 + k] = a[i * 16 + j * 4 + k] + a[i * 16 + j * 4 + k + 1]
    np.testing.assert_array_equal(b, want)
