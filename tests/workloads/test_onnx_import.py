"""ONNX cuts converted to chains: every supported operator against onnx's ReferenceEvaluator, and the
refusals (an unsupported node, a cut that is not one chain, layouts that need a copy).

Each model is built in memory with ``onnx.helper`` and written to a temporary file. The converted
TE function runs in the tests' interpreter (nothing is compiled) on the workload's seeded inputs and
is compared with the model run by ``onnx.reference.ReferenceEvaluator``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from test_onnx_ops import interpret

from autotune.workloads import Workload

onnx = pytest.importorskip("onnx")
from onnx import helper, numpy_helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

from autotune.workloads.onnx_import import OnnxImportError, build  # noqa: E402
from autotune.workloads.onnx_import.convert import SUPPORTED  # noqa: E402

RNG = np.random.default_rng(3)


def weight(*shape: int, low: float = -1.0, high: float = 1.0) -> np.ndarray:
    return RNG.uniform(low, high, shape).astype(np.float32)


def make_model(nodes: list[Any], inits: dict[str, np.ndarray], in_shape: list[Any], opset: int = 17) -> Any:
    graph = helper.make_graph(
        nodes,
        "test",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, in_shape)],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)],
        [numpy_helper.from_array(a, n) for n, a in inits.items()],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def node(op: str, inputs: list[str], output: str, **attrs: Any) -> Any:
    return helper.make_node(op, inputs, [output], name=f"{output}_node", **attrs)


def save(tmp_path: Path, model: Any, name: str = "model.onnx") -> Path:
    path = tmp_path / name
    onnx.save(model, str(path))
    return path


def check_against_model(model: Any, wl: Workload, order: tuple[int, ...]) -> None:
    """The interpreted chain equals the model run by the ReferenceEvaluator on the same input."""
    inputs = wl.make_inputs(1)
    got = interpret(wl.func, *inputs)
    x = inputs[0].transpose(0, 3, 1, 2) if inputs[0].ndim == 4 else inputs[0]
    (want,) = ReferenceEvaluator(model).run(None, {"x": np.ascontiguousarray(x)})
    want = np.asarray(want).transpose(order).reshape(got.shape)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=2e-5)


def bn(name: str, channels: int) -> tuple[list[str], dict[str, np.ndarray]]:
    params = {
        f"{name}_g": weight(channels, low=0.5, high=1.5),
        f"{name}_b": weight(channels, low=-0.2, high=0.2),
        f"{name}_m": weight(channels, low=-0.2, high=0.2),
        f"{name}_v": weight(channels, low=0.5, high=1.5),
    }
    return list(params), params


def conv_bias_relu() -> tuple[list[Any], dict[str, np.ndarray], list[int]]:
    inits = {"w": weight(5, 3, 3, 3, low=-0.3, high=0.3), "b": weight(5)}
    nodes = [
        node("Conv", ["x", "w", "b"], "c", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
        node("Relu", ["c"], "y"),
    ]
    return nodes, inits, ["N", 3, 7, 6]


def conv_dilated_asymmetric() -> tuple[list[Any], dict[str, np.ndarray], list[int]]:
    inits = {"w": weight(4, 2, 3, 3, low=-0.3, high=0.3), "w2": weight(3, 4, 3, 3, low=-0.3, high=0.3)}
    nodes = [
        node("Conv", ["x", "w"], "c", kernel_shape=[3, 3], dilations=[2, 2], pads=[2, 2, 2, 2]),
        node("Conv", ["c", "w2"], "y", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 0, 0]),
    ]
    return nodes, inits, [1, 2, 8, 8]


def depthwise_bn_relu6_project() -> tuple[list[Any], dict[str, np.ndarray], list[int]]:
    names, inits = bn("bn", 4)
    inits |= {"w": weight(4, 1, 3, 3), "lo": np.float32(0.0), "hi": np.float32(6.0), "p": weight(2, 4, 1, 1)}
    nodes = [
        node("Conv", ["x", "w"], "c", kernel_shape=[3, 3], pads=[1, 1, 1, 1], group=4),
        node("BatchNormalization", ["c", *names], "n"),
        node("Clip", ["n", "lo", "hi"], "r"),
        node("Conv", ["r", "p"], "y", kernel_shape=[1, 1]),
    ]
    return nodes, inits, [1, 4, 5, 6]


def pools() -> tuple[list[Any], dict[str, np.ndarray], list[int]]:
    inits = {"w": weight(3, 3, 1, 1), "b": weight(3)}
    nodes = [
        node("Conv", ["x", "w", "b"], "c", kernel_shape=[1, 1]),
        node("Relu", ["c"], "r"),
        node("MaxPool", ["r"], "m", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
        node("AveragePool", ["m"], "y", kernel_shape=[2, 2], strides=[1, 1]),
    ]
    return nodes, inits, [1, 3, 7, 7]


def head_gap_flatten_gemm() -> tuple[list[Any], dict[str, np.ndarray], list[int]]:
    inits = {"w": weight(3, 4, 1, 1), "fc": weight(5, 3), "fcb": weight(5)}
    nodes = [
        node("Conv", ["x", "w"], "c", kernel_shape=[1, 1]),
        node("GlobalAveragePool", ["c"], "g"),
        node("Flatten", ["g"], "f", axis=1),
        node("Gemm", ["f", "fc", "fcb"], "y", transB=1, alpha=0.5),
    ]
    return nodes, inits, [1, 4, 3, 4]


def matmul_add_sigmoid() -> tuple[list[Any], dict[str, np.ndarray], list[int]]:
    inits = {"w": weight(6, 4), "b": weight(4)}
    nodes = [node("MatMul", ["x", "w"], "m"), node("Add", ["m", "b"], "a"), node("Sigmoid", ["a"], "y")]
    return nodes, inits, [2, 6]


def squeeze_excite_hardswish() -> tuple[list[Any], dict[str, np.ndarray], list[int]]:
    inits = {"w": weight(4, 3, 1, 1), "s": np.float32(1.5)}
    nodes = [
        node("Conv", ["x", "w"], "c", kernel_shape=[1, 1]),
        node("HardSwish", ["c"], "h"),
        node("GlobalAveragePool", ["h"], "g"),
        node("Sigmoid", ["g"], "sg"),
        node("Mul", ["h", "sg"], "m"),
        node("Mul", ["m", "s"], "y"),
    ]
    return nodes, inits, [1, 3, 4, 5]


def residual_add_constant() -> tuple[list[Any], dict[str, np.ndarray], list[int]]:
    inits = {"w": weight(3, 3, 3, 3, low=-0.3, high=0.3), "k": weight(1, 3, 1, 1), "k2": weight(1, 3, 4, 1)}
    nodes = [
        node("Conv", ["x", "w"], "c", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        node("Add", ["c", "k"], "ck"),
        node("Relu", ["ck"], "r"),
        node("Add", ["r", "x"], "a"),
        node("Add", ["a", "k2"], "y"),
    ]
    return nodes, inits, [1, 3, 4, 5]


def resize_nearest_and_linear() -> tuple[list[Any], dict[str, np.ndarray], list[int]]:
    inits = {"w": weight(2, 2, 1, 1), "b": weight(2), "s": np.array([1, 1, 2, 2], np.float32)}
    nodes = [
        node("Conv", ["x", "w", "b"], "c", kernel_shape=[1, 1]),
        node("Relu", ["c"], "r"),
        node("Resize", ["r", "", "s"], "u", mode="nearest", coordinate_transformation_mode="asymmetric",
             nearest_mode="floor"),
        node("Resize", ["u", "", "s"], "y", mode="linear"),
    ]  # fmt: skip
    return nodes, inits, [1, 2, 3, 4]


def transpose_to_nhwc() -> tuple[list[Any], dict[str, np.ndarray], list[int]]:
    inits = {"w": weight(3, 2, 1, 1)}
    nodes = [
        node("Conv", ["x", "w"], "c", kernel_shape=[1, 1]),
        node("Transpose", ["c"], "y", perm=[0, 2, 3, 1]),
    ]
    return nodes, inits, [1, 2, 3, 4]


CASES = {
    f.__name__: f
    for f in (
        conv_bias_relu,
        conv_dilated_asymmetric,
        depthwise_bn_relu6_project,
        pools,
        head_gap_flatten_gemm,
        matmul_add_sigmoid,
        squeeze_excite_hardswish,
        residual_add_constant,
        resize_nearest_and_linear,
        transpose_to_nhwc,
    )
}
ORDERS = {"matmul_add_sigmoid": (0, 1), "head_gap_flatten_gemm": (0, 1), "transpose_to_nhwc": (0, 1, 2, 3)}


@pytest.mark.parametrize("case", list(CASES))
def test_each_operator_matches_the_reference_evaluator(tmp_path: Path, case: str) -> None:
    nodes, inits, shape = CASES[case]()
    model = make_model(nodes, inits, shape)
    wl = build(save(tmp_path, model))
    check_against_model(model, wl, ORDERS.get(case, (0, 2, 3, 1)))


def test_the_chain_has_the_model_weights_and_folds_batchnorm(tmp_path: Path) -> None:
    nodes, inits, shape = depthwise_bn_relu6_project()
    wl = build(save(tmp_path, make_model(nodes, inits, shape)))
    assert [b.name for b in wl.func.inputs] == ["data", "w_dw1", "b_dw1", "w_conv1"]
    assert [b.name for b in wl.func.outputs] == ["conv1"]
    scale = inits["bn_g"] / np.sqrt(inits["bn_v"] + 1e-5)
    _, w_dw, b_dw, w_pw = wl.make_inputs(0)
    np.testing.assert_allclose(w_dw, (inits["w"][:, 0] * scale[:, None, None]).transpose(1, 2, 0), rtol=1e-6)
    np.testing.assert_allclose(b_dw, inits["bn_b"] - inits["bn_m"] * scale, rtol=1e-6)
    np.testing.assert_array_equal(w_pw, inits["p"].transpose(2, 3, 1, 0))
    assert wl.params == {"batch": 1}
    assert wl.flops == 2 * 5 * 6 * 4 * 9 + 5 * 6 * 4 + 5 * 6 * 4 + 2 * 5 * 6 * 2 * 4


def test_a_dynamic_batch_takes_the_given_value(tmp_path: Path) -> None:
    nodes, inits, shape = conv_bias_relu()
    path = save(tmp_path, make_model(nodes, inits, shape))
    assert build(path, batch=2).func.inputs[0].const_shape() == (2, 7, 6, 3)
    with pytest.raises(OnnxImportError, match=r"input 'x' has a fixed batch of 1, not 2"):
        build(save(tmp_path, make_model(*transpose_to_nhwc()), "fixed.onnx"), batch=2)


def test_the_reference_refuses_other_weights(tmp_path: Path) -> None:
    nodes, inits, shape = conv_bias_relu()
    wl = build(save(tmp_path, make_model(nodes, inits, shape)))
    data, w, b = wl.make_inputs(0)
    with pytest.raises(ValueError, match="weight 'w_conv1' is not the model's"):
        wl.reference(data, w * 2, b)


def refusal(
    tmp_path: Path, nodes: list[Any], inits: dict[str, np.ndarray], shape: list[Any], **cut: Any
) -> str:
    with pytest.raises(OnnxImportError) as info:
        build(save(tmp_path, make_model(nodes, inits, shape)), **cut)
    return str(info.value)


def test_an_unsupported_node_is_named_with_the_supported_list(tmp_path: Path) -> None:
    nodes = [node("Relu", ["x"], "r"), node("LeakyRelu", ["r"], "y")]
    assert refusal(tmp_path, nodes, {}, [1, 2, 3, 3]) == (
        "node 'y_node' has op type LeakyRelu, which is not supported; supported: " + ", ".join(SUPPORTED)
    )
    assert "Conv" in SUPPORTED and "HardSwish" in SUPPORTED and "Resize" in SUPPORTED


REFUSED_NODES = {
    "a grouped conv": (
        [node("Conv", ["x", "w"], "y", kernel_shape=[1, 1], group=2)],
        {"w": weight(4, 2, 1, 1)},
        "node 'y_node' (Conv): group 2 with 4 input and 4 output channels: only 1 or depthwise",
    ),
    "padding the library cannot give": (
        [node("Conv", ["x", "w"], "y", kernel_shape=[3, 3], pads=[0, 0, 2, 2])],
        {"w": weight(2, 4, 3, 3)},
        "node 'y_node' (Conv): padding [0, 0, 2, 2] gives 5 outputs on axis 2; padding both sides by 0 "
        "gives 3 (only such padding is supported)",
    ),
    "a flatten that moves data": (
        [node("Relu", ["x"], "r"), node("Flatten", ["r"], "y", axis=1)],
        {},
        "node 'y_node' (Flatten): changes (1, 4, 5, 5) to (1, 100), which moves the data of a tensor held "
        "as (1, 5, 5, 4) (order (0, 2, 3, 1)); only layout changes the chain already holds are supported",
    ),
    "an unfolded batchnorm": (
        [node("Relu", ["x"], "r"), node("BatchNormalization", ["r", *bn("bn", 4)[0]], "y")],
        bn("bn", 4)[1],
        "node 'y_node' (BatchNormalization): folded only into a Conv before it whose output nothing else "
        "reads; it reads 'r', made by node 'r_node' (Relu)",
    ),
    "a constant that broadcasts the tensor": (
        [node("GlobalAveragePool", ["x"], "g"), node("Add", ["g", "k"], "y")],
        {"k": weight(1, 4, 5, 5)},
        "node 'y_node' (Add): the constant operand broadcasts (1, 4, 1, 1) to (1, 4, 5, 5); only the "
        "tensor's shape is supported",
    ),
    "average pooling without the padding": (
        [node("AveragePool", ["x"], "y", kernel_shape=[3, 3], pads=[1, 1, 1, 1])],
        {},
        "node 'y_node' (AveragePool): padding with count_include_pad=0 is not supported "
        "(the library counts the padding)",
    ),
}


@pytest.mark.parametrize("case", list(REFUSED_NODES))
def test_a_node_that_cannot_be_converted_is_refused(tmp_path: Path, case: str) -> None:
    nodes, inits, message = REFUSED_NODES[case]
    assert refusal(tmp_path, nodes, inits, [1, 4, 5, 5]) == message


def branchy() -> tuple[list[Any], dict[str, np.ndarray], list[int]]:
    """x -> a (relu) -> b (sigmoid) -> y = a + b: ``a`` is read by two nodes."""
    nodes = [node("Relu", ["x"], "a"), node("Sigmoid", ["a"], "b"), node("Add", ["a", "b"], "y")]
    return nodes, {}, [1, 2, 3, 3]


CUTS = {
    "an inner tensor read outside": (
        {"start": "x", "end": "b"},
        "to",
        "'a' is also read by node 'y_node' (Add) outside the cut: the cut must have one output, 'b'",
    ),
    "a second input": (
        {"start": "b", "end": "y"},
        "from",
        "'y' also depends on the model input 'x': the cut from 'b' is not one chain",
    ),
    "an unknown name": ({"start": "q"}, "from", "no tensor or node named 'q' in the model"),
    "nothing between": ({"start": "a", "end": "a"}, "to", "nothing is computed from 'a' to 'a'"),
}


@pytest.mark.parametrize("case", list(CUTS))
def test_a_cut_that_is_not_one_chain_is_refused_with_the_reason(tmp_path: Path, case: str) -> None:
    cut, field, message = CUTS[case]
    with pytest.raises(OnnxImportError) as info:
        build(save(tmp_path, make_model(*branchy())), **cut)
    assert (info.value.field, str(info.value)) == (field, message)


def test_a_node_name_cuts_before_or_after_that_node(tmp_path: Path) -> None:
    path = save(tmp_path, make_model(*branchy()))
    wl = build(path, start="b_node", end="y_node")  # from b's input (a), through y
    assert wl.description.startswith("ONNX cut 'a' -> 'y' (1 Sigmoid, 1 Add)")
    check = build(path, start="a", end="y")
    assert str(check.func) == str(wl.func)
