"""Numpy references of the operators, written independently of the TE definitions.

Every function takes and returns float32 arrays with the layout of the operator
of the same name in :mod:`autotune.workloads.ops`; windows come from ``np.pad``
and ``sliding_window_view``, contractions from ``tensordot``/``einsum``. Each is
checked against a plain loop implementation in the tests.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

IntPair = int | Sequence[int]


def pair(value: IntPair) -> tuple[int, int]:
    """``3`` -> ``(3, 3)``; a pair is returned as a tuple."""
    if isinstance(value, int):
        return value, value
    a, b = value
    return int(a), int(b)


def _windows(x: np.ndarray, axes: tuple[int, int], kernel: IntPair, stride: IntPair) -> np.ndarray:
    """Strided ``kh x kw`` windows over two axes; the window axes are appended last."""
    kh, kw = pair(kernel)
    sh, sw = pair(stride)
    win = sliding_window_view(x, (kh, kw), axis=axes)
    index = [slice(None)] * x.ndim
    index[axes[0]] = slice(None, None, sh)
    index[axes[1]] = slice(None, None, sw)
    return win[tuple(index)]


def _pad(x: np.ndarray, axes: tuple[int, int], padding: IntPair, value: float = 0.0) -> np.ndarray:
    ph, pw = pair(padding)
    widths = [(0, 0)] * x.ndim
    widths[axes[0]] = (ph, ph)
    widths[axes[1]] = (pw, pw)
    return np.pad(x, widths, constant_values=value)


def conv2d_nhwc(
    data: np.ndarray, weight: np.ndarray, stride: IntPair = 1, padding: IntPair = 0
) -> np.ndarray:
    """data[N,H,W,CI], weight[KH,KW,CI,CO] -> out[N,OH,OW,CO]."""
    kh, kw = weight.shape[:2]
    win = _windows(_pad(data, (1, 2), padding), (1, 2), (kh, kw), stride)  # N,OH,OW,CI,KH,KW
    return np.tensordot(win, weight, axes=([3, 4, 5], [2, 0, 1])).astype(np.float32)


def conv2d_nchw(
    data: np.ndarray, weight: np.ndarray, stride: IntPair = 1, padding: IntPair = 0
) -> np.ndarray:
    """data[N,CI,H,W], weight[CO,CI,KH,KW] -> out[N,CO,OH,OW]."""
    kh, kw = weight.shape[2:]
    win = _windows(_pad(data, (2, 3), padding), (2, 3), (kh, kw), stride)  # N,CI,OH,OW,KH,KW
    out = np.tensordot(win, weight, axes=([1, 4, 5], [1, 2, 3]))  # N,OH,OW,CO
    return np.ascontiguousarray(out.transpose(0, 3, 1, 2), dtype=np.float32)


def depthwise_conv2d_nhwc(
    data: np.ndarray, weight: np.ndarray, stride: IntPair = 1, padding: IntPair = 0
) -> np.ndarray:
    """data[N,H,W,C], weight[KH,KW,C] -> out[N,OH,OW,C] (channel multiplier 1)."""
    kh, kw = weight.shape[:2]
    win = _windows(_pad(data, (1, 2), padding), (1, 2), (kh, kw), stride)  # N,OH,OW,C,KH,KW
    return np.einsum("nhwcij,ijc->nhwc", win, weight).astype(np.float32)


def max_pool2d(data: np.ndarray, kernel: IntPair, stride: IntPair = 1, padding: IntPair = 0) -> np.ndarray:
    """data[N,H,W,C] -> max over each window; padding never wins (it is -inf)."""
    win = _windows(_pad(data, (1, 2), padding, -np.inf), (1, 2), kernel, stride)
    return win.max(axis=(-2, -1)).astype(np.float32)


def avg_pool2d(data: np.ndarray, kernel: IntPair, stride: IntPair = 1, padding: IntPair = 0) -> np.ndarray:
    """data[N,H,W,C] -> window sum / (KH*KW); padded zeros count."""
    win = _windows(_pad(data, (1, 2), padding), (1, 2), kernel, stride)
    return win.mean(axis=(-2, -1), dtype=np.float32)


def global_avg_pool_nhwc(data: np.ndarray) -> np.ndarray:
    """data[N,H,W,C] -> out[N,C], the mean over H and W."""
    return data.mean(axis=(1, 2), dtype=np.float32)


def nearest_indices(in_dim: int, out_dim: int) -> np.ndarray:
    """``clamp(floor(out * scale + 0.5), 0, in_dim - 1)`` in float32, ``scale = in_dim / out_dim``."""
    scale = np.float32(in_dim / out_dim)
    pos = np.arange(out_dim, dtype=np.float32) * scale + np.float32(0.5)
    return np.clip(np.floor(pos).astype(np.int64), 0, in_dim - 1)


def _linear_weights(in_dim: int, out_dim: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Half-pixel source positions: the two clamped neighbours and the weight of the second."""
    scale = np.float32(in_dim / out_dim)
    pos = (np.arange(out_dim, dtype=np.float32) + np.float32(0.5)) * scale - np.float32(0.5)
    lo = np.floor(pos)
    frac = (pos - lo).astype(np.float32)
    lo_i = lo.astype(np.int64)
    return np.clip(lo_i, 0, in_dim - 1), np.clip(lo_i + 1, 0, in_dim - 1), frac


def resize2d_nchw(data: np.ndarray, out_hw: IntPair, method: str = "nearest") -> np.ndarray:
    """data[N,C,H,W] -> out[N,C,OH,OW] by nearest neighbour or half-pixel bilinear interpolation."""
    oh, ow = pair(out_hw)
    h, w = data.shape[2:]
    if method == "nearest":
        return np.ascontiguousarray(data[:, :, nearest_indices(h, oh)][:, :, :, nearest_indices(w, ow)])
    if method != "bilinear":
        raise ValueError(f"resize2d_nchw: unknown method {method!r}")
    y0, y1, fy = _linear_weights(h, oh)
    x0, x1, fx = _linear_weights(w, ow)
    rows = data[:, :, y0, :] * (1 - fy)[:, None] + data[:, :, y1, :] * fy[:, None]
    out = rows[:, :, :, x0] * (1 - fx) + rows[:, :, :, x1] * fx
    return out.astype(np.float32)


def matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a[M,K] @ b[K,N]."""
    return np.matmul(a, b).astype(np.float32)


def dense(data: np.ndarray, weight: np.ndarray, bias: np.ndarray | None = None) -> np.ndarray:
    """data[N,K], weight[O,K] -> data @ weight.T (+ bias[O])."""
    out = np.tensordot(data, weight, axes=([1], [1]))
    if bias is not None:
        out = out + bias
    return out.astype(np.float32)


def relu(x: np.ndarray) -> np.ndarray:
    """max(x, 0)."""
    return np.maximum(x, np.float32(0))


def relu6(x: np.ndarray) -> np.ndarray:
    """min(max(x, 0), 6)."""
    return np.clip(x, np.float32(0), np.float32(6))


def add(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a + b (same shape)."""
    return (a + b).astype(np.float32)


def sigmoid(x: np.ndarray) -> np.ndarray:
    """1 / (1 + exp(-x)) in float32."""
    one = np.float32(1)
    return (one / (one + np.exp(-x.astype(np.float32)))).astype(np.float32)


def hardswish(x: np.ndarray) -> np.ndarray:
    """x * clip(x / 6 + 0.5, 0, 1) in float32."""
    gate = np.clip(x * np.float32(1.0 / 6.0) + np.float32(0.5), np.float32(0), np.float32(1))
    return (x * gate).astype(np.float32)


def mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a * b with numpy broadcasting."""
    return (a * b).astype(np.float32)


def _source_positions(in_dim: int, out_dim: int, coordinates: str) -> np.ndarray:
    """ONNX Resize's source position of every output index, in float32."""
    out = np.arange(out_dim, dtype=np.float32)
    scale = np.float32(in_dim / out_dim)
    if coordinates == "half_pixel":
        return (out + np.float32(0.5)) * scale - np.float32(0.5)
    if coordinates == "asymmetric":
        return out * scale
    if coordinates != "align_corners":
        raise ValueError(f"resize2d_nhwc: unknown coordinates {coordinates!r}")
    return out * np.float32((in_dim - 1) / (out_dim - 1) if out_dim > 1 else 0.0)


_ROUND: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "floor": np.floor,
    "ceil": np.ceil,
    "round_prefer_ceil": lambda p: np.floor(p + np.float32(0.5)),
    "round_prefer_floor": lambda p: np.ceil(p - np.float32(0.5)),
}


def resize2d_nhwc(
    data: np.ndarray,
    out_hw: IntPair,
    method: str = "nearest",
    coordinates: str = "half_pixel",
    rounding: str = "round_prefer_floor",
) -> np.ndarray:
    """data[N,H,W,C] -> out[N,OH,OW,C], nearest (``rounding``) or bilinear, at ONNX's source positions."""
    oh, ow = pair(out_hw)
    h, w = data.shape[1:3]
    pos_y, pos_x = _source_positions(h, oh, coordinates), _source_positions(w, ow, coordinates)
    if method == "nearest":
        iy = np.clip(_ROUND[rounding](pos_y).astype(np.int64), 0, h - 1)
        ix = np.clip(_ROUND[rounding](pos_x).astype(np.int64), 0, w - 1)
        return np.ascontiguousarray(data[:, iy][:, :, ix])
    if method != "bilinear":
        raise ValueError(f"resize2d_nhwc: unknown method {method!r}")

    def neighbours(pos: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        lo = np.floor(pos)
        frac = (pos - lo).astype(np.float32)
        lo_i = lo.astype(np.int64)
        return np.clip(lo_i, 0, size - 1), np.clip(lo_i + 1, 0, size - 1), frac

    y0, y1, fy = neighbours(pos_y, h)
    x0, x1, fx = neighbours(pos_x, w)
    rows = data[:, y0] * (1 - fy)[:, None, None] + data[:, y1] * fy[:, None, None]
    out = rows[:, :, x0] * (1 - fx)[:, None] + rows[:, :, x1] * fx[:, None]
    return out.astype(np.float32)
