"""Mobile-style convolution chains: an inverted bottleneck and a tiny CNN classifier.

Activations are fused into the stage that reads the activated tensor
(``data_act``): a reduction is the whole body of a stage, so a conv cannot
clamp its own sum. Each stored intermediate is therefore pre-activation.
"""

from __future__ import annotations

import numpy as np

from ... import te
from .. import flops, ops
from .. import reference as ref
from ..registry import Chain, fan_in_scale, register


@register(
    "bottleneck",
    "NHWC inverted bottleneck: pointwise expand + relu6, depthwise 3x3 (pad 1) + relu6, pointwise project",
    height=112,
    width=112,
    cin=16,
    expand=96,
)
def bottleneck(height: int, width: int, cin: int, expand: int) -> Chain:
    """data[1,H,W,cin] -> expand[1,H,W,E] -> depthwise[1,H,W,E] -> project[1,H,W,cin]."""
    data = te.placeholder((1, height, width, cin), "float32", name="data")
    w_expand = te.placeholder((1, 1, cin, expand), "float32", name="w_expand")
    w_dw = te.placeholder((3, 3, expand), "float32", name="w_depthwise")
    w_project = te.placeholder((1, 1, expand, cin), "float32", name="w_project")
    x1 = ops.conv2d_nhwc(data, w_expand, name="expand")
    x2 = ops.depthwise_conv2d_nhwc(x1, w_dw, 1, 1, name="depthwise", data_act=ops.relu6_expr)
    x3 = ops.conv2d_nhwc(x2, w_project, name="project", data_act=ops.relu6_expr)
    func = te.create_func(inputs=[data, w_expand, w_dw, w_project], outputs=[x3], name="bottleneck")

    def reference(x: np.ndarray, we: np.ndarray, wd: np.ndarray, wp: np.ndarray) -> tuple[np.ndarray, ...]:
        y = ref.relu6(ref.conv2d_nhwc(x, we))
        y = ref.relu6(ref.depthwise_conv2d_nhwc(y, wd, 1, 1))
        return (ref.conv2d_nhwc(y, wp),)

    count = flops.macs(x1, cin) + flops.macs(x2, 9) + flops.macs(x3, expand)
    count += flops.elementwise(x1, 2) + flops.elementwise(x2, 2)
    scales = (1.0, fan_in_scale(cin), fan_in_scale(9), fan_in_scale(expand))
    return Chain(func, reference, count, scales)


TINY_CNN_WIDTHS = (16, 32, 64)
TINY_CNN_CLASSES = 10


@register(
    "tiny_cnn",
    "NHWC classifier: 3x3/2 conv + relu, depthwise, pointwise + relu, depthwise /2, pointwise + relu, "
    "global average pool, dense",
    height=96,
    width=96,
)
def tiny_cnn(height: int, width: int) -> Chain:
    """data[1,H,W,3] -> conv1 -> dw1 -> pw1 -> dw2 -> pw2 -> gap[1,64] -> fc[1,10]."""
    c1, c2, c3 = TINY_CNN_WIDTHS
    data = te.placeholder((1, height, width, 3), "float32", name="data")
    w = {
        "conv1": te.placeholder((3, 3, 3, c1), "float32", name="w_conv1"),
        "dw1": te.placeholder((3, 3, c1), "float32", name="w_dw1"),
        "pw1": te.placeholder((1, 1, c1, c2), "float32", name="w_pw1"),
        "dw2": te.placeholder((3, 3, c2), "float32", name="w_dw2"),
        "pw2": te.placeholder((1, 1, c2, c3), "float32", name="w_pw2"),
        "fc": te.placeholder((TINY_CNN_CLASSES, c3), "float32", name="w_fc"),
    }
    relu = ops.relu_expr
    conv1 = ops.conv2d_nhwc(data, w["conv1"], 2, 1, name="conv1")
    dw1 = ops.depthwise_conv2d_nhwc(conv1, w["dw1"], 1, 1, name="dw1", data_act=relu)
    pw1 = ops.conv2d_nhwc(dw1, w["pw1"], name="pw1")
    dw2 = ops.depthwise_conv2d_nhwc(pw1, w["dw2"], 2, 1, name="dw2", data_act=relu)
    pw2 = ops.conv2d_nhwc(dw2, w["pw2"], name="pw2")
    gap = ops.global_avg_pool_nhwc(pw2, name="gap", data_act=relu)
    fc = ops.dense(gap, w["fc"], name="fc")
    func = te.create_func(inputs=[data, *w.values()], outputs=[fc], name="tiny_cnn")

    def reference(x: np.ndarray, *weights: np.ndarray) -> tuple[np.ndarray, ...]:
        wc1, wd1, wp1, wd2, wp2, wfc = weights
        y = ref.relu(ref.conv2d_nhwc(x, wc1, 2, 1))
        y = ref.relu(ref.conv2d_nhwc(ref.depthwise_conv2d_nhwc(y, wd1, 1, 1), wp1))
        y = ref.relu(ref.conv2d_nhwc(ref.depthwise_conv2d_nhwc(y, wd2, 2, 1), wp2))
        return (ref.dense(ref.global_avg_pool_nhwc(y), wfc),)

    count = flops.macs(conv1, 27) + flops.macs(dw1, 9) + flops.macs(pw1, c1) + flops.macs(dw2, 9)
    count += flops.macs(pw2, c2) + flops.macs(fc, c3)
    count += flops.elementwise(conv1) + flops.elementwise(pw1) + flops.elementwise(pw2)
    count += flops.average(gap, pw2.shape[1] * pw2.shape[2])
    scales = (
        1.0,
        fan_in_scale(27),
        fan_in_scale(9),
        fan_in_scale(c1),
        fan_in_scale(9),
        fan_in_scale(c2),
        fan_in_scale(c3),
    )
    return Chain(func, reference, count, scales)
