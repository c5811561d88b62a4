"""Chains of one or two operators: two max pools, resize then conv, a matmul."""

from __future__ import annotations

import numpy as np

from ... import te
from .. import flops, ops
from .. import reference as ref
from ..registry import Chain, fan_in_scale, register


@register(
    "pool_chain",
    "NHWC data, two 3x3 stride-1 max pools without padding (pool1 -> pool2)",
    height=132,
    width=132,
    channels=64,
)
def pool_chain(height: int, width: int, channels: int) -> Chain:
    """data[1,H,W,C] -> pool1[1,H-2,W-2,C] -> pool2[1,H-4,W-4,C]."""
    data = te.placeholder((1, height, width, channels), "float32", name="data")
    pool1 = ops.max_pool2d(data, 3, name="pool1")
    pool2 = ops.max_pool2d(pool1, 3, name="pool2")
    func = te.create_func(inputs=[data], outputs=[pool2], name="pool_chain")

    def reference(x: np.ndarray) -> tuple[np.ndarray, ...]:
        return (ref.max_pool2d(ref.max_pool2d(x, 3), 3),)

    return Chain(func, reference, flops.window(pool1, 9) + flops.window(pool2, 9), (1.0,))


@register(
    "resize_conv",
    "NCHW data, nearest 2x downsample (index floor(v*2+0.5), clamped), then a 3x3 conv with padding 1",
    channels=16,
    height=512,
    width=512,
)
def resize_conv(channels: int, height: int, width: int) -> Chain:
    """data[1,C,H,W] -> resize[1,C,H//2,W//2] -> conv[1,C,H//2,W//2] with weight[C,C,3,3]."""
    data = te.placeholder((1, channels, height, width), "float32", name="data")
    weight = te.placeholder((channels, channels, 3, 3), "float32", name="w_conv")
    small = (height // 2, width // 2)
    resized = ops.resize2d_nchw(data, small, "nearest", name="resize")
    conv = ops.conv2d_nchw(resized, weight, 1, 1, name="conv")
    func = te.create_func(inputs=[data, weight], outputs=[conv], name="resize_conv")

    def reference(x: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, ...]:
        return (ref.conv2d_nchw(ref.resize2d_nchw(x, small, "nearest"), w, 1, 1),)

    return Chain(func, reference, flops.macs(conv, channels * 9), (1.0, fan_in_scale(channels * 9)))


@register("matmul", "C[M,N] = A[M,K] @ B[K,N]", m=1024, n=1024, k=1024)
def matmul(m: int, n: int, k: int) -> Chain:
    """a[M,K], b[K,N] -> matmul[M,N]; both inputs are data (values in [-1, 1])."""
    a = te.placeholder((m, k), "float32", name="A")
    b = te.placeholder((k, n), "float32", name="B")
    out = ops.matmul(a, b, name="matmul")
    func = te.create_func(inputs=[a, b], outputs=[out], name="matmul")

    def reference(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, ...]:
        return (ref.matmul(x, y),)

    return Chain(func, reference, flops.macs(out, k), (1.0, 1.0))
