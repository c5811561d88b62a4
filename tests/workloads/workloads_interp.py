"""A slow, literal interpreter of first-lowered functions, to check TE formulas on tiny shapes.

It runs loops in Python, evaluates float expressions in float32, evaluates a
select lazily, runs a block's init when every reduce iter var is at its first
value, and raises IndexError on any out-of-bounds access (numpy would wrap a
negative index silently).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from autotune import ir

Env = dict[ir.Var, Any]

_BINARY: dict[type, Callable[[Any, Any], Any]] = {
    ir.Add: lambda a, b: a + b,
    ir.Sub: lambda a, b: a - b,
    ir.Mul: lambda a, b: a * b,
    ir.Div: lambda a, b: a / b,
    ir.FloorDiv: lambda a, b: a // b,
    ir.FloorMod: lambda a, b: a % b,
    ir.Min: min,
    ir.Max: max,
    ir.EQ: lambda a, b: a == b,
    ir.NE: lambda a, b: a != b,
    ir.LT: lambda a, b: a < b,
    ir.LE: lambda a, b: a <= b,
    ir.GT: lambda a, b: a > b,
    ir.GE: lambda a, b: a >= b,
}


class Interpreter:
    def __init__(self, arrays: dict[ir.Buffer, np.ndarray]) -> None:
        self.arrays = arrays
        self.loads = 0

    def array(self, buffer: ir.Buffer) -> np.ndarray:
        if buffer not in self.arrays:
            self.arrays[buffer] = np.full(buffer.const_shape(), np.nan, dtype=buffer.dtype)
        return self.arrays[buffer]

    def index(self, buffer: ir.Buffer, indices: tuple[ir.Expr, ...], env: Env) -> tuple[int, ...]:
        idx = tuple(int(self.expr(i, env)) for i in indices)
        shape = buffer.const_shape()
        if any(not 0 <= i < d for i, d in zip(idx, shape)):
            raise IndexError(f"{buffer.name}{list(idx)} is outside {shape}")
        return idx

    def expr(self, e: ir.Expr, env: Env) -> Any:
        if isinstance(e, ir.IntImm):
            return bool(e.value) if e.dtype == "bool" else e.value
        if isinstance(e, ir.FloatImm):
            return np.float32(e.value)
        if isinstance(e, ir.Var):
            return env[e]
        if isinstance(e, ir.BufferLoad):
            self.loads += 1
            return self.array(e.buffer)[self.index(e.buffer, e.indices, env)]
        if isinstance(e, ir.And):
            return bool(self.expr(e.a, env)) and bool(self.expr(e.b, env))
        if isinstance(e, ir.Or):
            return bool(self.expr(e.a, env)) or bool(self.expr(e.b, env))
        if isinstance(e, ir.Not):
            return not self.expr(e.a, env)
        if isinstance(e, ir.Select):
            return self.expr(e.true_value if self.expr(e.cond, env) else e.false_value, env)
        if isinstance(e, ir.Cast):
            value = self.expr(e.value, env)
            return int(value) if e.dtype == "int32" else np.float32(value)
        if isinstance(e, ir.Call):
            assert e.op == "floor", e.op
            return np.float32(math.floor(self.expr(e.args[0], env)))
        if type(e) in _BINARY:
            return _BINARY[type(e)](self.expr(e.a, env), self.expr(e.b, env))
        raise TypeError(f"cannot evaluate {type(e).__name__}")

    def stmt(self, s: ir.Stmt, env: Env) -> None:
        if isinstance(s, ir.SeqStmt):
            for child in s.seq:
                self.stmt(child, env)
        elif isinstance(s, ir.For):
            lo, extent = self.expr(s.min, env), self.expr(s.extent, env)
            for v in range(lo, lo + extent):
                self.stmt(s.body, {**env, s.loop_var: v})
        elif isinstance(s, ir.Block):
            self.block(s, env)
        elif isinstance(s, ir.BufferStore):
            value = self.expr(s.value, env)
            self.array(s.buffer)[self.index(s.buffer, s.indices, env)] = value
        elif isinstance(s, ir.IfThenElse):
            if self.expr(s.condition, env):
                self.stmt(s.then_case, env)
            elif s.else_case is not None:
                self.stmt(s.else_case, env)
        else:
            raise TypeError(f"cannot run {type(s).__name__}")

    def block(self, b: ir.Block, env: Env) -> None:
        inner = dict(env)
        for iv, binding in zip(b.iter_vars, b.bindings):
            inner[iv.var] = self.expr(binding, env)
        if not self.expr(b.predicate, inner):
            return
        for buf in b.alloc_buffers:
            self.array(buf)
        first = all(
            inner[iv.var] == self.expr(iv.dom.min, inner) for iv in b.iter_vars if iv.kind == "reduce"
        )
        if b.init is not None and first:
            self.stmt(b.init, inner)
        self.stmt(b.body, inner)


def run(func: ir.Func, *inputs: np.ndarray) -> tuple[np.ndarray, ...]:
    """Run ``func`` on ``inputs``; returns its outputs."""
    arrays = {buf: np.asarray(a, dtype=buf.dtype) for buf, a in zip(func.inputs, inputs)}
    interp = Interpreter(arrays)
    interp.stmt(func.body, {})
    return tuple(interp.arrays[b] for b in func.outputs)
