"""Converters of the elementwise ONNX operators and of the layout changes.

Relu, Clip, Sigmoid and HardSwish add to a value's pending activation (no stage: the consumer
applies it as it reads). Add and Mul are one ``broadcast_map`` stage over their operands, each
with its pending bias and activation; an Add of a per-channel constant to a value without a
pending activation joins its pending bias instead. Transpose, Flatten, Reshape, Squeeze and
Unsqueeze are accepted where the chain's layout already holds the result (no stage); a change that
needs the data moved is refused.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import numpy as np

from ... import ir, te
from .. import ops
from .. import reference as ref
from ..ops import Activation
from .context import Converter
from .values import Value, per_channel, physical_constant, relabel


def _compose(first: Activation | None, then: Activation) -> Activation:
    if first is None:
        return then
    return lambda x: then(first(x))


def _clip_bounds(cx: Converter) -> tuple[float | None, float | None]:
    attrs = cx.attrs()
    lo, hi = cx.const(1), cx.const(2)
    low = float(lo) if lo is not None else attrs.get("min")
    high = float(hi) if hi is not None else attrs.get("max")
    return low, high


def _clip_expr(low: float | None, high: float | None) -> Activation:
    if (low, high) == (0.0, 6.0):
        return ops.relu6_expr
    if (low, high) == (0.0, None):
        return ops.relu_expr

    def clip(x: ir.Expr) -> ir.Expr:
        y = x if low is None else ir.max_(x, te.const(low, x.dtype))
        return y if high is None else ir.min_(y, te.const(high, x.dtype))

    return clip


def unary(cx: Converter) -> None:
    assert cx.node is not None
    x = cx.value(0)
    op = cx.node.op_type
    expr: Activation
    fn: Callable[[np.ndarray], np.ndarray]
    if op == "Relu":
        expr, fn = ops.relu_expr, ref.relu
    elif op == "Sigmoid":
        expr, fn = ops.sigmoid_expr, ref.sigmoid
    elif op == "HardSwish":
        expr, fn = ops.hardswish_expr, ref.hardswish
    else:
        low, high = _clip_bounds(cx)
        expr = _clip_expr(low, high)

        def fn(a: np.ndarray) -> np.ndarray:
            return np.clip(a, low, high).astype(np.float32)

    cx.flops += x.array.size
    cx.put(replace(x, array=fn(x.array), act=_compose(x.act, expr)))


def _operand(value: Value) -> tuple[list[ops.elementwise.Operand], Activation | None]:
    """The operands of ``value`` in a ``broadcast_map`` (its tensor seen with its ONNX shape in
    physical order, and its pending bias) and its activation."""
    operands: list[ops.elementwise.Operand] = [(value.tensor, value.view)]
    if value.bias is not None:
        operands.append(value.bias)
    return operands, value.act


def binary(cx: Converter) -> None:
    assert cx.node is not None
    op = cx.node.op_type
    names = cx.node.input
    values = [cx.values.get(n) for n in names]
    if values[0] is None and values[1] is None:
        raise cx.error("both operands are constants")
    first = values[0] if values[0] is not None else values[1]
    assert first is not None
    dims = cx.out_dims()
    if any(v is not None and (len(v.dims) != len(dims) or v.order != first.order) for v in values):
        raise cx.error("operands of different ranks or layouts are not supported")
    if values[0] is None or values[1] is None:
        const = cx.const(0 if values[0] is None else 1)
        assert const is not None
        if first.dims != dims:
            raise cx.error(
                f"the constant operand broadcasts {first.dims} to {dims}; only the tensor's shape is supported"
            )
        if op == "Add" and first.act is None:
            channel = per_channel(const, first)
            if channel is not None:
                _join_bias(cx, first, channel)
                return
    operands: list[ops.elementwise.Operand] = []
    parts: list[tuple[int, bool, Activation | None]] = []  # operand position, has bias, activation
    arrays = []
    for name, value in zip(names, values):
        if value is None:
            array = physical_constant(cx.cut.constants[name], first)
            operands.append(cx.weight(f"c_{cx.name('const')}", array))
            parts.append((len(operands) - 1, False, None))
            arrays.append(array)
            continue
        own, act = _operand(value)
        parts.append((len(operands), len(own) > 1, act))
        operands += own
        arrays.append(value.array.reshape(value.view))

    def fn(*loads: ir.Expr) -> ir.Expr:
        terms = []
        for at, has_bias, act in parts:
            term = loads[at] + loads[at + 1] if has_bias else loads[at]
            terms.append(term if act is None else act(term))
        return terms[0] + terms[1] if op == "Add" else terms[0] * terms[1]

    out = ops.broadcast_map(fn, *operands, name=cx.name(op.lower()))
    array = (arrays[0] + arrays[1]) if op == "Add" else (arrays[0] * arrays[1])
    cx.flops += int(np.prod(out.shape))
    cx.put(Value(out, dims, first.order, np.ascontiguousarray(array.reshape(out.shape), dtype=np.float32)))


def _join_bias(cx: Converter, value: Value, channel: np.ndarray) -> None:
    """``value + channel`` as a pending bias: the old bias plus ``channel`` (one new weight)."""
    old = np.zeros_like(channel) if value.bias is None else cx.weight_array(value.bias)
    bias = cx.weight(f"b_{cx.name('bias')}", (old + channel).astype(np.float32))
    cx.flops += value.array.size
    array = (value.array + channel).astype(np.float32)
    cx.put(replace(value, array=array, bias=bias))


def layout(cx: Converter) -> None:
    assert cx.node is not None
    x = cx.value(0)
    dims = cx.out_dims()
    hint = None
    if cx.node.op_type == "Transpose":
        perm = tuple(int(p) for p in cx.attrs().get("perm", tuple(reversed(range(len(x.dims))))))
        inverse = tuple(int(i) for i in np.argsort(perm))
        hint = tuple(inverse[o] for o in x.order) if len(perm) == len(x.dims) else None

        def move(a: np.ndarray) -> np.ndarray:
            return a.transpose(perm)
    else:

        def move(a: np.ndarray) -> np.ndarray:
            return a.reshape(dims)

    value = relabel(x, dims, move, hint)
    if value is None:
        raise cx.error(
            f"changes {x.dims} to {dims}, which moves the data of a tensor held as {x.tensor.shape} "
            f"(order {x.order}); only layout changes the chain already holds are supported"
        )
    cx.put(value)
