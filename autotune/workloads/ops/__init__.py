"""The operator library: functions from TE tensors to TE tensors, one compute stage each.

Layouts are in each docstring. Padding is inline (a lazy select in the consuming
stage), ``data_act`` fuses a producer's activation into the reading stage and
``data_bias`` its per-channel bias (added before the activation).
"""

from __future__ import annotations

from ._common import Activation
from .conv import conv2d_nchw, conv2d_nhwc, depthwise_conv2d_nhwc
from .elementwise import (
    add,
    broadcast_map,
    hardswish,
    hardswish_expr,
    mul,
    relu,
    relu6,
    relu6_expr,
    relu_expr,
    sigmoid,
    sigmoid_expr,
)
from .linalg import dense, matmul
from .pool import avg_pool2d, global_avg_pool_nhwc, max_pool2d
from .resize import resize2d_nchw, resize2d_nhwc

__all__ = [
    "Activation",
    "add",
    "avg_pool2d",
    "broadcast_map",
    "conv2d_nchw",
    "conv2d_nhwc",
    "dense",
    "depthwise_conv2d_nhwc",
    "global_avg_pool_nhwc",
    "hardswish",
    "hardswish_expr",
    "matmul",
    "max_pool2d",
    "mul",
    "relu",
    "relu6",
    "relu6_expr",
    "relu_expr",
    "resize2d_nchw",
    "resize2d_nhwc",
    "sigmoid",
    "sigmoid_expr",
]
