"""Storage that several buffers view: ``DeclBuffer`` aliases of another buffer's data (tvm-rfcs 0063).

A buffer allocated by a block (``alloc_buffers``) or passed as a parameter owns its
storage; a ``DeclBuffer`` of another buffer on the same ``data`` is a view of it, which
may have its own shape, its own dtype (the bytes reinterpreted) and an ``elem_offset``.
Analyses that follow buffers by identity (regions, producers and consumers) do not
see through a view, so the passes and primitives that rely on them ask here first.
"""

from __future__ import annotations

from .buffer import Buffer
from .expr import Var
from .functor import collect
from .stmt import Block, DeclBuffer, Func


def storage_views(func: Func) -> dict[Var, tuple[Buffer, ...]]:
    """Per storage that a ``DeclBuffer`` views through another buffer than its owner: the owner
    (the allocated buffer or parameter) followed by every view, in program order."""
    owners: dict[Var, Buffer] = {p.data: p for p in func.params}
    for block in collect(func.body, Block):
        for buf in block.alloc_buffers:
            owners.setdefault(buf.data, buf)
    found: dict[Var, list[Buffer]] = {}
    for decl in collect(func.body, DeclBuffer):
        owner = owners.get(decl.buffer.data)
        if owner is not None and decl.buffer is not owner:
            found.setdefault(owner.data, [owner]).append(decl.buffer)
    return {data: tuple(bufs) for data, bufs in found.items()}


def aliased_buffers(func: Func) -> dict[Buffer, tuple[Buffer, ...]]:
    """Every buffer on storage that has views, mapped to all the buffers on that storage."""
    return {b: group for group in storage_views(func).values() for b in group}
