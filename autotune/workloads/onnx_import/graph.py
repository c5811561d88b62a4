"""An ONNX model cut between two tensors: its nodes in order, its constants, and the cut as a model.

``from`` and ``to`` name a tensor or a node. A node as ``from`` stands for its first input that
is not a constant (the node is in the cut), a node as ``to`` for its first output. The cut is the
nodes that ``to`` depends on without going through ``from``; it must read nothing but ``from``
and constants (initializers, ``Constant`` nodes), and nothing outside it may read a tensor it
computes, other than ``to``: the cut is then one chain with one input and one output.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper, shape_inference

from .errors import OnnxImportError


@dataclass(frozen=True)
class Cut:
    """The nodes between ``start`` and ``end`` in graph order, with every shape fixed by the batch."""

    model: onnx.ModelProto
    """The whole model, its inputs' batch set and its shapes inferred."""
    start: str
    end: str
    nodes: tuple[onnx.NodeProto, ...]
    """The cut's computing nodes (not its ``Constant`` nodes), in graph order."""
    constants: dict[str, np.ndarray]
    """Every initializer and ``Constant`` output the cut reads, by tensor name."""
    shapes: dict[str, tuple[int, ...]]
    """The inferred shape of every tensor of the cut."""
    readers: dict[str, tuple[str, ...]]
    """The nodes of the cut that read each tensor."""

    def submodel(self) -> onnx.ModelProto:
        """The cut as a model of its own: input ``start``, output ``end``, the constants as initializers."""
        inputs = [helper.make_tensor_value_info(self.start, onnx.TensorProto.FLOAT, self.shapes[self.start])]
        outputs = [helper.make_tensor_value_info(self.end, onnx.TensorProto.FLOAT, self.shapes[self.end])]
        inits = [numpy_helper.from_array(a, name) for name, a in self.constants.items()]
        graph = helper.make_graph(list(self.nodes), "cut", inputs, outputs, inits)
        return helper.make_model(
            graph, opset_imports=list(self.model.opset_import), ir_version=self.model.ir_version
        )


def load_model(path: Path) -> onnx.ModelProto:
    """Read an ONNX file; a file that is not a model is an :class:`OnnxImportError` naming it."""
    try:
        return onnx.load(str(path))
    except Exception as err:  # onnx raises DecodeError and others for a file that is not a model
        raise OnnxImportError("onnx", f"{path} is not an ONNX model ({type(err).__name__}: {err})") from err


def _constant_names(model: onnx.ModelProto) -> set[str]:
    return {i.name for i in model.graph.initializer}


def fix_batch(model: onnx.ModelProto, batch: int | None) -> onnx.ModelProto:
    """A copy of ``model`` whose data inputs have batch ``batch`` (a dynamic batch becomes 1 without
    one), with every tensor's shape inferred."""
    model = onnx.ModelProto.FromString(model.SerializeToString())
    inits = _constant_names(model)
    for value in model.graph.input:
        if value.name in inits or not value.type.tensor_type.HasField("shape"):
            continue
        dims = value.type.tensor_type.shape.dim
        if not dims:
            continue
        first = dims[0]
        if first.HasField("dim_value") and first.dim_value > 0:
            if batch is not None and first.dim_value != batch:
                raise OnnxImportError(
                    "batch", f"input {value.name!r} has a fixed batch of {first.dim_value}, not {batch}"
                )
            continue
        first.Clear()
        first.dim_value = 1 if batch is None else batch
    try:
        return shape_inference.infer_shapes(model, strict_mode=True, data_prop=True)
    except Exception as err:  # onnx.shape_inference.InferenceError and checker errors
        raise OnnxImportError("onnx", f"shape inference failed: {err}") from err


def _shapes(model: onnx.ModelProto) -> dict[str, tuple[int, ...]]:
    shapes: dict[str, tuple[int, ...]] = {}
    graph = model.graph
    for value in (*graph.input, *graph.value_info, *graph.output):
        tensor = value.type.tensor_type
        if not tensor.HasField("shape"):
            continue
        dims = tensor.shape.dim
        if all(d.HasField("dim_value") for d in dims):
            shapes[value.name] = tuple(int(d.dim_value) for d in dims)
    for init in graph.initializer:
        shapes[init.name] = tuple(init.dims)
    return shapes


def _constant_value(node: onnx.NodeProto) -> np.ndarray:
    attr = node.attribute[0]
    value = helper.get_attribute_value(attr)
    if attr.name == "value":
        return numpy_helper.to_array(value)
    return np.asarray(value, dtype=np.float32 if attr.name.startswith("value_float") else np.int64)


def resolve(model: onnx.ModelProto, name: str, field: str) -> str:
    """The tensor that ``from``/``to`` = ``name`` stands for (see the module docstring)."""
    graph = model.graph
    tensors = {i.name for i in graph.input} | {o for n in graph.node for o in n.output}
    if name in tensors:
        return name
    consts = _constant_names(model) | {n.output[0] for n in graph.node if n.op_type == "Constant"}
    for node in graph.node:
        if node.name == name:
            if field == "to":
                return node.output[0]
            data = [i for i in node.input if i and i not in consts]
            if data:
                return data[0]
            raise OnnxImportError(
                field, f"node {name!r} ({node.op_type}) reads no tensor that is not a constant"
            )
    raise OnnxImportError(field, f"no tensor or node named {name!r} in the model")


def _default(model: onnx.ModelProto, field: str) -> str:
    inits = _constant_names(model)
    values = (
        [v.name for v in model.graph.input if v.name not in inits]
        if field == "from"
        else [v.name for v in model.graph.output]
    )
    if len(values) != 1:
        kind = "inputs" if field == "from" else "outputs"
        raise OnnxImportError(field, f"the model has {len(values)} {kind} ({', '.join(values)}): name one")
    return values[0]


def cut(model: onnx.ModelProto, start: str | None, end: str | None) -> Cut:
    """The chain from ``start`` to ``end`` (the model's only input and output when None)."""
    start = resolve(model, start, "from") if start else _default(model, "from")
    end = resolve(model, end, "to") if end else _default(model, "to")
    graph = model.graph
    producer = {o: n for n in graph.node for o in n.output}
    inits = {i.name: numpy_helper.to_array(i) for i in graph.initializer}
    taken: set[int] = set()
    constants: dict[str, np.ndarray] = {}
    stack, seen = [end], {start}
    while stack:
        tensor = stack.pop()
        if tensor in seen or not tensor:
            continue
        seen.add(tensor)
        if tensor in inits:
            constants[tensor] = inits[tensor]
            continue
        node = producer.get(tensor)
        if node is None:
            raise OnnxImportError(
                "from",
                f"{end!r} also depends on the model input {tensor!r}: the cut from {start!r} is not one chain",
            )
        if node.op_type == "Constant":
            constants[tensor] = _constant_value(node)
            continue
        taken.add(id(node))
        stack.extend(node.input)
    if start == end or not taken:
        raise OnnxImportError("to", f"nothing is computed from {start!r} to {end!r}")
    nodes = tuple(n for n in graph.node if id(n) in taken)
    if not any(start in n.input for n in nodes):
        raise OnnxImportError("from", f"{end!r} does not depend on {start!r}")
    _check_no_escape(graph, nodes, end)
    readers: dict[str, list[str]] = {}
    for n in nodes:
        for i in n.input:
            readers.setdefault(i, []).append(n.name)
    shapes = _shapes(model)
    for n in nodes:
        for t in (*n.input, *n.output):
            if t and t not in shapes and t not in constants:
                raise OnnxImportError(
                    "onnx", f"the shape of {t!r} (node {n.name!r}) is not known after shape inference"
                )
    return Cut(model, start, end, nodes, constants, shapes, {k: tuple(v) for k, v in readers.items()})


def _check_no_escape(graph: Any, nodes: tuple[onnx.NodeProto, ...], end: str) -> None:
    """Refuse a cut whose tensors (but ``end``) are read outside it or are model outputs."""
    inside = {id(n) for n in nodes}
    made = {o for n in nodes for o in n.output if o != end}
    outputs = {o.name for o in graph.output}
    for tensor in sorted(made & outputs):
        raise OnnxImportError("to", f"{tensor!r} is a model output computed inside the cut, not only {end!r}")
    for node in graph.node:
        if id(node) in inside:
            continue
        for tensor in node.input:
            if tensor in made:
                raise OnnxImportError(
                    "to",
                    f"{tensor!r} is also read by node {node.name!r} ({node.op_type}) outside the cut: "
                    f"the cut must have one output, {end!r}",
                )
