"""The operator library: functions from TE tensors to TE tensors, one compute stage each.

Layouts are in each docstring. Padding is inline (a lazy select in the consuming
stage), and ``data_act`` fuses a producer's activation into the reading stage.
"""

from __future__ import annotations

from ._common import Activation
from .conv import conv2d_nchw, conv2d_nhwc, depthwise_conv2d_nhwc
from .elementwise import add, relu, relu6, relu6_expr, relu_expr
from .linalg import dense, matmul
from .pool import avg_pool2d, global_avg_pool_nhwc, max_pool2d
from .resize import resize2d_nchw

__all__ = [
    "Activation",
    "add",
    "avg_pool2d",
    "conv2d_nchw",
    "conv2d_nhwc",
    "dense",
    "depthwise_conv2d_nhwc",
    "global_avg_pool_nhwc",
    "matmul",
    "max_pool2d",
    "relu",
    "relu6",
    "relu6_expr",
    "relu_expr",
    "resize2d_nchw",
]
