"""Small lowered functions for measurement tests, written directly as lowered IR."""

from __future__ import annotations

import numpy as np

from autotune import ir

N = 64


def _loop(var: ir.Var, extent: int, body: ir.Stmt, kind: ir.ForKind = ir.ForKind.SERIAL) -> ir.Stmt:
    return ir.For(var, ir.const(0), ir.const(extent), kind, body)


def axpy(n: int = N, skip_last: bool = False, offset: float = 1.0, parallel: bool = False) -> ir.Func:
    """``B[i] = A[i] * 2 + offset`` through an intermediate ``T``; ``skip_last`` leaves B[n-1] unwritten.

    ``parallel`` makes both loops parallel (``numba.prange``).
    """
    a, b, t = ir.decl_buffer("A", (n,)), ir.decl_buffer("B", (n,)), ir.decl_buffer("T", (n,))
    i, j = ir.Var("i"), ir.Var("j")
    kind = ir.ForKind.PARALLEL if parallel else ir.ForKind.SERIAL
    fill = _loop(i, n, ir.BufferStore(t, a[i] * 2.0, (i,)), kind)
    use = _loop(j, n - 1 if skip_last else n, ir.BufferStore(b, t[j] + offset, (j,)), kind)
    body = ir.Allocate(t.data, "float32", (ir.const(n),), ir.DeclBuffer(t, ir.seq(fill, use)))
    return ir.Func("axpy", (a, b), body)


def axpy_reference(x: np.ndarray) -> tuple[np.ndarray, ...]:
    return ((x * 2 + 1).astype(np.float32),)


def does_not_compile(n: int = N) -> ir.Func:
    """Indexes with a float: valid Python, rejected by numba's type inference."""
    a, b = ir.decl_buffer("A", (n,)), ir.decl_buffer("B", (n,))
    i = ir.Var("i")
    return ir.Func("bad", (a, b), _loop(i, n, ir.BufferStore(b, a[ir.Cast("float32", i) * 0.5], (i,))))


def segfaults(n: int = N) -> ir.Func:
    """Writes 2**40 elements past a small output: numba does no bounds checks, the process dies."""
    a, b = ir.decl_buffer("A", (n,)), ir.decl_buffer("B", (n,))
    i = ir.Var("i")
    far = ir.IntImm(1 << 40, "int64")
    return ir.Func("segv", (a, b), _loop(i, n, ir.BufferStore(b, a[i], (i * far,))))


def never_ends(n: int = N) -> ir.Func:
    """A loop of 2**50 dependent read-modify-writes: runs for days."""
    a, b = ir.decl_buffer("A", (n,)), ir.decl_buffer("B", (n,))
    i = ir.Var("i")
    step = ir.BufferStore(b, b[i % n] + a[i % n], (i % n,))
    return ir.Func(
        "forever", (a, b), ir.For(i, ir.const(0), ir.IntImm(1 << 50, "int64"), ir.ForKind.SERIAL, step)
    )
