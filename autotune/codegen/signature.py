"""What a generated kernel takes: its parameter and storage arguments, and the source as a whole."""

from __future__ import annotations

from dataclasses import dataclass
from math import prod

from .. import ir
from ..errors import CodegenError

__all__ = ["KernelSource", "NestModule", "ParamArg", "StorageArg"]


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

    def placed(self) -> tuple[tuple[str, int], ...] | None:
        """``(pool, offset)`` of each bank, from the annotations ``pool`` and ``offset`` that the
        memory-planning pass writes (tuples with one entry per bank for a banked allocation);
        None without them. CodegenError when they do not give one entry per bank."""
        pool, offset = ir.ann_get(self.annotations, "pool"), ir.ann_get(self.annotations, "offset")
        if pool is None or offset is None:
            return None
        pools = pool if isinstance(pool, tuple) else (pool,)
        offsets = offset if isinstance(offset, tuple) else (offset,)
        if len(pools) != self.banks or len(offsets) != self.banks:
            raise CodegenError(
                f"codegen: allocation {self.name} has {self.banks} bank(s) but annotations "
                f"pool={pool!r} offset={offset!r}"
            )
        return tuple((str(p), int(o)) for p, o in zip(pools, offsets))

    def may_share_bytes(self, other: StorageArg) -> bool:
        """Whether the two allocations may be on a common byte: planned (:meth:`placed`) on
        overlapping bytes of a pool (the planner puts allocations whose lifetimes do not meet on
        the same bytes), or either without a placement (a plan handed to
        :func:`~autotune.codegen.build` places it by its name, anywhere)."""
        mine, theirs = self.placed(), other.placed()
        if mine is None or theirs is None:
            return True
        size = self.bank_elems * ir.dtype_bytes(self.dtype)
        other_size = other.bank_elems * ir.dtype_bytes(other.dtype)
        return any(p == q and o < r + other_size and r < o + size for p, o in mine for q, r in theirs)

    def is_whole(self, buf: ir.Buffer) -> bool:
        """Whether ``buf`` is this storage itself (flat, of its dtype and all its elements): the
        kernel then names the buffer by the storage argument, with no view of it."""
        try:
            shape = buf.const_shape()
        except ValueError:  # a symbolic shape
            return False
        return not self.banked and buf.dtype == self.dtype and shape == (self.bank_elems,)


@dataclass(frozen=True, slots=True)
class NestModule:
    """An outlined nest (:mod:`~autotune.codegen.outline`) as the module it is compiled in.

    ``text`` is the module: the nest as the function ``nest``, the constants it uses renumbered
    from ``_c0`` in order of first use, its vectoriser in a comment; it depends on the nest's code
    only, so kernels that share the nest share the module (:func:`~autotune.codegen.build`
    content-addresses it). ``definition`` is the same function as written in the kernel's text,
    under the kernel's ``name`` for it.
    """

    name: str
    vectorizer: str
    text: str
    definition: str


@dataclass(frozen=True, slots=True)
class KernelSource:
    """The text of a kernel module and what its caller must hand the kernel.

    ``text`` is complete and standalone: the outlined nests are defined in it. The module that
    :func:`~autotune.codegen.build` imports is :meth:`module_text`, which imports each nest from
    its own module instead.
    """

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
    """Their vectoriser: numba compiles them when their modules are imported, which must happen with it set."""
    nests: tuple[NestModule, ...] = ()
    """The outlined nests as modules of their own, in the order of ``outlined``."""
    bodies: tuple[str, ...] = ()
    """The functions of the parallel loops' bodies, defined in the kernel's own module (they call
    the outlined nests; the kernel calls them by their symbol)."""

    @property
    def arg_names(self) -> tuple[str, ...]:
        return tuple(p.arg for p in self.params) + tuple(s.arg for s in self.storage)

    def module_text(self, modules: dict[str, str]) -> str:
        """``text`` with each nest's definition replaced by ``from <module> import nest as <name>``,
        ``modules`` mapping each nest's name to the module that defines it."""
        text = self.text
        for nest in self.nests:
            text = text.replace(nest.definition, f"from {modules[nest.name]} import nest as {nest.name}\n", 1)
        return text
