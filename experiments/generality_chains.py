"""Chains that are not built-ins, written as a user would: the operator library, ``te.compute`` for
what it lacks (sigmoid, softmax, a broadcast multiply), and a numpy reference each.

Each builder returns a :class:`~autotune.workloads.Chain`, so a config names it as
``workload: {path: generality_chains.py:<builder>}``; ``TORCH[<builder>]`` runs the same
computation in PyTorch eager (NHWC data as channels_last) for experiments/generality.py.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from autotune import ir, te
from autotune.workloads import Chain, fan_in_scale, flops, ops


def _exp(x: ir.Expr) -> ir.Expr:
    return ir.Call("float32", "exp", (x,))


def _sigmoid(x: ir.Expr) -> ir.Expr:
    one = ir.const(1.0)
    return ir.Div(one, ir.Add(one, _exp(ir.Sub(ir.const(0.0), x))))


def _np_conv(x: np.ndarray, w: np.ndarray, stride: int = 1, pad: int = 0, depthwise: bool = False) -> np.ndarray:
    """NHWC convolution (weights [KH, KW, CI, CO], or [KH, KW, C] for depthwise) in float64."""
    x = np.pad(x.astype(np.float64), ((0, 0), (pad, pad), (pad, pad), (0, 0)))
    kh, kw = w.shape[:2]
    oh, ow = (x.shape[1] - kh) // stride + 1, (x.shape[2] - kw) // stride + 1
    out = 0.0
    for dy in range(kh):
        for dx in range(kw):
            window = x[:, dy : dy + stride * (oh - 1) + 1 : stride, dx : dx + stride * (ow - 1) + 1 : stride, :]
            out = out + (window * w[dy, dx] if depthwise else window @ w[dy, dx])
    return np.asarray(out)


def _relu6(x: np.ndarray) -> np.ndarray:
    return np.clip(x, 0.0, 6.0)


def resnet_body(size: int = 56, channels: int = 64) -> Chain:
    """conv 3x3 pad 1 -> relu -> conv 3x3 pad 1, NHWC (relu applied as conv2 reads)."""
    data = te.placeholder((1, size, size, channels), name="data")
    w1 = te.placeholder((3, 3, channels, channels), name="w1")
    w2 = te.placeholder((3, 3, channels, channels), name="w2")
    conv1 = ops.conv2d_nhwc(data, w1, padding=1, name="conv1")
    conv2 = ops.conv2d_nhwc(conv1, w2, padding=1, name="conv2", data_act=ops.relu_expr)
    func = te.create_func([data, w1, w2], [conv2], name="resnet_body")

    def reference(x: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return _np_conv(np.maximum(_np_conv(x, a, pad=1), 0), b, pad=1).astype(np.float32)

    scale = fan_in_scale(9 * channels)
    return Chain(func, reference, flops.macs(conv1, 9 * channels) + flops.macs(conv2, 9 * channels), (1.0, scale, scale))


def dw_separable(size: int = 112, cin: int = 32, cout: int = 64) -> Chain:
    """depthwise 3x3 stride 2 pad 1 + relu -> pointwise cin -> cout, NHWC."""
    data = te.placeholder((1, size, size, cin), name="data")
    wd = te.placeholder((3, 3, cin), name="wd")
    wp = te.placeholder((1, 1, cin, cout), name="wp")
    dw = ops.depthwise_conv2d_nhwc(data, wd, stride=2, padding=1, name="dw")
    pw = ops.conv2d_nhwc(dw, wp, name="pw", data_act=ops.relu_expr)
    func = te.create_func([data, wd, wp], [pw], name="dw_separable")

    def reference(x: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        d = np.maximum(_np_conv(x, a, stride=2, pad=1, depthwise=True), 0)
        return _np_conv(d, b).astype(np.float32)

    return Chain(func, reference, flops.macs(dw, 9) + flops.macs(pw, cin), (1.0, fan_in_scale(9), fan_in_scale(cin)))


def mlp(rows: int = 128, features: int = 512, hidden: int = 2048) -> Chain:
    """dense features -> hidden + bias -> relu -> dense hidden -> features."""
    x = te.placeholder((rows, features), name="x")
    w1 = te.placeholder((hidden, features), name="w1")
    b1 = te.placeholder((hidden,), name="b1")
    w2 = te.placeholder((features, hidden), name="w2")
    h = ops.dense(x, w1, b1, name="fc1")
    out = ops.dense(h, w2, name="fc2", data_act=ops.relu_expr)
    func = te.create_func([x, w1, b1, w2], [out], name="mlp")

    def reference(x: np.ndarray, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
        return (np.maximum(x.astype(np.float64) @ a.T + b, 0) @ c.T).astype(np.float32)

    return Chain(
        func, reference, flops.macs(h, features) + flops.macs(out, hidden),
        (1.0, fan_in_scale(features), 0.1, fan_in_scale(hidden)),
    )  # fmt: skip


def lenet_pool_conv(size: int = 64, cin: int = 16, cout: int = 32) -> Chain:
    """max pool 2x2 stride 2 -> conv 5x5 (no padding) + relu, NHWC."""
    data = te.placeholder((1, size, size, cin), name="data")
    w = te.placeholder((5, 5, cin, cout), name="w")
    pool = ops.max_pool2d(data, 2, stride=2, name="pool")
    conv = ops.conv2d_nhwc(pool, w, name="conv")
    out = ops.relu(conv, name="relu")
    func = te.create_func([data, w], [out], name="lenet_pool_conv")

    def reference(x: np.ndarray, a: np.ndarray) -> np.ndarray:
        p = sliding_window_view(x, (2, 2), axis=(1, 2))[:, ::2, ::2].max(axis=(-2, -1))
        return np.maximum(_np_conv(p, a), 0).astype(np.float32)

    return Chain(
        func, reference, flops.window(pool, 4) + flops.macs(conv, 25 * cin) + flops.elementwise(out),
        (1.0, fan_in_scale(25 * cin)),
    )  # fmt: skip


def mbconv5(size: int = 28, channels: int = 40, expand: int = 240) -> Chain:
    """MBConv: 1x1 channels -> expand + relu6, depthwise 5x5 pad 2 + relu6, 1x1 expand -> channels."""
    data = te.placeholder((1, size, size, channels), name="data")
    we = te.placeholder((1, 1, channels, expand), name="we")
    wd = te.placeholder((5, 5, expand), name="wd")
    wp = te.placeholder((1, 1, expand, channels), name="wp")
    e = ops.conv2d_nhwc(data, we, name="expand")
    d = ops.depthwise_conv2d_nhwc(e, wd, padding=2, name="depthwise", data_act=ops.relu6_expr)
    p = ops.conv2d_nhwc(d, wp, name="project", data_act=ops.relu6_expr)
    func = te.create_func([data, we, wd, wp], [p], name="mbconv5")

    def reference(x: np.ndarray, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
        h = _relu6(_np_conv(x, a))
        h = _relu6(_np_conv(h, b, pad=2, depthwise=True))
        return _np_conv(h, c).astype(np.float32)

    return Chain(
        func, reference, flops.macs(e, channels) + flops.macs(d, 25) + flops.macs(p, expand),
        (1.0, fan_in_scale(channels), fan_in_scale(25), fan_in_scale(expand)),
    )  # fmt: skip


def se_block(size: int = 28, channels: int = 96, squeeze: int = 24) -> Chain:
    """Squeeze-and-excitation: global average pool -> dense + relu -> dense -> sigmoid -> x * s."""
    data = te.placeholder((1, size, size, channels), name="data")
    w1 = te.placeholder((squeeze, channels), name="w1")
    w2 = te.placeholder((channels, squeeze), name="w2")
    gap = ops.global_avg_pool_nhwc(data, name="gap")
    s1 = ops.dense(gap, w1, name="fc1")
    s2 = ops.dense(s1, w2, name="fc2", data_act=ops.relu_expr)
    gate = te.compute((1, channels), lambda n, c: _sigmoid(s2[n, c]), name="gate")
    out = te.compute((1, size, size, channels), lambda n, y, x, c: data[n, y, x, c] * gate[n, c], name="scale")
    func = te.create_func([data, w1, w2], [out], name="se_block")

    def reference(x: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        s = x.astype(np.float64).mean(axis=(1, 2))
        s = np.maximum(s @ a.T, 0) @ b.T
        return (x * (1 / (1 + np.exp(-s)))[:, None, None, :]).astype(np.float32)

    total = flops.average(gap, size * size) + flops.macs(s1, channels) + flops.macs(s2, squeeze)
    return Chain(func, reference, total + flops.elementwise(gate, 4) + flops.elementwise(out), (1.0, fan_in_scale(channels), fan_in_scale(squeeze)))


def attention(tokens: int = 256, dims: int = 64) -> Chain:
    """One attention head: softmax(Q K^T / sqrt(d)) V, the softmax over each row."""
    q = te.placeholder((tokens, dims), name="q")
    k = te.placeholder((tokens, dims), name="k")
    v = te.placeholder((tokens, dims), name="v")
    scale = float(1.0 / np.sqrt(dims))
    rd = te.reduce_axis((0, dims), name="rd")
    scores = te.compute((tokens, tokens), lambda i, j: te.sum(q[i, rd] * k[j, rd], axis=rd), name="scores")
    rj = te.reduce_axis((0, tokens), name="rj")
    top = te.compute((tokens,), lambda i: te.max(scores[i, rj], axis=rj), name="top")
    expo = te.compute((tokens, tokens), lambda i, j: _exp((scores[i, j] - top[i]) * scale), name="expo")
    rs = te.reduce_axis((0, tokens), name="rs")
    total = te.compute((tokens,), lambda i: te.sum(expo[i, rs], axis=rs), name="total")
    rt = te.reduce_axis((0, tokens), name="rt")
    mixed = te.compute((tokens, dims), lambda i, d: te.sum(expo[i, rt] * v[rt, d], axis=rt), name="mixed")
    out = te.compute((tokens, dims), lambda i, d: mixed[i, d] / total[i], name="out")
    func = te.create_func([q, k, v], [out], name="attention")

    def reference(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> np.ndarray:
        s = (q.astype(np.float64) @ k.T) * scale
        e = np.exp(s - s.max(axis=1, keepdims=True))
        return ((e / e.sum(axis=1, keepdims=True)) @ v).astype(np.float32)

    n = tokens * tokens
    work = 2 * n * dims * 2 + n * 6 + tokens * dims
    return Chain(func, reference, work, (1.0, 1.0, 1.0))


CHAINS: dict[str, Callable[..., Chain]] = {
    f.__name__: f for f in (resnet_body, dw_separable, mlp, lenet_pool_conv, mbconv5, se_block, attention)
}


def _torch_nhwc(t: Any, x: np.ndarray) -> Any:
    return t.from_numpy(x).permute(0, 3, 1, 2).contiguous(memory_format=t.channels_last)


def _torch_weight(t: Any, w: np.ndarray, depthwise: bool = False) -> Any:
    if depthwise:  # [KH, KW, C] -> [C, 1, KH, KW]
        return t.from_numpy(np.ascontiguousarray(w.transpose(2, 0, 1)[:, None])).contiguous(memory_format=t.channels_last)
    return t.from_numpy(np.ascontiguousarray(w.transpose(3, 2, 0, 1))).contiguous(memory_format=t.channels_last)


def torch_runner(name: str, inputs: Sequence[np.ndarray]) -> Callable[[], Any]:
    """A call of PyTorch eager on ``inputs`` that computes chain ``name`` (NHWC as channels_last)."""
    import torch as t
    import torch.nn.functional as F

    if name in ("resnet_body", "dw_separable", "lenet_pool_conv", "mbconv5", "se_block"):
        x = _torch_nhwc(t, inputs[0])
    if name == "resnet_body":
        a, b = (_torch_weight(t, w) for w in inputs[1:])
        return lambda: F.conv2d(F.relu(F.conv2d(x, a, padding=1)), b, padding=1)
    if name == "dw_separable":
        a, b = _torch_weight(t, inputs[1], depthwise=True), _torch_weight(t, inputs[2])
        return lambda: F.conv2d(F.relu(F.conv2d(x, a, stride=2, padding=1, groups=a.shape[0])), b)
    if name == "lenet_pool_conv":
        a = _torch_weight(t, inputs[1])
        return lambda: F.relu(F.conv2d(F.max_pool2d(x, 2), a))
    if name == "mbconv5":
        a, c = _torch_weight(t, inputs[1]), _torch_weight(t, inputs[3])
        b = _torch_weight(t, inputs[2], depthwise=True)
        return lambda: F.conv2d(F.hardtanh(F.conv2d(F.hardtanh(F.conv2d(x, a), 0, 6), b, padding=2, groups=b.shape[0]), 0, 6), c)
    if name == "se_block":
        a, b = (t.from_numpy(w) for w in inputs[1:])
        return lambda: x * t.sigmoid(F.linear(F.relu(F.linear(x.mean(dim=(2, 3)), a)), b))[:, :, None, None]
    if name == "mlp":
        x, a, bias, c = (t.from_numpy(w) for w in inputs)
        return lambda: F.linear(F.relu(F.linear(x, a, bias)), c)
    if name == "attention":
        q, k, v = (t.from_numpy(w) for w in inputs)
        return lambda: F.scaled_dot_product_attention(q[None], k[None], v[None])[0]
    raise KeyError(name)
