"""The state of one conversion: the values made so far, the weights, the stage names, the flops."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
from onnx import helper

from ... import ir, te
from .. import ops
from .errors import OnnxImportError
from .graph import Cut
from .values import Value, physical_order, to_physical


class Converter:
    """Turns the nodes of a :class:`~.graph.Cut` into TE stages, one node at a time.

    ``weights`` are the placeholders made from the model's constants with their arrays (the
    chain's inputs after ``data``); ``values`` maps each ONNX tensor converted so far to its
    :class:`~.values.Value`.
    """

    def __init__(self, cut: Cut, data: np.ndarray) -> None:
        self.cut = cut
        dims = cut.shapes[cut.start]
        order = physical_order(len(dims))
        shape = tuple(dims[a] for a in order)
        self.data = te.placeholder(shape, "float32", name="data")
        self.weights: list[tuple[te.Tensor, np.ndarray]] = []
        self.values: dict[str, Value] = {
            cut.start: Value(self.data, dims, order, to_physical(data.astype(np.float32), order, shape))
        }
        self.flops = 0
        self.node: onnx.NodeProto | None = None
        self.skip: set[int] = set()
        """The nodes converted with another (a BatchNormalization folded into its Conv)."""
        self._counts: dict[str, int] = {}

    # ------------------------------------------------------------ names, weights, errors

    def name(self, kind: str) -> str:
        """``conv1``, ``conv2``...: the next stage name of a kind."""
        self._counts[kind] = self._counts.get(kind, 0) + 1
        return f"{kind}{self._counts[kind]}"

    def weight(self, name: str, array: np.ndarray) -> te.Tensor:
        """A placeholder holding ``array`` (float32), an input of the chain."""
        array = np.ascontiguousarray(array, dtype=np.float32)
        tensor = te.placeholder(array.shape, "float32", name=name)
        self.weights.append((tensor, array))
        return tensor

    def weight_array(self, tensor: te.Tensor) -> np.ndarray:
        """The array of the weight placeholder ``tensor``."""
        return next(a for t, a in self.weights if t is tensor)

    def error(self, reason: str) -> OnnxImportError:
        """The refusal of the current node, naming it and its op type."""
        assert self.node is not None
        return OnnxImportError("onnx", f"node {self.node.name!r} ({self.node.op_type}): {reason}")

    # ------------------------------------------------------------ reading the node

    def value(self, index: int = 0) -> Value:
        assert self.node is not None
        name = self.node.input[index]
        if name not in self.values:
            raise self.error(f"input {name!r} is a constant; the chain needs it computed from the input")
        return self.values[name]

    def const(self, index: int) -> np.ndarray | None:
        """The constant input ``index`` of the node, None if it is absent."""
        assert self.node is not None
        if index >= len(self.node.input) or not self.node.input[index]:
            return None
        name = self.node.input[index]
        if name not in self.cut.constants:
            raise self.error(f"input {index} ({name!r}) must be a constant (an initializer)")
        return self.cut.constants[name]

    def attrs(self) -> dict[str, Any]:
        assert self.node is not None
        return {a.name: helper.get_attribute_value(a) for a in self.node.attribute}

    def out_dims(self, index: int = 0) -> tuple[int, ...]:
        assert self.node is not None
        return self.cut.shapes[self.node.output[index]]

    def nhwc(self, value: Value) -> Value:
        """``value`` if the chain holds it as NHWC data of an NCHW tensor, else the node's refusal."""
        if len(value.dims) != 4 or value.order != (0, 2, 3, 1) or value.tensor.shape != value.view:
            raise self.error(f"expects NCHW data, got a tensor of shape {value.dims} held as {value.order}")
        return value

    def readers(self, tensor: str) -> list[onnx.NodeProto]:
        return [n for n in self.cut.nodes if tensor in n.input]

    # ------------------------------------------------------------ results

    def put(self, value: Value, index: int = 0) -> None:
        """Record ``value`` as the node's output ``index``; its shape must be the model's."""
        assert self.node is not None
        want = self.out_dims(index)
        if value.dims != want:
            raise self.error(f"the chain computes shape {value.dims}, the model {want}")
        self.values[self.node.output[index]] = value

    def materialize(self, value: Value) -> Value:
        """``value`` with its bias and activation applied by an elementwise stage (``act<k>``)."""
        if not value.pending:
            return value
        act, bias = value.act, value.bias

        def fn(x: ir.Expr, *b: ir.Expr) -> ir.Expr:
            y = x + b[0] if b else x
            return y if act is None else act(y)

        operands = [value.tensor] + ([bias] if bias is not None else [])
        out = ops.broadcast_map(fn, *operands, name=self.name("act"))
        self.flops += value.array.size * (1 + (bias is not None))
        return Value(out, value.dims, value.order, value.array)
