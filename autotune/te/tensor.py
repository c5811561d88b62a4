"""Tensor expressions: how a workload is written (TVM's TE ``placeholder``/``compute``).

A :class:`Tensor` names a buffer and the operation that produces it. Indexing a
tensor gives an IR load, so compute bodies are ordinary IR expressions::

    A = placeholder((1, 132, 132, 64), "float32", name="A")
    rh, rw = reduce_axis((0, 3), "rh"), reduce_axis((0, 3), "rw")
    B = compute((1, 130, 130, 64), lambda n, h, w, c: max(A[n, h + rh, w + rw, c], axis=[rh, rw]), name="B")
"""

from __future__ import annotations

import inspect
import math
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from .. import ir
from ..ir import Expr, ExprLike, Var

REDUCERS = ("sum", "max", "min")


@dataclass(frozen=True, slots=True, eq=False)
class ReduceAxis(Var):
    """A reduction variable with its domain ``[lo, lo + extent)``."""

    lo: int = 0
    extent: int = 1


@dataclass(frozen=True, slots=True)
class Reduce(Expr):
    """``combiner`` (sum, max or min) of ``source`` over ``axes``; only at the top of a compute body."""

    combiner: str
    source: Expr
    axes: tuple[ReduceAxis, ...]

    @property
    def dtype(self) -> str:  # type: ignore[override]
        return self.source.dtype


@dataclass(frozen=True, eq=False)
class Tensor:
    """A placeholder (``body is None``) or the output of a compute stage."""

    buffer: ir.Buffer
    axes: tuple[Var, ...] = ()
    body: Expr | None = None
    inputs: tuple[Tensor, ...] = field(default=())

    @property
    def name(self) -> str:
        return self.buffer.name

    @property
    def shape(self) -> tuple[int, ...]:
        return self.buffer.const_shape()

    @property
    def dtype(self) -> str:
        return self.buffer.dtype

    @property
    def ndim(self) -> int:
        return self.buffer.ndim

    @property
    def is_placeholder(self) -> bool:
        return self.body is None

    def __getitem__(self, indices: ExprLike | tuple[ExprLike, ...]) -> Expr:
        if not isinstance(indices, tuple):
            indices = (indices,)
        if len(indices) != self.ndim:
            raise ValueError(f"tensor {self.name} has {self.ndim} dimensions, indexed with {len(indices)}")
        return ir.BufferLoad(self.buffer, tuple(ir.const(i) for i in indices))

    def __repr__(self) -> str:
        return f"Tensor({self.name!r}, {self.shape}, {self.dtype!r})"


def placeholder(shape: Sequence[int], dtype: str = "float32", name: str = "placeholder") -> Tensor:
    """An input tensor."""
    _check_shape(shape, name)
    return _register(Tensor(ir.decl_buffer(name, tuple(shape), dtype)))


def reduce_axis(dom: tuple[int, int], name: str = "k") -> ReduceAxis:
    """A reduction axis over ``[dom[0], dom[1])``."""
    lo, hi = dom
    if hi <= lo:
        raise ValueError(f"reduce_axis {name}: empty domain [{lo}, {hi})")
    return ReduceAxis(name, ir.INT, lo, hi - lo)


def _reduce(combiner: str, source: ExprLike, axis: ReduceAxis | Sequence[ReduceAxis]) -> Reduce:
    axes = (axis,) if isinstance(axis, ReduceAxis) else tuple(axis)
    if not axes or not all(isinstance(a, ReduceAxis) for a in axes):
        raise ValueError(f"te.{combiner}: axis must be one or more reduce_axis")
    return Reduce(combiner, ir.const(source), axes)


def sum(source: ExprLike, axis: ReduceAxis | Sequence[ReduceAxis]) -> Reduce:
    return _reduce("sum", source, axis)


def max(source: ExprLike, axis: ReduceAxis | Sequence[ReduceAxis]) -> Reduce:
    return _reduce("max", source, axis)


def min(source: ExprLike, axis: ReduceAxis | Sequence[ReduceAxis]) -> Reduce:
    return _reduce("min", source, axis)


def compute(shape: Sequence[int], fcompute: Callable[..., ExprLike], name: str = "compute") -> Tensor:
    """A tensor whose element at ``axes`` is ``fcompute(*axes)``."""
    _check_shape(shape, name)
    axes = tuple(Var(n) for n in _axis_names(fcompute, len(shape)))
    body = ir.const(fcompute(*axes))
    if not isinstance(body, Expr):
        raise TypeError(f"compute {name}: the body must be an expression, got {body!r}")
    inputs = _input_tensors(body)
    buffer = ir.decl_buffer(name, tuple(shape), body.dtype)
    return _register(Tensor(buffer, axes, body, inputs))


# Tensors are found again from their buffers when a body is walked; a tensor lives
# as long as the graph that uses it (its consumers hold it in ``inputs``).
_TENSOR_OF: weakref.WeakValueDictionary[ir.Buffer, Tensor] = weakref.WeakValueDictionary()


def _register(t: Tensor) -> Tensor:
    _TENSOR_OF[t.buffer] = t
    return t


def _input_tensors(body: Expr) -> tuple[Tensor, ...]:
    seen: dict[ir.Buffer, None] = {}
    for load in ir.collect(body, ir.BufferLoad):
        seen.setdefault(load.buffer, None)
    missing = [b.name for b in seen if b not in _TENSOR_OF]
    if missing:
        raise ValueError(f"compute reads buffers that are not tensors: {missing}")
    return tuple(_TENSOR_OF[b] for b in seen)


def _axis_names(fcompute: Callable[..., ExprLike], ndim: int) -> list[str]:
    params = list(inspect.signature(fcompute).parameters.values())
    if params and params[0].kind is inspect.Parameter.VAR_POSITIONAL:
        return [f"{params[0].name}{k}" for k in range(ndim)]
    if len(params) != ndim:
        raise ValueError(f"compute: the function takes {len(params)} indices, the shape has {ndim} dimensions")
    return [p.name for p in params]


def _check_shape(shape: Sequence[int], name: str) -> None:
    if not shape or any(not isinstance(d, int) or d <= 0 for d in shape):
        raise ValueError(f"tensor {name}: shape must be positive integers, got {tuple(shape)}")


def if_then_else(cond: Expr, then_value: ExprLike, else_value: ExprLike) -> Expr:
    """A lazy select: only the taken branch is evaluated. A number for ``else_value`` is a constant of
    the other branch's dtype: the 0.0 that pads an int8 window is the int8 0 (:func:`const`)."""
    t = ir.const(then_value)
    other = else_value if isinstance(else_value, Expr) else const(else_value, t.dtype)
    return ir.Select(cond, t, other)


def const(value: float | int, dtype: str = "float32") -> Expr:
    """``value`` as a constant of ``dtype``: ``const(0.0, "int64")`` is the integer 0, so an
    integer stage stays in integers (a float constant would send int64 values through float64)."""
    if not ir.is_float(dtype) and isinstance(value, float):
        if not value.is_integer():
            raise ValueError(f"te.const: {value} is not a value of {dtype}")
        value = int(value)
    return ir.const(value, dtype)


def int_limits(dtype: str) -> tuple[int, int]:
    """The smallest and largest value of the integer (or bool) ``dtype``: ``int8`` is ``(-128, 127)``."""
    if dtype == ir.BOOL:
        return 0, 1
    bits = 8 * ir.dtype_bytes(dtype)
    if dtype.startswith("uint"):
        return 0, 2**bits - 1
    if dtype.startswith("int"):
        return -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    raise ValueError(f"int_limits: {dtype} is not an integer type")


def max_value(dtype: str) -> Expr:
    """The largest value of ``dtype`` (``inf`` for floats): the identity of ``min``."""
    return ir.FloatImm(math.inf, dtype) if ir.is_float(dtype) else ir.IntImm(int_limits(dtype)[1], dtype)


def min_value(dtype: str) -> Expr:
    """The smallest value of ``dtype`` (``-inf`` for floats): the identity of ``max``."""
    return ir.FloatImm(-math.inf, dtype) if ir.is_float(dtype) else ir.IntImm(int_limits(dtype)[0], dtype)


cast = ir.cast
floor = ir.floor
sqrt = ir.sqrt
