"""Finding and replacing blocks and loops inside a function.

Blocks are addressed by their unique name, loops by the unique name of their
loop variable (the schedule keeps both unique).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from .. import ir
from ..errors import ScheduleError
from ..ir.functor import statement_fields


def _path_to(root: ir.Stmt, match: Any) -> list[ir.Stmt] | None:
    """Statements from ``root`` down to the first statement for which ``match`` holds."""
    if match(root):
        return [root]
    children: tuple[Any, ...] = ()
    if isinstance(root, ir.SeqStmt):
        children = root.seq
    elif isinstance(root, (ir.For, ir.Allocate, ir.DeclBuffer, ir.Block)):
        children = (root.body,)
    elif isinstance(root, ir.IfThenElse):
        children = (root.then_case,) + ((root.else_case,) if root.else_case is not None else ())
    for child in children:
        found = _path_to(child, match)
        if found is not None:
            return [root, *found]
    return None


def block_path(func: ir.Func, name: str, primitive: str) -> list[ir.Stmt]:
    path = _path_to(func.body, lambda s: isinstance(s, ir.Block) and s.name == name)
    if path is None:
        raise ScheduleError(primitive, f"no block named '{name}' (blocks: {', '.join(block_names(func))})")
    return path


def get_block(func: ir.Func, name: str, primitive: str) -> ir.Block:
    return block_path(func, name, primitive)[-1]  # type: ignore[return-value]


def loop_path(func: ir.Func, name: str, primitive: str) -> list[ir.Stmt]:
    path = _path_to(func.body, lambda s: isinstance(s, ir.For) and s.loop_var.name == name)
    if path is None:
        raise ScheduleError(primitive, f"no loop named '{name}' (loops: {', '.join(loop_names(func))})")
    return path


def get_loop(func: ir.Func, name: str, primitive: str) -> ir.For:
    return loop_path(func, name, primitive)[-1]  # type: ignore[return-value]


def loops_above(path: list[ir.Stmt]) -> list[ir.For]:
    return [s for s in path if isinstance(s, ir.For)]


def block_names(func: ir.Func) -> list[str]:
    return [b.name for b in ir.collect(func.body, ir.Block) if b.name != "root"]


def loop_names(func: ir.Func) -> list[str]:
    return [f.loop_var.name for f in ir.collect(func.body, ir.For)]


def blocks_under(stmt: ir.Stmt) -> list[ir.Block]:
    return [b for b in ir.collect(stmt, ir.Block)]


def all_names(func: ir.Func) -> set[str]:
    """The names of every variable, block and buffer parameter of ``func``, and of every buffer its
    blocks allocate (one walk of the body)."""
    names = {b.name for b in func.params}
    for node in ir.collect(func.body, (ir.Var, ir.Block)):
        names.add(node.name)
        if isinstance(node, ir.Block):
            names.update(b.name for b in node.alloc_buffers)
            names.update(iv.var.name for iv in node.iter_vars)
    return names


_LEAF_STMTS = (ir.BufferStore, ir.Evaluate)
"""Statements that hold no statement (only a buffer and expressions)."""


class _Replace(ir.Transformer):
    def __init__(self, old: ir.Stmt, new: ir.Stmt | None) -> None:
        self.old, self.new, self.done = old, new, False

    def visit(self, node: Any) -> Any:
        if isinstance(node, ir.Expr):  # expressions never hold statements
            return node
        if node is self.old:
            self.done = True
            return self.new
        if not isinstance(node, ir.Stmt) or isinstance(node, _LEAF_STMTS):  # nor do these
            return node
        return super().visit(node)

    def generic_visit(self, node: Any) -> Any:
        """``Transformer.generic_visit`` over the fields that may hold a statement only: the others
        come back unchanged from this walk."""
        changes: dict[str, Any] = {}
        for name in statement_fields(type(node)):
            old = getattr(node, name)
            new = self._visit_value(old)
            if new is not old:
                changes[name] = new
        return replace(node, **changes) if changes else node

    def visit_SeqStmt(self, node: ir.SeqStmt) -> ir.Stmt:
        items = [self.visit(s) for s in node.seq]
        if all(a is b for a, b in zip(items, node.seq)):
            return node
        return ir.seq(*[s for s in items if s is not None]) if any(s is not None for s in items) else ir.SeqStmt(())


def replace_in(root: ir.Stmt, old: ir.Stmt, new: ir.Stmt | None) -> ir.Stmt:
    """``root`` with the statement ``old`` (found by identity) replaced by ``new`` (None removes it)."""
    t = _Replace(old, new)
    out = t.visit(root)
    if not t.done:
        raise ValueError("statement to replace not found")
    return out  # type: ignore[no-any-return]


def replace_stmt(func: ir.Func, old: ir.Stmt, new: ir.Stmt | None) -> ir.Func:
    """``func`` with the statement ``old`` (found by identity) replaced by ``new`` (None removes it)."""
    return replace(func, body=replace_in(func.body, old, new))


def replace_block(func: ir.Func, old: ir.Block, new: ir.Stmt) -> ir.Func:
    return replace_stmt(func, old, new)


def root_block(func: ir.Func) -> ir.Block:
    if not isinstance(func.body, ir.Block):
        raise ScheduleError("schedule", f"function '{func.name}' has no root block (already lowered?)")
    return func.body


def writers_of(func: ir.Func, buffer: ir.Buffer) -> list[ir.Block]:
    return [b for b in ir.collect(func.body, ir.Block) if any(w.buffer is buffer for w in b.writes)]


def readers_of(func: ir.Func, buffer: ir.Buffer) -> list[ir.Block]:
    """Blocks that read ``buffer`` and do not write it (a reduction reads its own output)."""
    return [
        b
        for b in ir.collect(func.body, ir.Block)
        if any(r.buffer is buffer for r in b.reads) and not any(w.buffer is buffer for w in b.writes)
    ]


def allocating_block(func: ir.Func, buffer: ir.Buffer) -> ir.Block | None:
    for b in ir.collect(func.body, ir.Block):
        if any(a is buffer for a in b.alloc_buffers):
            return b
    return None
