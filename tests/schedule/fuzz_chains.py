"""Small random operator chains for the schedule fuzzer, each with a numpy reference.

A chain is drawn through a :class:`Chooser`, so one generator serves hypothesis (the
test, which shrinks a failing example) and ``random.Random`` (the long experiment run).
Families: NHWC (conv2d, depthwise, max/avg pool, relu, relu6, a diamond joined by add,
optionally ending in a global average pool), NCHW (conv2d, resize, relu) and dense
(dense with or without bias, relu, ending in a reduction). Data types are float32,
int32 and int8; integer chains skip the operators whose integer meaning differs from
numpy's (averages, resize), and int8 chains hold at most one sum of products over values in
[-1, 1], so no stage leaves int8 (a padded int8 convolution computes through float32, whose
conversion back is undefined outside the range).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import numpy as np

from autotune import ir, te
from autotune.workloads import ops
from autotune.workloads import reference as ref

T = TypeVar("T")


class Chooser(Protocol):
    def int(self, lo: int, hi: int) -> int:
        """An integer in ``[lo, hi]``."""

    def pick(self, items: Sequence[T]) -> T:
        """One of ``items`` (not empty)."""


class RandomChooser:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def int(self, lo: int, hi: int) -> int:
        return self.rng.randint(lo, hi)

    def pick(self, items: Sequence[T]) -> T:
        return items[self.rng.randrange(len(items))]


class HypothesisChooser:
    def __init__(self, data: Any) -> None:
        from hypothesis import strategies as st

        self.data, self.st = data, st

    def int(self, lo: int, hi: int) -> int:
        return int(self.data.draw(self.st.integers(lo, hi)))

    def pick(self, items: Sequence[T]) -> T:
        return items[self.int(0, len(items) - 1)]


Ref = Callable[[dict[str, np.ndarray]], np.ndarray]
CONTRACTIONS = ("conv", "depthwise")


@dataclass
class Value:
    """A tensor of the chain being built and how numpy computes it from the inputs by name."""

    tensor: te.Tensor
    ref: Ref


@dataclass(frozen=True)
class FuzzChain:
    """A drawn chain: its function, its inputs (seeded), the expected outputs and its description."""

    func: ir.Func
    inputs: tuple[np.ndarray, ...]
    expected: tuple[np.ndarray, ...]
    description: str


class _Builder:
    def __init__(self, ch: Chooser, dtype: str) -> None:
        self.ch, self.dtype = ch, dtype
        self.inputs: list[te.Tensor] = []
        self.steps: list[str] = []
        self.count = 0
        self.contractions = 0

    @property
    def full(self) -> bool:
        """Whether another sum of products could leave int8 (one is at most 27 products of values in [-1, 1])."""
        return self.dtype == "int8" and self.contractions > 0

    @property
    def integer(self) -> bool:
        return self.dtype != "float32"

    def input(self, shape: tuple[int, ...], stem: str) -> Value:
        t = te.placeholder(shape, self.dtype, name=f"{stem}{len(self.inputs)}")
        self.inputs.append(t)
        name = t.name
        return Value(t, lambda env: env[name])

    def name(self, stem: str) -> str:
        self.count += 1
        return f"{stem}{self.count}"

    def wrap(self, x: np.ndarray) -> np.ndarray:
        """``x`` stored in the chain's dtype (integers wrap, as the kernel's stores do)."""
        if self.integer:
            return np.asarray(x, np.float64).astype(np.int64).astype(self.dtype)
        return np.asarray(x, np.float32)

    def stage(self, tensor: te.Tensor, fn: Callable[..., np.ndarray], *args: Value, text: str) -> Value:
        self.steps.append(text)
        refs = [a.ref for a in args]
        return Value(tensor, lambda env: self.wrap(fn(*(self.as_float(r(env)) for r in refs))))

    def as_float(self, x: np.ndarray) -> np.ndarray:
        return x.astype(np.float64) if self.integer else x


def _spatial_op(b: _Builder, x: Value, layout: str) -> Value | None:
    """One window or elementwise stage on 4-d data, or None when the drawn window does not fit."""
    ch, t = b.ch, x.tensor
    choices = ["conv", "relu", "relu6"] + (["depthwise", "max_pool", "avg_pool"] if layout == "NHWC" else ["resize"])
    op = ch.pick([c for c in choices if not (b.integer and c in ("avg_pool", "resize")) and not (c in CONTRACTIONS and b.full)])
    b.contractions += op in CONTRACTIONS
    k, stride, pad = ch.int(1, 3), ch.int(1, 2), ch.int(0, 1)
    cin = t.shape[3] if layout == "NHWC" else t.shape[1]
    try:
        if op == "relu":
            return b.stage(ops.relu(t, name=b.name("relu")), ref.relu, x, text="relu")
        if op == "relu6":
            return b.stage(ops.relu6(t, name=b.name("relu6")), ref.relu6, x, text="relu6")
        if op == "conv":
            cout = ch.int(1, 3)
            if layout == "NHWC":
                w = b.input((k, k, cin, cout), "w")
                out = ops.conv2d_nhwc(t, w.tensor, stride, pad, name=b.name("conv"))
                fn: Callable[..., np.ndarray] = lambda d, wt: ref.conv2d_nhwc(d, wt, stride, pad)  # noqa: E731
            else:
                w = b.input((cout, cin, k, k), "w")
                out = ops.conv2d_nchw(t, w.tensor, stride, pad, name=b.name("conv"))
                fn = lambda d, wt: ref.conv2d_nchw(d, wt, stride, pad)  # noqa: E731
            return b.stage(out, fn, x, w, text=f"conv{k}x{k}/s{stride}/p{pad}x{cout}")
        if op == "depthwise":
            w = b.input((k, k, cin), "w")
            out = ops.depthwise_conv2d_nhwc(t, w.tensor, stride, pad, name=b.name("dw"))
            return b.stage(out, lambda d, wt: ref.depthwise_conv2d_nhwc(d, wt, stride, pad), x, w, text=f"dw{k}x{k}/s{stride}/p{pad}")
        if op in ("max_pool", "avg_pool"):
            k = max(k, 2)
            pad = min(pad, k // 2)
            make, fn = (ops.max_pool2d, ref.max_pool2d) if op == "max_pool" else (ops.avg_pool2d, ref.avg_pool2d)
            out = make(t, k, stride, pad, name=b.name(op.split("_")[0]))
            return b.stage(out, lambda d: fn(d, k, stride, pad), x, text=f"{op}{k}/s{stride}/p{pad}")
        size = (ch.int(2, 6), ch.int(2, 6))
        out = ops.resize2d_nchw(t, size, "nearest", name=b.name("resize"))
        return b.stage(out, lambda d: ref.resize2d_nchw(d, size, "nearest"), x, text=f"resize{size}")
    except ValueError:
        return None


def _diamond(b: _Builder, x: Value) -> Value:
    """One stage read by two branches that an add joins (NHWC)."""
    left = b.stage(ops.relu(x.tensor, name=b.name("relu")), ref.relu, x, text="relu")
    if b.ch.int(0, 1):
        right = b.stage(ops.max_pool2d(x.tensor, 3, 1, 1, name=b.name("pool")), lambda d: ref.max_pool2d(d, 3, 1, 1), x, text="max_pool3/s1/p1")
    else:
        right = b.stage(ops.relu6(x.tensor, name=b.name("relu6")), ref.relu6, x, text="relu6")
    out = ops.add(left.tensor, right.tensor, name=b.name("add"))
    return b.stage(out, ref.add, left, right, text="add")


def _image_chain(b: _Builder, layout: str) -> Value:
    ch = b.ch
    c, h, w = ch.int(1, 3), ch.int(3, 7), ch.int(3, 6)
    x = b.input((1, h, w, c) if layout == "NHWC" else (1, c, h, w), "x")
    for _ in range(ch.int(1, 3)):
        y = _spatial_op(b, x, layout)
        x = y if y is not None else x
    if layout == "NHWC" and ch.int(0, 3) == 0:
        x = _diamond(b, x)
    if layout == "NHWC" and not b.integer and ch.int(0, 4) == 0:
        x = b.stage(ops.global_avg_pool_nhwc(x.tensor, name=b.name("gap")), ref.global_avg_pool_nhwc, x, text="global_avg_pool")
    if not b.steps:
        x = b.stage(ops.relu(x.tensor, name=b.name("relu")), ref.relu, x, text="relu")
    return x


def _dense_chain(b: _Builder) -> Value:
    ch = b.ch
    x = b.input((ch.int(1, 3), ch.int(2, 5)), "x")
    if ch.int(0, 2) == 0:
        x = b.stage(ops.relu(x.tensor, name=b.name("relu")), ref.relu, x, text="relu")
    for layer in range(1 if b.dtype == "int8" else ch.int(1, 2)):
        units = ch.int(1, 4)
        w = b.input((units, x.tensor.shape[1]), "w")
        bias = b.input((units,), "b") if ch.int(0, 1) else None
        out = ops.dense(x.tensor, w.tensor, bias.tensor if bias else None, name=b.name("dense"))
        args = (x, w) if bias is None else (x, w, bias)
        x = b.stage(out, ref.dense, *args, text="dense+bias" if bias else "dense")
        if layer == 0 and ch.int(0, 1):
            x = b.stage(ops.relu(x.tensor, name=b.name("relu")), ref.relu, x, text="relu")
    return x


def draw_chain(ch: Chooser) -> FuzzChain:
    """A random chain of one to about five stages, with seeded inputs and its expected output."""
    dtype = ch.pick(["float32", "float32", "int32", "int8"])
    b = _Builder(ch, dtype)
    family = ch.pick(["NHWC", "NHWC", "NCHW", "dense"])
    out = _dense_chain(b) if family == "dense" else _image_chain(b, family)
    func = te.create_func(b.inputs, [out.tensor], name="fuzz")
    rng = np.random.default_rng(ch.int(0, 1000))
    arrays = []
    for t in b.inputs:
        if b.integer:
            bound = 1 if dtype == "int8" else 2
            a = rng.integers(-bound, bound + 1, size=t.shape).astype(dtype)
        else:
            a = rng.uniform(-1.0, 1.0, size=t.shape).astype(np.float32)
        arrays.append(a)
    env = {t.name: a for t, a in zip(b.inputs, arrays)}
    expected = np.asarray(out.ref(env)).astype(dtype)
    return FuzzChain(func, tuple(arrays), (expected,), f"{family} {dtype}: {' -> '.join(b.steps)}")
