"""The registry of named operator chains.

A builder turns integer parameters into a :class:`Chain` (the function, its
numpy reference, its flop count and the scale of each input); ``register``
names it with its defaults, and :func:`get` makes the :class:`Workload`::

    @register("pool_chain", "two 3x3 max pools", height=132, width=132, channels=64)
    def pool_chain(height: int, width: int, channels: int) -> Chain: ...

    wl = get("pool_chain", height=20, width=20, channels=8)
"""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from math import prod, sqrt
from typing import Any

import numpy as np

from .. import ir
from ..errors import ConfigError
from .arrays import aligned_array

Reference = Callable[..., tuple[np.ndarray, ...]]
"""Takes the input arrays in ``func.inputs`` order, returns the outputs in ``func.outputs`` order."""


@dataclass(frozen=True)
class Chain:
    """What a builder returns: everything about a workload that depends on its parameters.

    ``input_scales[i]`` bounds the random values of input ``i``: 1.0 for data,
    ``1/sqrt(fan_in)`` for weights (see :func:`fan_in_scale`).
    """

    func: ir.Func
    reference: Reference
    flops: int
    input_scales: tuple[float, ...]

    def __post_init__(self) -> None:
        if len(self.input_scales) != len(self.func.inputs):
            raise ValueError(
                f"chain {self.func.name}: {len(self.input_scales)} input scales for {len(self.func.inputs)} inputs"
            )


@dataclass(frozen=True)
class Workload:
    """A named chain instantiated with parameters: its function, reference and figures.

    ``flops`` counts a multiply-add as 2 (see :mod:`autotune.workloads.flops`);
    ``intermediate_bytes`` is the size of every stage output that is not a
    function output (the workspace of the unscheduled chain).
    """

    name: str
    params: dict[str, int]
    func: ir.Func
    reference: Reference
    description: str
    flops: int
    intermediate_bytes: int
    input_scales: tuple[float, ...]

    def make_inputs(self, seed: int) -> tuple[np.ndarray, ...]:
        """Random float32 inputs in ``func.inputs`` order, uniform in ``[-scale, scale]``, seeded,
        each with a 64-byte aligned base (:mod:`autotune.workloads.arrays`)."""
        rng = np.random.default_rng(seed)
        return tuple(
            aligned_array((rng.uniform(-1.0, 1.0, size=buf.const_shape()) * scale).astype(np.float32))
            for buf, scale in zip(self.func.inputs, self.input_scales)
        )


def fan_in_scale(fan_in: int) -> float:
    """The bound ``1/sqrt(fan_in)`` of a weight's random values."""
    return 1.0 / sqrt(fan_in)


def intermediate_bytes(func: ir.Func) -> int:
    """Bytes of every buffer the function stores to that is not one of its parameters."""
    params = set(func.params)
    stored: dict[ir.Buffer, None] = {}
    for store in ir.collect(func.body, ir.BufferStore):
        if store.buffer not in params:
            stored.setdefault(store.buffer, None)
    return sum(prod(b.const_shape()) * ir.dtype_bytes(b.dtype) for b in stored)


Builder = Callable[..., Chain]


@dataclass(frozen=True)
class _Entry:
    name: str
    description: str
    defaults: dict[str, int]
    builder: Builder


_REGISTRY: dict[str, _Entry] = {}


def register(name: str, description: str, **defaults: int) -> Callable[[Builder], Builder]:
    """Register a builder under ``name``; ``defaults`` are its parameters and their default values."""

    def decorate(builder: Builder) -> Builder:
        if name in _REGISTRY:
            raise ValueError(f"workload {name!r} is registered twice")
        accepted = list(inspect.signature(builder).parameters)
        if accepted != list(defaults):
            raise ValueError(f"workload {name!r}: builder takes {accepted}, defaults give {list(defaults)}")
        _REGISTRY[name] = _Entry(name, description, dict(defaults), builder)
        return builder

    return decorate


def names() -> list[str]:
    """The registered workload names, sorted."""
    return sorted(_REGISTRY)


def _suggest(word: str, options: list[str]) -> str:
    close = difflib.get_close_matches(word, options, n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _entry(name: str) -> _Entry:
    entry = _REGISTRY.get(name)
    if entry is None:
        known = names()
        raise ConfigError(
            f"unknown workload {name!r}{_suggest(name, known)}; known workloads: {', '.join(known)}"
        )
    return entry


def describe(name: str) -> dict[str, int]:
    """The parameters of workload ``name`` with their default values."""
    return dict(_entry(name).defaults)


def description(name: str) -> str:
    """The one-line description of workload ``name``."""
    return _entry(name).description


def _check_params(entry: _Entry, params: dict[str, Any]) -> dict[str, int]:
    accepted = list(entry.defaults)
    for key in params:
        if key not in entry.defaults:
            raise ConfigError(
                f"workload {entry.name!r} has no parameter {key!r}{_suggest(key, accepted)}; "
                f"accepted parameters: {', '.join(accepted)}"
            )
    merged = {**entry.defaults, **params}
    for key, value in merged.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigError(
                f"workload {entry.name!r}: parameter {key!r} must be a positive integer, got {value!r}"
            )
    return merged


def get(name: str, **params: Any) -> Workload:
    """The workload ``name`` built with its defaults overridden by ``params``.

    Raises ConfigError for an unknown name or parameter, a value that is not a
    positive integer, or parameters the chain cannot be built with.
    """
    entry = _entry(name)
    merged = _check_params(entry, params)
    try:
        chain = entry.builder(**merged)
    except ValueError as err:
        shown = ", ".join(f"{k}={v}" for k, v in merged.items())
        raise ConfigError(f"workload {name!r} cannot be built with {shown}: {err}") from err
    return Workload(
        name=name,
        params=merged,
        func=chain.func,
        reference=chain.reference,
        description=entry.description,
        flops=chain.flops,
        intermediate_bytes=intermediate_bytes(chain.func),
        input_scales=chain.input_scales,
    )
