"""The numpy references agree with plain loop implementations on tiny shapes."""

from __future__ import annotations

import math
from itertools import product

import numpy as np
import pytest

from autotune.workloads import reference as ref

RNG = np.random.default_rng(0)


def rand(*shape: int) -> np.ndarray:
    return RNG.uniform(-1, 1, size=shape).astype(np.float32)


def out_dim(size: int, k: int, s: int, p: int) -> int:
    return (size + 2 * p - k) // s + 1


def read(x: np.ndarray, idx: tuple[int, ...], axes: tuple[int, int], pad: float) -> float:
    """x[idx], or ``pad`` where one of the two spatial indices is outside."""
    if any(not 0 <= idx[a] < x.shape[a] for a in axes):
        return pad
    return float(x[idx])


def naive_conv_nhwc(x: np.ndarray, w: np.ndarray, s: tuple[int, int], p: tuple[int, int]) -> np.ndarray:
    n, h, wd, ci = x.shape
    kh, kw, _, co = w.shape
    oh, ow = out_dim(h, kh, s[0], p[0]), out_dim(wd, kw, s[1], p[1])
    out = np.zeros((n, oh, ow, co))
    for b, y, z, o in product(range(n), range(oh), range(ow), range(co)):
        for i, j, c in product(range(kh), range(kw), range(ci)):
            v = read(x, (b, y * s[0] + i - p[0], z * s[1] + j - p[1], c), (1, 2), 0.0)
            out[b, y, z, o] += v * w[i, j, c, o]
    return out


def naive_conv_nchw(x: np.ndarray, w: np.ndarray, s: tuple[int, int], p: tuple[int, int]) -> np.ndarray:
    n, ci, h, wd = x.shape
    co, _, kh, kw = w.shape
    oh, ow = out_dim(h, kh, s[0], p[0]), out_dim(wd, kw, s[1], p[1])
    out = np.zeros((n, co, oh, ow))
    for b, o, y, z in product(range(n), range(co), range(oh), range(ow)):
        for c, i, j in product(range(ci), range(kh), range(kw)):
            v = read(x, (b, c, y * s[0] + i - p[0], z * s[1] + j - p[1]), (2, 3), 0.0)
            out[b, o, y, z] += v * w[o, c, i, j]
    return out


def naive_depthwise(x: np.ndarray, w: np.ndarray, s: tuple[int, int], p: tuple[int, int]) -> np.ndarray:
    n, h, wd, ch = x.shape
    kh, kw, _ = w.shape
    oh, ow = out_dim(h, kh, s[0], p[0]), out_dim(wd, kw, s[1], p[1])
    out = np.zeros((n, oh, ow, ch))
    for b, y, z, c in product(range(n), range(oh), range(ow), range(ch)):
        for i, j in product(range(kh), range(kw)):
            v = read(x, (b, y * s[0] + i - p[0], z * s[1] + j - p[1], c), (1, 2), 0.0)
            out[b, y, z, c] += v * w[i, j, c]
    return out


def naive_pool(
    x: np.ndarray, k: tuple[int, int], s: tuple[int, int], p: tuple[int, int], kind: str
) -> np.ndarray:
    n, h, wd, ch = x.shape
    oh, ow = out_dim(h, k[0], s[0], p[0]), out_dim(wd, k[1], s[1], p[1])
    out = np.zeros((n, oh, ow, ch))
    pad = -math.inf if kind == "max" else 0.0
    for b, y, z, c in product(range(n), range(oh), range(ow), range(ch)):
        vals = [
            read(x, (b, y * s[0] + i - p[0], z * s[1] + j - p[1], c), (1, 2), pad)
            for i, j in product(range(k[0]), range(k[1]))
        ]
        out[b, y, z, c] = max(vals) if kind == "max" else sum(vals) / len(vals)
    return out


CONV_CASES = [((1, 1), (0, 0)), ((1, 1), (1, 1)), ((2, 2), (1, 1)), ((2, 1), (0, 1)), ((1, 2), (2, 0))]


@pytest.mark.parametrize(("stride", "pad"), CONV_CASES)
def test_conv2d_nhwc(stride: tuple[int, int], pad: tuple[int, int]) -> None:
    x, w = rand(2, 6, 7, 3), rand(3, 2, 3, 4)
    np.testing.assert_allclose(
        ref.conv2d_nhwc(x, w, stride, pad), naive_conv_nhwc(x, w, stride, pad), atol=1e-5
    )


@pytest.mark.parametrize(("stride", "pad"), CONV_CASES)
def test_conv2d_nchw(stride: tuple[int, int], pad: tuple[int, int]) -> None:
    x, w = rand(2, 3, 6, 7), rand(4, 3, 3, 2)
    np.testing.assert_allclose(
        ref.conv2d_nchw(x, w, stride, pad), naive_conv_nchw(x, w, stride, pad), atol=1e-5
    )


@pytest.mark.parametrize(("stride", "pad"), CONV_CASES)
def test_depthwise_conv2d_nhwc(stride: tuple[int, int], pad: tuple[int, int]) -> None:
    x, w = rand(1, 6, 7, 5), rand(3, 2, 5)
    got = ref.depthwise_conv2d_nhwc(x, w, stride, pad)
    np.testing.assert_allclose(got, naive_depthwise(x, w, stride, pad), atol=1e-5)


@pytest.mark.parametrize("kind", ["max", "avg"])
@pytest.mark.parametrize(
    ("kernel", "stride", "pad"),
    [((3, 3), (1, 1), (0, 0)), ((3, 2), (2, 1), (1, 1)), ((2, 2), (2, 2), (0, 0))],
)
def test_pools(kind: str, kernel: tuple[int, int], stride: tuple[int, int], pad: tuple[int, int]) -> None:
    x = rand(2, 7, 6, 3)
    fn = ref.max_pool2d if kind == "max" else ref.avg_pool2d
    got = fn(x, kernel, stride, pad)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, naive_pool(x, kernel, stride, pad, kind), atol=1e-6)


def test_global_avg_pool_nhwc() -> None:
    x = rand(2, 4, 5, 3)
    want = np.array(
        [
            [sum(float(x[b, i, j, c]) for i in range(4) for j in range(5)) / 20 for c in range(3)]
            for b in range(2)
        ]
    )
    np.testing.assert_allclose(ref.global_avg_pool_nhwc(x), want, atol=1e-6)


def naive_nearest(x: np.ndarray, oh: int, ow: int) -> np.ndarray:
    n, c, h, w = x.shape
    out = np.zeros((n, c, oh, ow), np.float32)
    for y, z in product(range(oh), range(ow)):
        iy = min(max(math.floor(y * (h / oh) + 0.5), 0), h - 1)
        iz = min(max(math.floor(z * (w / ow) + 0.5), 0), w - 1)
        out[:, :, y, z] = x[:, :, iy, iz]
    return out


def naive_bilinear(x: np.ndarray, oh: int, ow: int) -> np.ndarray:
    n, c, h, w = x.shape
    out = np.zeros((n, c, oh, ow))

    def source(o: int, size: int, out_size: int) -> tuple[int, int, float]:
        pos = max((o + 0.5) * size / out_size - 0.5, 0.0)  # clamping the position instead of the indices
        lo = min(math.floor(pos), size - 1)
        return lo, min(lo + 1, size - 1), pos - lo if lo < size - 1 else 0.0

    for y, z in product(range(oh), range(ow)):
        y0, y1, fy = source(y, h, oh)
        x0, x1, fx = source(z, w, ow)
        top = x[:, :, y0, x0] * (1 - fx) + x[:, :, y0, x1] * fx
        bottom = x[:, :, y1, x0] * (1 - fx) + x[:, :, y1, x1] * fx
        out[:, :, y, z] = top * (1 - fy) + bottom * fy
    return out


@pytest.mark.parametrize(
    ("in_hw", "out_hw"), [((8, 8), (4, 4)), ((5, 7), (3, 4)), ((4, 3), (7, 9)), ((6, 6), (6, 6))]
)
def test_resize2d_nchw(in_hw: tuple[int, int], out_hw: tuple[int, int]) -> None:
    x = rand(1, 2, *in_hw)
    np.testing.assert_array_equal(ref.resize2d_nchw(x, out_hw, "nearest"), naive_nearest(x, *out_hw))
    np.testing.assert_allclose(
        ref.resize2d_nchw(x, out_hw, "bilinear"), naive_bilinear(x, *out_hw), atol=1e-5
    )


def test_nearest_downsample_by_two_reads_even_pixels() -> None:
    np.testing.assert_array_equal(ref.nearest_indices(512, 256), np.arange(0, 512, 2))


def test_resize_rejects_unknown_method() -> None:
    with pytest.raises(ValueError, match="unknown method 'cubic'"):
        ref.resize2d_nchw(rand(1, 1, 2, 2), 4, "cubic")


def test_matmul_and_dense() -> None:
    a, b, bias = rand(3, 5), rand(5, 4), rand(4)
    want = np.array(
        [[sum(float(a[i, k]) * float(b[k, j]) for k in range(5)) for j in range(4)] for i in range(3)]
    )
    np.testing.assert_allclose(ref.matmul(a, b), want, atol=1e-5)
    np.testing.assert_allclose(ref.dense(a, np.ascontiguousarray(b.T)), want, atol=1e-5)
    np.testing.assert_allclose(ref.dense(a, np.ascontiguousarray(b.T), bias), want + bias, atol=1e-5)


def test_elementwise() -> None:
    x, y = rand(3, 4) * 8, rand(3, 4)
    want_relu = np.array([[v if v > 0 else 0.0 for v in row] for row in x])
    want_relu6 = np.array([[min(v, 6.0) if v > 0 else 0.0 for v in row] for row in x])
    np.testing.assert_array_equal(ref.relu(x), want_relu)
    np.testing.assert_array_equal(ref.relu6(x), want_relu6)
    np.testing.assert_array_equal(
        ref.add(x, y), np.array([[p + q for p, q in zip(r, s)] for r, s in zip(x, y)])
    )
    assert ref.relu6(x).dtype == np.float32


FLOAT32_CASES = {
    "conv2d_nhwc": lambda x: ref.conv2d_nhwc(x, rand(3, 3, 4, 2), 1, 1),
    "conv2d_nchw": lambda x: ref.conv2d_nchw(x, rand(2, 4, 3, 3), 2, 1),
    "depthwise_conv2d_nhwc": lambda x: ref.depthwise_conv2d_nhwc(x, rand(3, 3, 4)),
    "max_pool2d": lambda x: ref.max_pool2d(x, 3, 1, 1),
    "avg_pool2d": lambda x: ref.avg_pool2d(x, 2, 2),
    "global_avg_pool_nhwc": ref.global_avg_pool_nhwc,
    "resize2d_nchw": lambda x: ref.resize2d_nchw(x, (3, 5), "bilinear"),
    "dense": lambda x: ref.dense(x[0, 0], rand(2, 4), rand(2)),
}


@pytest.mark.parametrize("name", sorted(FLOAT32_CASES))
def test_references_return_float32(name: str) -> None:
    assert FLOAT32_CASES[name](rand(1, 4, 4, 4)).dtype == np.float32
