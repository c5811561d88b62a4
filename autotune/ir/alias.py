"""Storage that several buffers view: ``DeclBuffer`` aliases of another buffer's data (tvm-rfcs 0063).

A buffer allocated by a block (``alloc_buffers``) or passed as a parameter owns its
storage; a ``DeclBuffer`` of another buffer on the same ``data`` is a view of it, which
may have its own shape, its own dtype (the bytes reinterpreted) and an ``elem_offset``.
Analyses that follow buffers by identity (regions, producers and consumers) do not
see through a view, so the passes and primitives that rely on them ask here first.
"""

from __future__ import annotations

from collections.abc import Iterator

from .buffer import Buffer
from .expr import Var
from .stmt import Allocate, Block, DeclBuffer, For, Func, IfThenElse, SeqStmt, Stmt


def statements(root: Stmt) -> Iterator[Stmt]:
    """Every statement under ``root`` (itself included) in program order, without walking
    expressions: blocks and declarations are found several times faster than by ``collect``."""
    stack = [root]
    while stack:
        s = stack.pop()
        yield s
        if isinstance(s, SeqStmt):
            stack.extend(reversed(s.seq))
        elif isinstance(s, Block):
            stack.append(s.body)
            if s.init is not None:
                stack.append(s.init)
        elif isinstance(s, (For, Allocate, DeclBuffer)):
            stack.append(s.body)
        elif isinstance(s, IfThenElse):
            if s.else_case is not None:
                stack.append(s.else_case)
            stack.append(s.then_case)


def storage_views(func: Func) -> dict[Var, tuple[Buffer, ...]]:
    """Per storage that a ``DeclBuffer`` views through another buffer than its owner: the owner
    (the allocated buffer or parameter) followed by every view, in program order."""
    owners: dict[Var, Buffer] = {p.data: p for p in func.params}
    decls: list[DeclBuffer] = []
    for s in statements(func.body):
        if isinstance(s, Block):
            for buf in s.alloc_buffers:
                owners.setdefault(buf.data, buf)
        elif isinstance(s, DeclBuffer):
            decls.append(s)
    found: dict[Var, list[Buffer]] = {}
    for decl in decls:
        owner = owners.get(decl.buffer.data)
        if owner is not None and decl.buffer is not owner:
            found.setdefault(owner.data, [owner]).append(decl.buffer)
    return {data: tuple(bufs) for data, bufs in found.items()}


def aliased_buffers(func: Func) -> dict[Buffer, tuple[Buffer, ...]]:
    """Every buffer on storage that has views, mapped to all the buffers on that storage."""
    return {b: group for group in storage_views(func).values() for b in group}
