"""Statement nodes, blocks and functions."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .buffer import Buffer, BufferRegion, Range
from .expr import BOOL, Expr, IntImm, Node, Var, const

Annotations = tuple[tuple[str, Any], ...]
"""An annotation map kept as a key-sorted tuple of pairs, so nodes stay hashable."""

TRUE = IntImm(1, BOOL)


def ann_get(annotations: Annotations, key: str, default: Any = None) -> Any:
    for k, v in annotations:
        if k == key:
            return v
    return default


def ann_set(annotations: Annotations, key: str, value: Any) -> Annotations:
    """A new annotation map with ``key`` set (``value=None`` removes it)."""
    items = {k: v for k, v in annotations if k != key}
    if value is not None:
        items[key] = value
    return tuple(sorted(items.items()))


class Stmt(Node):
    __slots__ = ()


@dataclass(frozen=True, slots=True)
class BufferStore(Stmt):
    buffer: Buffer
    value: Expr
    indices: tuple[Expr, ...]

    def __post_init__(self) -> None:
        if not all(isinstance(i, Expr) for i in self.indices):
            object.__setattr__(self, "indices", tuple(const(i) for i in self.indices))


@dataclass(frozen=True, slots=True)
class SeqStmt(Stmt):
    seq: tuple[Stmt, ...]


class ForKind:
    SERIAL = "serial"
    PARALLEL = "parallel"
    VECTORIZED = "vectorized"
    UNROLLED = "unroll"
    ALL = (SERIAL, PARALLEL, VECTORIZED, UNROLLED)


@dataclass(frozen=True, slots=True)
class For(Stmt):
    loop_var: Var
    min: Expr
    extent: Expr
    kind: str
    body: Stmt
    annotations: Annotations = ()


@dataclass(frozen=True, slots=True)
class IfThenElse(Stmt):
    condition: Expr
    then_case: Stmt
    else_case: Stmt | None = None


@dataclass(frozen=True, slots=True)
class Allocate(Stmt):
    """Allocate storage ``data`` of ``extents`` (N-d when the buffer keeps axis separators).

    ``annotations`` carries ``candidate_memory_pools`` (RFC 0023) and, after
    planning, ``pool`` and ``offset`` per physical axis-0 slice.
    """

    data: Var
    dtype: str
    extents: tuple[Expr, ...]
    body: Stmt
    annotations: Annotations = ()


@dataclass(frozen=True, slots=True)
class DeclBuffer(Stmt):
    """Declare ``buffer`` (a view on its ``data``) for the scope of ``body``."""

    buffer: Buffer
    body: Stmt


@dataclass(frozen=True, slots=True)
class Evaluate(Stmt):
    value: Expr


@dataclass(frozen=True, slots=True)
class IterVar(Node):
    var: Var
    dom: Range
    kind: str  # "spatial" or "reduce"


@dataclass(frozen=True, slots=True)
class Block(Stmt):
    """A block and its realisation (TVM's Block + BlockRealize in one node).

    ``bindings[i]`` is the value of ``iter_vars[i]`` in terms of the enclosing
    loop variables; ``predicate`` guards the whole block.
    """

    name: str
    iter_vars: tuple[IterVar, ...]
    bindings: tuple[Expr, ...]
    body: Stmt
    reads: tuple[BufferRegion, ...] = ()
    writes: tuple[BufferRegion, ...] = ()
    init: Stmt | None = None
    alloc_buffers: tuple[Buffer, ...] = ()
    annotations: Annotations = ()
    predicate: Expr = TRUE


COPY_PAD_ATTR = "autotune.copy_pad"
"""Parallel loop attribute, bytes: the threads' private copies of a buffer (compaction gives each
iteration its own) are each followed by at least this many untouched bytes (``parallel(loop, copy_pad=...)``)."""

COPY_PAD_UNIT = 64
"""``copy_pad`` is a multiple of this many bytes (a cache line, and so of every element size), and
padded copies start at multiples of it from the first."""

ROLLING_ATTR = "rolling_buffer"
"""Block annotation of ``rolling_buffer``: (buffer, dimension, loop, window, stride)."""

UNROLL_LIMIT = 64
"""The longest ``unroll`` loop (and the most iterations of an unrolled reduction) the code generator
writes out as straight-line copies; a longer one stays a loop."""

VECTORIZER_ATTR = "autotune.vectorizer"
"""Function or loop attribute: ``loop`` (default) or ``slp``, how LLVM vectorises the kernel, or the
loop's nest, which the code generator then outlines into a function of its own (``set_vectorizer``)."""


@dataclass(frozen=True, slots=True)
class Func(Node):
    """A function over buffers: ``params`` are inputs followed by ``num_outputs`` outputs."""

    name: str
    params: tuple[Buffer, ...]
    body: Stmt
    num_outputs: int = 1
    attrs: Annotations = ()

    @property
    def inputs(self) -> tuple[Buffer, ...]:
        return self.params[: len(self.params) - self.num_outputs]

    @property
    def outputs(self) -> tuple[Buffer, ...]:
        return self.params[len(self.params) - self.num_outputs :]


def seq(*stmts: Stmt) -> Stmt:
    """A SeqStmt with nested sequences flattened; a single statement is returned as is."""
    flat: list[Stmt] = []
    for s in stmts:
        if isinstance(s, SeqStmt):
            flat.extend(s.seq)
        else:
            flat.append(s)
    return flat[0] if len(flat) == 1 else SeqStmt(tuple(flat))
