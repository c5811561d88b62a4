"""A chain of one's own: a 3x3 average pool (a blur), then a 3x3 max pool, over NHWC data."""

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from autotune import te
from autotune.workloads import Chain, flops, ops


def blur_max(height: int = 36, width: int = 36, channels: int = 16) -> Chain:
    """NHWC data, a 3x3 average pool, then a 3x3 max pool (no padding)."""
    data = te.placeholder((1, height, width, channels), "float32", name="data")
    blur = ops.avg_pool2d(data, 3, name="blur")
    out = ops.max_pool2d(blur, 3, name="out")
    func = te.create_func(inputs=[data], outputs=[out], name="blur_max")

    def reference(x: np.ndarray) -> np.ndarray:
        blurred = sliding_window_view(x, (3, 3), axis=(1, 2)).mean(axis=(-2, -1))
        return sliding_window_view(blurred, (3, 3), axis=(1, 2)).max(axis=(-2, -1))

    return Chain(func, reference, flops.average(blur, 9) + flops.window(out, 9), input_scales=(1.0,))
