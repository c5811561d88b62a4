"""A :class:`~.graph.Cut` converted node by node into a TE function with the operator library."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ... import ir, te
from . import layers, pointwise
from .context import Converter
from .errors import OnnxImportError
from .graph import Cut
from .values import Value

CONVERTERS: dict[str, Callable[[Converter], None]] = {
    "Add": pointwise.binary,
    "AveragePool": layers.pool,
    "BatchNormalization": lambda cx: _unfolded(cx),
    "Clip": pointwise.unary,
    "Conv": layers.conv,
    "Flatten": pointwise.layout,
    "Gemm": layers.gemm,
    "GlobalAveragePool": layers.global_average_pool,
    "HardSwish": pointwise.unary,
    "MatMul": layers.matmul,
    "MaxPool": layers.pool,
    "Mul": pointwise.binary,
    "Relu": pointwise.unary,
    "Reshape": pointwise.layout,
    "Resize": layers.resize,
    "Sigmoid": pointwise.unary,
    "Squeeze": pointwise.layout,
    "Transpose": pointwise.layout,
    "Unsqueeze": pointwise.layout,
}
SUPPORTED = tuple(sorted(CONVERTERS))
"""The ONNX operators a cut may hold (``Constant`` nodes too, as constants)."""


def _unfolded(cx: Converter) -> None:
    assert cx.node is not None
    source = cx.node.input[0]
    if source == cx.cut.start:
        whence = "the cut's input"
    else:
        producer = next(n for n in cx.cut.nodes if source in n.output)
        whence = f"made by node {producer.name!r} ({producer.op_type})"
    raise cx.error(
        f"folded only into a Conv before it whose output nothing else reads; it reads {source!r}, {whence}"
    )


@dataclass(frozen=True)
class Converted:
    """The chain: its function (inputs ``data`` then the weights), the weights' arrays, its flops,
    and its output's ONNX shape, physical order and value on the converted input."""

    func: ir.Func
    weights: tuple[np.ndarray, ...]
    flops: int
    output: Value
    input_dims: tuple[int, ...]
    input_order: tuple[int, ...]


def _check_float(cut: Cut) -> None:
    for node in cut.nodes:
        for name in node.input:
            if (
                name in cut.constants
                and cut.constants[name].dtype.kind == "f"
                and cut.constants[name].dtype != np.float32
            ):
                raise OnnxImportError(
                    "onnx",
                    f"constant {name!r} of node {node.name!r} is {cut.constants[name].dtype}; only float32 models are supported",
                )


def convert(cut: Cut, data: np.ndarray, name: str) -> Converted:
    """Convert ``cut``, evaluating the chain with the numpy references on ``data`` (ONNX layout).

    Raises OnnxImportError naming the first node that cannot be converted and why.
    """
    _check_float(cut)
    cx = Converter(cut, data)
    for node in cut.nodes:
        if id(node) in cx.skip:
            continue
        cx.node = node
        converter = CONVERTERS.get(node.op_type)
        if converter is None or node.domain not in ("", "ai.onnx"):
            raise OnnxImportError(
                "onnx",
                f"node {node.name!r} has op type {node.op_type}, which is not supported; "
                f"supported: {', '.join(SUPPORTED)}",
            )
        converter(cx)
    out = cx.values[cut.end]
    if out.tensor is cx.data and not out.pending:
        raise OnnxImportError(
            "to", f"the cut from {cut.start!r} to {cut.end!r} computes nothing (only layout changes)"
        )
    out = cx.materialize(out)
    read = {id(t) for t in te.topo_order([out.tensor])}
    weights = [(t, a) for t, a in cx.weights if id(t) in read]
    inputs = [cx.data, *(t for t, _ in weights)]
    func = te.create_func(inputs=inputs, outputs=[out.tensor], name=name)
    start = cx.values[cut.start]
    return Converted(func, tuple(a for _, a in weights), cx.flops, out, start.dims, start.order)
