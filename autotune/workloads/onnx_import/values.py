"""How the chain holds an ONNX tensor: a TE tensor in a physical axis order, and what is still to apply.

ONNX tensors are NCHW; the chain keeps 4-D tensors NHWC. A :class:`Value` records the ONNX shape
``dims`` and ``order`` (physical axis ``i`` is ONNX axis ``order[i]``), so the physical array is
``onnx_array.transpose(order).reshape(tensor.shape)`` (the reshape only adds or drops unit axes:
a global average pool's ``[N,C,1,1]`` is held as ``[N,C]``). A producer's per-channel ``bias`` and
``act`` are applied where a consumer reads the tensor (``data_bias``/``data_act``), or by an
elementwise stage when a consumer cannot (:func:`Converter.materialize`).

``array`` is the value as the chain computes it, evaluated with the numpy references on the seeded
input: the conversion is checked against the model on it before anything is compiled.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from ... import te
from ..ops import Activation

NHWC = (0, 2, 3, 1)


@dataclass(frozen=True)
class Value:
    tensor: te.Tensor
    dims: tuple[int, ...]
    order: tuple[int, ...]
    array: np.ndarray
    """Physical layout, ``tensor.shape``, with ``bias`` and ``act`` applied."""
    bias: te.Tensor | None = None
    act: Activation | None = None

    @property
    def view(self) -> tuple[int, ...]:
        """The ONNX shape in physical order (the tensor's shape up to unit axes)."""
        return tuple(self.dims[a] for a in self.order)

    @property
    def pending(self) -> bool:
        return self.bias is not None or self.act is not None


def to_physical(array: np.ndarray, order: tuple[int, ...], shape: tuple[int, ...]) -> np.ndarray:
    """An ONNX-layout array as the chain holds it."""
    return np.ascontiguousarray(array.transpose(order).reshape(shape))


def to_onnx(array: np.ndarray, dims: tuple[int, ...], order: tuple[int, ...]) -> np.ndarray:
    """A physical array in the ONNX layout ``dims``."""
    return np.ascontiguousarray(array.reshape([dims[a] for a in order]).transpose(np.argsort(order)))


def physical_order(ndim: int) -> tuple[int, ...]:
    """The order the chain holds a fresh ONNX tensor of ``ndim`` axes in: NHWC for 4-D."""
    return NHWC if ndim == 4 else tuple(range(ndim))


def relabel(
    value: Value,
    dims: tuple[int, ...],
    onnx_map: Callable[[np.ndarray], np.ndarray],
    hint: tuple[int, ...] | None,
) -> Value | None:
    """``value`` seen as the ONNX tensor ``onnx_map(value)`` of shape ``dims`` without moving any
    element (a transpose or reshape that the physical layout already is), or None if that needs a copy.

    The candidate orders are ``hint``, the identity and NHWC; each is checked on the positions of
    the elements.
    """
    positions = np.arange(value.array.size).reshape(value.tensor.shape)
    moved = onnx_map(to_onnx(positions, value.dims, value.order))
    if moved.shape != dims:
        return None
    candidates = [o for o in (hint, tuple(range(len(dims))), NHWC) if o is not None and len(o) == len(dims)]
    for order in candidates:
        if np.array_equal(to_physical(moved, order, value.tensor.shape), positions):
            return replace(value, dims=dims, order=order)
    return None


def per_channel(array: np.ndarray, value: Value) -> np.ndarray | None:
    """A constant (ONNX layout, broadcast against ``value``) as a per-channel vector of ``value``'s
    last physical axis, or None if it varies along another axis."""
    full = np.broadcast_to(array.astype(np.float32), value.dims)
    physical = full.transpose(value.order).reshape(value.tensor.shape)
    flat = physical.reshape(-1, physical.shape[-1])
    if not (flat == flat[:1]).all():
        return None
    return np.ascontiguousarray(flat[0])


def physical_constant(array: np.ndarray, value: Value) -> np.ndarray:
    """A constant broadcast against ``value`` in ``value``'s physical view, each axis along which it
    does not vary cut to extent 1 (so a scalar is ``[1, 1, 1, 1]``)."""
    full = np.broadcast_to(array.astype(np.float32), value.dims).transpose(value.order)
    index = tuple(
        slice(0, 1) if (full == full.take([0], axis=axis)).all() else slice(None) for axis in range(full.ndim)
    )
    return np.ascontiguousarray(full[index])
