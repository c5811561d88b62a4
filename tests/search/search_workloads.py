"""Workloads for executor tests, loaded by path (``MeasureTask.workload_path = "<this file>:<name>"``).

Each function returns a :class:`~autotune.workloads.Workload` over a small
lowered function written directly as IR: one that is cheap and correct, one that
stores far out of bounds (numba does no bounds checks: the worker segfaults) and
one that loops for days.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from autotune import ir
from autotune.workloads import Workload

FILE = str(Path(__file__).resolve())


def _loop(var: ir.Var, extent: ir.Expr, body: ir.Stmt) -> ir.Stmt:
    return ir.For(var, ir.const(0), extent, ir.ForKind.SERIAL, body)


def _workload(func: ir.Func, n: int) -> Workload:
    def reference(x: np.ndarray) -> tuple[np.ndarray, ...]:
        return ((x * 2).astype(np.float32),)

    return Workload(func.name, {"n": n}, func, reference, func.name, n, 0, (1.0,))


def double(n: int = 64) -> Workload:
    """``B[i] = A[i] * 2``: compiles in well under a second and is correct."""
    a, b = ir.decl_buffer("A", (n,)), ir.decl_buffer("B", (n,))
    i = ir.Var("i")
    return _workload(ir.Func("double", (a, b), _loop(i, ir.const(n), ir.BufferStore(b, a[i] * 2.0, (i,)))), n)


def segfault(n: int = 64) -> Workload:
    """Stores ``B[i * 2**40]``: the first store past ``i = 0`` lands in unmapped memory."""
    a, b = ir.decl_buffer("A", (n,)), ir.decl_buffer("B", (n,))
    i = ir.Var("i")
    far = ir.IntImm(1 << 40, "int64")
    return _workload(ir.Func("segv", (a, b), _loop(i, ir.const(n), ir.BufferStore(b, a[i], (i * far,)))), n)


def hang(n: int = 64) -> Workload:
    """2**50 dependent read-modify-writes: runs for days."""
    a, b = ir.decl_buffer("A", (n,)), ir.decl_buffer("B", (n,))
    i = ir.Var("i")
    step = ir.BufferStore(b, b[i % n] + a[i % n], (i % n,))
    return _workload(ir.Func("forever", (a, b), _loop(i, ir.IntImm(1 << 50, "int64"), step)), n)
