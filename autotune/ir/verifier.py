"""Structural checks of a function: defined variables, buffers in scope, consistent regions."""

from __future__ import annotations

from math import prod
from typing import Any

from ..errors import IRError
from . import expr as E
from .buffer import DTYPE_BYTES, Buffer, BufferRegion
from .functor import Visitor
from .stmt import Allocate, Block, BufferStore, DeclBuffer, For, Func


class _Verifier(Visitor):
    def __init__(self, func: Func) -> None:
        self.func = func
        self.vars: list[set[E.Var]] = [set()]
        self.buffers: list[set[Buffer]] = [set(func.params)]
        self.data: list[set[E.Var]] = [{b.data for b in func.params}]
        self.errors: list[str] = []
        self.storage_bytes: dict[E.Var, int] = {}  # the bytes of each storage, where known
        for p in func.params:
            self._owner(p, "parameter")

    def _defined(self, v: E.Var) -> bool:
        return any(v in scope for scope in self.vars)

    def _in_scope(self, b: Buffer) -> bool:
        return any(b in scope for scope in self.buffers)

    def _push(self, vars_: set[E.Var] = frozenset(), bufs: set[Buffer] = frozenset(), data: set[E.Var] = frozenset()) -> None:  # type: ignore[assignment]
        self.vars.append(set(vars_))
        self.buffers.append(set(bufs))
        self.data.append(set(data))

    def _pop(self) -> None:
        self.vars.pop()
        self.buffers.pop()
        self.data.pop()

    def visit_Var(self, v: E.Var) -> None:
        if not self._defined(v):
            self.errors.append(f"variable '{v.name}' is used outside the loop or block that defines it")

    def visit_buffer(self, b: Buffer) -> None:
        if not self._in_scope(b):
            self.errors.append(f"buffer '{b.name}' is used out of scope")

    def visit_BufferStore(self, s: BufferStore) -> None:
        self._check_rank(s.buffer, len(s.indices), "store")
        self.generic_visit(s)

    def visit_BufferLoad(self, e: E.BufferLoad) -> None:
        self._check_rank(e.buffer, len(e.indices), "load")
        self.generic_visit(e)

    def _check_rank(self, b: Buffer, n: int, what: str) -> None:
        if n != b.ndim:
            self.errors.append(f"{what} of buffer '{b.name}' has {n} indices, the buffer has {b.ndim} dimensions")

    def visit_BufferRegion(self, r: BufferRegion) -> None:
        if len(r.region) != r.buffer.ndim:
            self.errors.append(f"region of '{r.buffer.name}' has {len(r.region)} ranges, the buffer has {r.buffer.ndim} dimensions")
        for i, rng in enumerate(r.region):
            ext = E.as_int(rng.extent)
            if ext is not None and ext <= 0:
                self.errors.append(f"region of '{r.buffer.name}' has extent {ext} in dimension {i}")
            lo, dim = E.as_int(rng.min), E.as_int(r.buffer.shape[i])
            if lo is not None and ext is not None and dim is not None and (lo < 0 or lo + ext > dim):
                self.errors.append(f"region of '{r.buffer.name}' [{lo}, {lo + ext}) leaves dimension {i} of extent {dim}")
        self.generic_visit(r)

    def visit_For(self, s: For) -> None:
        self.visit(s.min)
        self.visit(s.extent)
        self._push(vars_={s.loop_var})
        self.visit(s.body)
        self._pop()

    def _owner(self, b: Buffer, what: str) -> None:
        """``b`` owns its storage: it starts there, and its size is the storage's."""
        if E.as_int(b.elem_offset) != 0:
            self.errors.append(f"{what} '{b.name}' has elem_offset {b.elem_offset}; only a view (DeclBuffer) may start inside its storage")
        size = _bytes(b, 0)
        if size is not None:
            self.storage_bytes[b.data] = size

    def _check_view(self, b: Buffer) -> None:
        """A view must fit inside the storage it views: its offset plus its extent, in bytes."""
        have = self.storage_bytes.get(b.data)
        need = _bytes(b, E.as_int(b.elem_offset))
        if have is not None and need is not None and need > have:
            self.errors.append(
                f"buffer '{b.name}' views {need} bytes of storage '{b.data.name}' (elem_offset {b.elem_offset}, "
                f"{b.dtype}), which holds {have}"
            )

    def visit_Block(self, s: Block) -> None:
        for buf in s.alloc_buffers:
            self._owner(buf, "allocated buffer")
        for b in s.bindings:
            self.visit(b)
        self.visit(s.predicate)
        self._push(vars_={iv.var for iv in s.iter_vars}, bufs=set(s.alloc_buffers), data={b.data for b in s.alloc_buffers})
        for region in (*s.reads, *s.writes):
            self.visit(region)
        if s.init is not None:
            self.visit(s.init)
        self.visit(s.body)
        self._pop()

    def visit_Allocate(self, s: Allocate) -> None:
        for e in s.extents:
            self.visit(e)
        extents = [E.as_int(e) for e in s.extents]
        if all(e is not None for e in extents) and s.dtype in DTYPE_BYTES:
            self.storage_bytes[s.data] = prod(extents) * DTYPE_BYTES[s.dtype]  # type: ignore[arg-type]
        self._push(data={s.data})
        self.visit(s.body)
        self._pop()

    def visit_DeclBuffer(self, s: DeclBuffer) -> None:
        if not any(s.buffer.data in scope for scope in self.data):
            self.errors.append(f"buffer '{s.buffer.name}' is declared on storage '{s.buffer.data.name}' that is not allocated here")
        self._check_view(s.buffer)
        self._push(bufs={s.buffer})
        self.visit(s.body)
        self._pop()


def _bytes(b: Buffer, offset: int | None) -> int | None:
    """The bytes ``b`` spans from the start of its storage, ``offset`` elements in; None if not constant."""
    if offset is None or b.dtype not in DTYPE_BYTES:
        return None
    try:
        span = prod(b.physical_shape())
    except ValueError:
        return None
    return (offset + span) * DTYPE_BYTES[b.dtype]


def verify(func: Func, where: str = "") -> Func:
    """Raise :class:`IRError` listing every problem found in ``func``; return it unchanged otherwise."""
    v = _Verifier(func)
    v.visit(func.body)
    if v.errors:
        unique: list[Any] = list(dict.fromkeys(v.errors))
        head = f"function '{func.name}' is malformed" + (f" after {where}" if where else "")
        raise IRError(head + ":\n  " + "\n  ".join(unique))
    return func
