"""What a generated kernel takes: its parameter and storage arguments, and the source as a whole."""

from __future__ import annotations

from dataclasses import dataclass
from math import prod

from .. import ir

__all__ = ["KernelSource", "ParamArg", "StorageArg"]


@dataclass(frozen=True, slots=True)
class ParamArg:
    """A kernel argument for a function parameter: a numpy array of ``shape`` and ``dtype``."""

    arg: str
    buffer: str
    shape: tuple[int, ...]
    dtype: str


@dataclass(frozen=True, slots=True)
class StorageArg:
    """A kernel argument for one ``Allocate``: a 1-d array, or a tuple of ``banks`` 1-d arrays.

    ``name`` is the allocation's name (its data variable's name without ``_data``),
    which the memory plan uses; ``annotations`` are the ``Allocate``'s (``pool`` and
    ``offset`` after planning).
    """

    arg: str
    name: str
    dtype: str
    extents: tuple[int, ...]
    annotations: ir.Annotations = ()

    @property
    def banked(self) -> bool:
        """Whether the storage is N-d: a tuple of 1-d arrays rather than one array."""
        return len(self.extents) > 1

    @property
    def banks(self) -> int:
        """How many 1-d arrays back the storage (1 unless banked)."""
        return prod(self.extents[:-1])

    @property
    def bank_elems(self) -> int:
        """Elements of each 1-d array."""
        return self.extents[-1]

    @property
    def nbytes(self) -> int:
        return prod(self.extents) * ir.dtype_bytes(self.dtype)


@dataclass(frozen=True, slots=True)
class KernelSource:
    """The text of a kernel module and what its caller must hand the kernel."""

    name: str
    text: str
    params: tuple[ParamArg, ...]
    storage: tuple[StorageArg, ...]
    parallel: bool
    """Whether the schedule has a parallel loop (the kernel runs on the thread pool); a serial
    kernel runs on one thread, as a one-iteration ``prange`` all the same."""
    vectorizer: str = "loop"
    outlined: tuple[str, ...] = ()
    """The functions of nests outlined with the other vectoriser (:mod:`~autotune.codegen.outline`)."""
    outlined_vectorizer: str | None = None
    """Their vectoriser: numba compiles them when the module is imported, which must happen with it set."""

    @property
    def arg_names(self) -> tuple[str, ...]:
        return tuple(p.arg for p in self.params) + tuple(s.arg for s in self.storage)
