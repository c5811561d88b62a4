"""Buffers, ranges and regions.

A :class:`Buffer` is a typed N-d view on storage named by its ``data`` variable.
Two buffers that share ``data`` alias the same storage (a ``DeclBuffer`` alias,
tvm-rfcs 0063). A view may start ``elem_offset`` elements (of its own dtype) into
the storage and may have another dtype than the buffer that allocates it (the bytes
reinterpreted); an allocated buffer or a parameter starts at its storage (offset 0). ``axis_separators`` split the logical axes into groups; each
group becomes one physical axis when the buffer is flattened, so a buffer with
separators stays N-d physically (for example two banks ``[2][4096]``).

``strides`` (empty: row-major) give, per dimension, its element stride inside
its axis group. A padded layout leaves a gap after each slice of a dimension:
compaction pads the threads' private copies of a buffer that way (strides
``[1456, 48, 1]`` for copies of a ``[9, 48]`` window with at least 4 KiB after
each). A group spans ``strides[lo] * shape[lo]`` elements, padding included.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, replace
from math import prod

from .expr import INT, Expr, ExprLike, IntImm, Node, Var, as_int, const

DTYPE_BYTES = {"float32": 4, "float64": 8, "int32": 4, "int64": 8, "int8": 1, "uint8": 1, "float16": 2, "bool": 1}


def dtype_bytes(dtype: str) -> int:
    try:
        return DTYPE_BYTES[dtype]
    except KeyError:
        raise ValueError(f"unknown dtype {dtype!r}") from None


ZERO = IntImm(0)
"""The ``elem_offset`` of a buffer that starts at its storage."""

REGISTER_SCOPE = "local"
"""The storage scope of buffers kept in registers: lowered to scalar variables, never planned in a pool."""


@dataclass(frozen=True, slots=True, eq=False)
class Buffer(Node):
    """A buffer, compared by identity. Build one with :func:`decl_buffer`."""

    name: str
    shape: tuple[Expr, ...]
    dtype: str
    data: Var
    strides: tuple[Expr, ...] = ()
    axis_separators: tuple[int, ...] = ()
    scope: str = "global"
    elem_offset: Expr = ZERO

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def const_shape(self) -> tuple[int, ...]:
        """The shape as Python ints; raises ValueError for a symbolic shape."""
        dims = tuple(as_int(d) for d in self.shape)
        if any(d is None for d in dims):
            raise ValueError(f"buffer {self.name} has a symbolic shape")
        return dims  # type: ignore[return-value]

    @property
    def nbytes(self) -> int:
        """The bytes its storage spans (padding between strided slices included)."""
        return prod(self.physical_shape()) * dtype_bytes(self.dtype)

    def groups(self) -> tuple[tuple[int, int], ...]:
        """The ``(lo, hi)`` dimension range of each axis group delimited by ``axis_separators``."""
        return tuple(itertools.pairwise((0, *self.axis_separators, self.ndim)))

    def element_strides(self) -> tuple[int, ...]:
        """Per dimension, its element stride inside its axis group: ``strides``, or row-major without them.

        Raises ValueError for a symbolic shape or stride.
        """
        shape = self.const_shape()
        if self.strides:
            strides = tuple(as_int(s) for s in self.strides)
            if len(strides) != len(shape) or any(s is None for s in strides):
                raise ValueError(f"buffer {self.name} has strides {list(map(str, self.strides))} for {len(shape)} dimensions")
            return strides  # type: ignore[return-value]
        return tuple(prod(shape[k + 1 : hi]) for lo, hi in self.groups() for k in range(lo, hi))

    def physical_shape(self) -> tuple[int, ...]:
        """One extent per axis group: ``strides[lo] * shape[lo]`` elements (row-major: the product of its
        dimensions; padded: the padding after the last slice included)."""
        shape, strides = self.const_shape(), self.element_strides()
        return tuple(strides[lo] * shape[lo] if hi > lo else 1 for lo, hi in self.groups())

    def __getitem__(self, indices: ExprLike | tuple[ExprLike, ...]) -> Expr:
        from .expr import BufferLoad

        if not isinstance(indices, tuple):
            indices = (indices,)
        return BufferLoad(self, tuple(const(i) for i in indices))

    def with_(self, **changes: object) -> Buffer:
        """A new buffer (new identity) with some fields changed; shares ``data`` unless given."""
        return replace(self, **changes)  # type: ignore[arg-type]

    def __repr__(self) -> str:
        return f"Buffer({self.name!r}, {self.const_shape() if all(as_int(d) is not None for d in self.shape) else self.shape})"


def decl_buffer(
    name: str,
    shape: tuple[ExprLike, ...] | list[ExprLike],
    dtype: str = "float32",
    *,
    data: Var | None = None,
    axis_separators: tuple[int, ...] = (),
    scope: str = "global",
    elem_offset: ExprLike = 0,
) -> Buffer:
    """Declare a buffer with fresh storage, or a view of ``data`` starting ``elem_offset`` elements in."""
    if data is None:
        data = Var(f"{name}_data", "handle")
    offset = const(elem_offset)
    if as_int(offset) is None or as_int(offset) < 0:  # type: ignore[operator]
        raise ValueError(f"buffer {name}: elem_offset must be a constant >= 0, got {elem_offset}")
    return Buffer(name, tuple(const(d) for d in shape), dtype, data, (), tuple(axis_separators), scope, offset)


@dataclass(frozen=True, slots=True)
class Range(Node):
    """The half-open interval ``[min, min + extent)``."""

    min: Expr
    extent: Expr

    @staticmethod
    def of(lo: ExprLike, extent: ExprLike) -> Range:
        return Range(const(lo), const(extent))


@dataclass(frozen=True, slots=True)
class BufferRegion(Node):
    buffer: Buffer
    region: tuple[Range, ...]

    @staticmethod
    def full(buffer: Buffer) -> BufferRegion:
        return BufferRegion(buffer, tuple(Range(IntImm(0, INT), d) for d in buffer.shape))
