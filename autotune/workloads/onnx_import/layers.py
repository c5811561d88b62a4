"""Converters of the ONNX operators with weights or windows: Conv (with a BatchNormalization folded
into it), MaxPool, AveragePool, GlobalAveragePool, Gemm, MatMul and Resize.

Each reads the node from the :class:`~.context.Converter`, makes the stage with the operator
library (NHWC), evaluates it with the numpy reference on the value's array, and records the output
:class:`~.values.Value`. A producer's pending bias and activation go into the stage's read
(``data_bias``/``data_act``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx

from .. import ops
from .. import reference as ref
from .context import Converter
from .values import NHWC, Value


def _text(value: Any, default: str) -> str:
    if value is None:
        return default
    return value.decode() if isinstance(value, bytes) else str(value)


def _pair(cx: Converter, attrs: dict[str, Any], key: str, default: int) -> tuple[int, int]:
    values = tuple(int(v) for v in attrs.get(key, (default, default)))
    if len(values) != 2:
        raise cx.error(f"{key} {values}: only 2-d windows are supported")
    return values[0], values[1]


def window_pads(
    cx: Converter,
    attrs: dict[str, Any],
    size: tuple[int, int],
    span: tuple[int, int],
    stride: tuple[int, int],
) -> tuple[int, int]:
    """The padding of each spatial axis. The library pads both sides by the same amount: ONNX's
    leading pads, accepted when they give the model's output size (trailing pads that the window
    never reaches, or reaches only as zeros past the end, change nothing)."""
    out = cx.out_dims()[2:]
    auto = _text(attrs.get("auto_pad"), "NOTSET")
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        totals = [max((o - 1) * s + k - n, 0) for o, s, k, n in zip(out, stride, span, size)]
        begins = [t // 2 if auto == "SAME_UPPER" else t - t // 2 for t in totals]
    elif auto == "VALID":
        begins = [0, 0]
    else:
        pads = [int(p) for p in attrs.get("pads", (0, 0, 0, 0))]
        begins = pads[:2]
    for axis in range(2):
        extent = (size[axis] + 2 * begins[axis] - span[axis]) // stride[axis] + 1
        if extent != out[axis]:
            raise cx.error(
                f"padding {attrs.get('pads', auto)} gives {out[axis]} outputs on axis {axis + 2}; "
                f"padding both sides by {begins[axis]} gives {extent} (only such padding is supported)"
            )
    return begins[0], begins[1]


def _dilated(weight: np.ndarray, dilation: tuple[int, int]) -> np.ndarray:
    """An HW.. kernel with ``d - 1`` zero rows/columns between taps: the dilated kernel's numpy form."""
    kh, kw = weight.shape[:2]
    out = np.zeros(((kh - 1) * dilation[0] + 1, (kw - 1) * dilation[1] + 1, *weight.shape[2:]), np.float32)
    out[:: dilation[0], :: dilation[1]] = weight
    return out


def _fold_batchnorm(
    cx: Converter, w: np.ndarray, b: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray | None, onnx.NodeProto | None]:
    """Fold the BatchNormalization that alone reads this Conv's output into its weights and bias."""
    assert cx.node is not None
    readers = cx.readers(cx.node.output[0])
    if len(readers) != 1 or readers[0].op_type != "BatchNormalization":
        return w, b, None
    bn = readers[0]
    names = bn.input[1:5]
    if not all(n in cx.cut.constants for n in names):
        raise cx.error(f"the BatchNormalization {bn.name!r} after it has parameters that are not constants")
    scale, beta, mean, var = (cx.cut.constants[n].astype(np.float64) for n in names)
    eps = next((a.f for a in bn.attribute if a.name == "epsilon"), 1e-5)
    factor = scale / np.sqrt(var + eps)
    bias = ((0.0 if b is None else b.astype(np.float64)) - mean) * factor + beta
    return (w * factor[:, None, None, None]).astype(np.float32), bias.astype(np.float32), bn


def conv(cx: Converter) -> None:
    x = cx.nhwc(cx.value(0))
    w, b = cx.const(1), cx.const(2)
    if w is None or w.ndim != 4:
        raise cx.error("the weight must be a constant [CO, CI/group, KH, KW]")
    attrs = cx.attrs()
    group = int(attrs.get("group", 1))
    stride, dilation = _pair(cx, attrs, "strides", 1), _pair(cx, attrs, "dilations", 1)
    kernel = (int(w.shape[2]), int(w.shape[3]))
    span = ((kernel[0] - 1) * dilation[0] + 1, (kernel[1] - 1) * dilation[1] + 1)
    pad = window_pads(cx, attrs, (x.dims[2], x.dims[3]), span, stride)
    w, b, bn = _fold_batchnorm(cx, w.astype(np.float32), b)
    cin, cout = x.dims[1], int(w.shape[0])
    stage = cx.name("conv" if group == 1 else "dw")
    kwargs: dict[str, Any] = {"name": stage, "data_act": x.act, "data_bias": x.bias, "dilation": dilation}
    try:
        if group == 1:
            hwio = w.transpose(2, 3, 1, 0)
            out = ops.conv2d_nhwc(x.tensor, cx.weight(f"w_{stage}", hwio), stride, pad, **kwargs)
            array = ref.conv2d_nhwc(x.array, _dilated(hwio, dilation), stride, pad)
            macs = cin * kernel[0] * kernel[1]
        elif group == cin == cout and w.shape[1] == 1:
            hwc = w[:, 0].transpose(1, 2, 0)
            out = ops.depthwise_conv2d_nhwc(x.tensor, cx.weight(f"w_{stage}", hwc), stride, pad, **kwargs)
            array = ref.depthwise_conv2d_nhwc(x.array, _dilated(hwc, dilation), stride, pad)
            macs = kernel[0] * kernel[1]
        else:
            raise cx.error(f"group {group} with {cin} input and {cout} output channels: only 1 or depthwise")
    except ValueError as err:
        raise cx.error(str(err)) from None
    cx.flops += 2 * int(np.prod(out.shape)) * macs
    bias = None
    if b is not None:
        bias = cx.weight(f"b_{stage}", b)
        array = (array + b).astype(np.float32)
        cx.flops += int(np.prod(out.shape))
    value = Value(out, (x.dims[0], cout, *out.shape[1:3]), NHWC, array, bias=bias)
    cx.put(value)
    if bn is not None:
        cx.values[bn.output[0]] = value
        cx.skip.add(id(bn))


def pool(cx: Converter) -> None:
    assert cx.node is not None
    x = cx.nhwc(cx.value(0))
    attrs = cx.attrs()
    kind = "max" if cx.node.op_type == "MaxPool" else "avg"
    kernel = _pair(cx, attrs, "kernel_shape", 1)
    stride = _pair(cx, attrs, "strides", 1)
    if _pair(cx, attrs, "dilations", 1) != (1, 1):
        raise cx.error("dilated pooling is not supported")
    if len(cx.node.output) > 1 and cx.node.output[1]:
        raise cx.error("the Indices output is not supported")
    pad = window_pads(cx, attrs, (x.dims[2], x.dims[3]), kernel, stride)
    if kind == "avg" and any(pad) and not attrs.get("count_include_pad", 0):
        raise cx.error("padding with count_include_pad=0 is not supported (the library counts the padding)")
    make = ops.max_pool2d if kind == "max" else ops.avg_pool2d
    try:
        out = make(
            x.tensor, kernel, stride, pad, name=cx.name(f"{kind}pool"), data_act=x.act, data_bias=x.bias
        )
    except ValueError as err:
        raise cx.error(str(err)) from None
    array = (ref.max_pool2d if kind == "max" else ref.avg_pool2d)(x.array, kernel, stride, pad)
    cx.flops += int(np.prod(out.shape)) * (kernel[0] * kernel[1] + (kind == "avg"))
    cx.put(Value(out, (x.dims[0], x.dims[1], *out.shape[1:3]), NHWC, array))


def global_average_pool(cx: Converter) -> None:
    x = cx.nhwc(cx.value(0))
    out = ops.global_avg_pool_nhwc(x.tensor, name=cx.name("gap"), data_act=x.act, data_bias=x.bias)
    cx.flops += x.array.size + int(np.prod(out.shape))
    cx.put(Value(out, (x.dims[0], x.dims[1], 1, 1), NHWC, ref.global_avg_pool_nhwc(x.array)))


def _matrix(cx: Converter, value: Value) -> Value:
    if len(value.dims) != 2 or value.tensor.shape != value.dims:
        raise cx.error(f"expects a matrix, got a tensor of shape {value.dims} held as {value.tensor.shape}")
    return value


def _dense(cx: Converter, x: Value, weight: np.ndarray, bias: np.ndarray | None) -> None:
    """``x @ weight.T (+ bias)``: the library's dense, the bias left for the consumer to add."""
    stage = cx.name("dense")
    out = ops.dense(x.tensor, cx.weight(f"w_{stage}", weight), name=stage, data_act=x.act, data_bias=x.bias)
    array = ref.dense(x.array, weight)
    cx.flops += 2 * int(np.prod(out.shape)) * weight.shape[1]
    bias_tensor = None
    if bias is not None:
        bias_tensor = cx.weight(f"b_{stage}", bias)
        array = (array + bias).astype(np.float32)
    cx.put(Value(out, out.shape, (0, 1), array, bias=bias_tensor))


def gemm(cx: Converter) -> None:
    x = _matrix(cx, cx.value(0))
    attrs = cx.attrs()
    b, c = cx.const(1), cx.const(2)
    if attrs.get("transA", 0):
        raise cx.error("transA=1 is not supported")
    if b is None or b.ndim != 2:
        raise cx.error("B must be a constant matrix")
    weight = (b if attrs.get("transB", 0) else b.T).astype(np.float32) * np.float32(attrs.get("alpha", 1.0))
    bias = None
    if c is not None:
        full = np.broadcast_to(c.astype(np.float32) * np.float32(attrs.get("beta", 1.0)), cx.out_dims())
        if not (full == full[:1]).all():
            raise cx.error("C must be the same for every row (a bias per output)")
        bias = np.ascontiguousarray(full[0])
    _dense(cx, x, weight, bias)


def matmul(cx: Converter) -> None:
    x = _matrix(cx, cx.value(0))
    b = cx.const(1)
    if b is None or b.ndim != 2:
        raise cx.error("the second operand must be a constant matrix")
    _dense(cx, x, np.ascontiguousarray(b.T.astype(np.float32)), None)


_COORDINATES = {"half_pixel": "half_pixel", "asymmetric": "asymmetric", "align_corners": "align_corners"}


def resize(cx: Converter) -> None:
    """Nearest or linear Resize of H and W; a nearest resize passes a pending bias and activation on
    (it only gathers), a linear one applies them first."""
    x = cx.nhwc(cx.value(0))
    attrs = cx.attrs()
    dims = cx.out_dims()
    if dims[:2] != x.dims[:2]:
        raise cx.error(f"resizes the batch or channels ({x.dims} to {dims}); only H and W are supported")
    mode = _text(attrs.get("mode"), "nearest")
    coord = _text(attrs.get("coordinate_transformation_mode"), "half_pixel")
    if coord == "pytorch_half_pixel" and min(dims[2:]) > 1:
        coord = "half_pixel"  # the same positions when the output has more than one element
    if mode not in ("nearest", "linear") or coord not in _COORDINATES:
        raise cx.error(
            f"mode {mode!r} with coordinate_transformation_mode {coord!r}: supported are nearest and linear "
            f"with {', '.join(_COORDINATES)}"
        )
    if attrs.get("antialias", 0) or attrs.get("axes") is not None:
        raise cx.error("antialias and axes are not supported")
    scales = cx.const(2)
    if scales is not None and scales.size:
        exact = [np.float32(o / i) for o, i in zip(dims[2:], x.dims[2:])]
        if [np.float32(s) for s in scales[2:]] != exact:
            raise cx.error(f"scales {list(scales)} differ from output/input sizes {exact}")
    rounding = _text(attrs.get("nearest_mode"), "round_prefer_floor")
    method = "nearest" if mode == "nearest" else "bilinear"
    if method == "bilinear":
        x = cx.materialize(x)
    out_hw = (dims[2], dims[3])
    out = ops.resize2d_nhwc(
        x.tensor, out_hw, method, coordinates=coord, rounding=rounding, name=cx.name("resize")
    )
    array = ref.resize2d_nhwc(x.array, out_hw, method, coord, rounding)
    cx.flops += 0 if method == "nearest" else 7 * int(np.prod(out.shape))
    cx.put(Value(out, dims, NHWC, array, bias=x.bias, act=x.act))
