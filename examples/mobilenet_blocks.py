"""Write a small MobileNetV2-like ONNX model with random weights: a stem and three inverted bottlenecks.

    python examples/mobilenet_blocks.py [--size 96] [--output examples/mobilenet_blocks.onnx]

input [N,3,S,S] (N dynamic) -> stem: 3x3/2 conv 3->16, BatchNormalization, Clip(0, 6)
-> block1: depthwise 3x3, BN, Clip; 1x1 project 16->8, BN
-> block2: 1x1 expand 8->48, BN, Clip; depthwise 3x3/2, BN, Clip; 1x1 project 48->12, BN
-> block3: 1x1 expand 12->72, BN, Clip; depthwise 3x3, BN, Clip; 1x1 project 72->12, BN; Add block2
-> head: GlobalAveragePool, Flatten, Gemm 12->10.
Each node is named after its block (``block3/add``) and its output tensor too.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import onnx
from onnx import helper, numpy_helper


class Builder:
    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []

    def const(self, name: str, array: np.ndarray) -> str:
        self.inits.append(numpy_helper.from_array(np.asarray(array, dtype=np.float32), name))
        return name

    def node(self, op: str, name: str, inputs: list[str], **attrs: object) -> str:
        self.nodes.append(helper.make_node(op, inputs, [name], name=name, **attrs))
        return name

    def conv_bn(
        self, x: str, name: str, cin: int, cout: int, k: int, stride: int, depthwise: bool, relu6: bool
    ) -> str:
        shape = (cout, 1 if depthwise else cin, k, k)
        w = self.rng.uniform(-1, 1, shape) / np.sqrt(shape[1] * k * k)
        y = self.node(
            "Conv", f"{name}/conv", [x, self.const(f"{name}.w", w)], kernel_shape=[k, k],
            strides=[stride, stride], pads=[k // 2] * 4, group=cout if depthwise else 1,
        )  # fmt: skip
        params = [
            self.const(f"{name}.gamma", self.rng.uniform(0.5, 1.5, cout)),
            self.const(f"{name}.beta", self.rng.uniform(-0.2, 0.2, cout)),
            self.const(f"{name}.mean", self.rng.uniform(-0.2, 0.2, cout)),
            self.const(f"{name}.var", self.rng.uniform(0.5, 1.5, cout)),
        ]
        y = self.node("BatchNormalization", f"{name}/bn", [y, *params], epsilon=1e-5)
        if relu6:
            y = self.node(
                "Clip", f"{name}/relu6", [y, self.const(f"{name}.lo", 0.0), self.const(f"{name}.hi", 6.0)]
            )
        return y


def mobilenet_blocks(size: int, seed: int = 0) -> onnx.ModelProto:
    b = Builder(seed)
    x = b.conv_bn("input", "stem", 3, 16, 3, 2, depthwise=False, relu6=True)
    x = b.conv_bn(x, "block1/dw", 16, 16, 3, 1, depthwise=True, relu6=True)
    x = b.conv_bn(x, "block1/project", 16, 8, 1, 1, depthwise=False, relu6=False)
    x = b.conv_bn(x, "block2/expand", 8, 48, 1, 1, depthwise=False, relu6=True)
    x = b.conv_bn(x, "block2/dw", 48, 48, 3, 2, depthwise=True, relu6=True)
    skip = b.conv_bn(x, "block2/project", 48, 12, 1, 1, depthwise=False, relu6=False)
    x = b.conv_bn(skip, "block3/expand", 12, 72, 1, 1, depthwise=False, relu6=True)
    x = b.conv_bn(x, "block3/dw", 72, 72, 3, 1, depthwise=True, relu6=True)
    x = b.conv_bn(x, "block3/project", 72, 12, 1, 1, depthwise=False, relu6=False)
    x = b.node("Add", "block3/add", [x, skip])
    x = b.node("GlobalAveragePool", "head/gap", [x])
    x = b.node("Flatten", "head/flatten", [x], axis=1)
    w = b.const("head.fc.w", b.rng.uniform(-1, 1, (10, 12)) / np.sqrt(12))
    x = b.node("Gemm", "head/fc", [x, w, b.const("head.fc.b", b.rng.uniform(-0.1, 0.1, 10))], transB=1)
    inputs = [helper.make_tensor_value_info("input", onnx.TensorProto.FLOAT, ["N", 3, size, size])]
    outputs = [helper.make_tensor_value_info(x, onnx.TensorProto.FLOAT, ["N", 10])]
    graph = helper.make_graph(b.nodes, "mobilenet_blocks", inputs, outputs, b.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    return model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=96, help="input height and width (default: %(default)s)")
    parser.add_argument(
        "--seed", type=int, default=0, help="seed of the random weights (default: %(default)s)"
    )
    parser.add_argument("--output", default=str(Path(__file__).with_suffix(".onnx")), help="the model file")
    args = parser.parse_args()
    onnx.save(mobilenet_blocks(args.size, args.seed), args.output)
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
