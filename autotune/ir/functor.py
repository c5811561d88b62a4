"""Generic visitor and transformer over IR nodes.

Both dispatch on the class name (``visit_For``, ``visit_BufferLoad``...) and fall
back to a generic walk over the dataclass fields. The transformer rebuilds a node
only when one of its children changed, so unchanged subtrees keep their identity.
Buffers are leaves of the walk; every place a buffer is referenced goes through
:meth:`Transformer.visit_buffer`, so a subclass can swap buffers everywhere.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import fields, replace
from typing import Any

from .buffer import Buffer
from .expr import Expr, Node, Var

_FIELDS: dict[type, tuple[str, ...]] = {}


def node_fields(cls: type) -> tuple[str, ...]:
    names = _FIELDS.get(cls)
    if names is None:
        names = tuple(f.name for f in fields(cls))
        _FIELDS[cls] = names
    return names


def _dispatch(obj: Any, cls: type) -> Any:
    """The ``visit_<Class>`` method of ``obj`` for ``cls`` or its nearest base class, or None."""
    table = type(obj).__dict__.get("_dispatch_table")
    if table is None:
        table = {}
        type(obj)._dispatch_table = table  # type: ignore[attr-defined]
    if cls not in table:
        table[cls] = next(
            (f"visit_{base.__name__}" for base in cls.__mro__ if hasattr(obj, f"visit_{base.__name__}") and base is not object),
            None,
        )
    name = table[cls]
    return getattr(obj, name) if name is not None else None


class Visitor:
    """Read-only walk. Override ``visit_<Class>`` (a subclass of Class dispatches there too)
    and call ``generic_visit`` to descend."""

    def visit(self, node: Any) -> None:
        method = _dispatch(self, type(node))
        if method is not None:
            method(node)
        else:
            self.generic_visit(node)

    def generic_visit(self, node: Any) -> None:
        for name in node_fields(type(node)):
            self._visit_value(getattr(node, name))

    def _visit_value(self, value: Any) -> None:
        if isinstance(value, Buffer):
            self.visit_buffer(value)
        elif isinstance(value, Node):
            self.visit(value)
        elif isinstance(value, tuple):
            for item in value:
                self._visit_value(item)

    def visit_buffer(self, buffer: Buffer) -> None:
        """Called for every buffer reference."""


class Transformer:
    """Rebuilding walk. ``visit_<Class>`` returns the replacement node."""

    def visit(self, node: Any) -> Any:
        method = _dispatch(self, type(node))
        if method is not None:
            return method(node)
        return self.generic_visit(node)

    def generic_visit(self, node: Any) -> Any:
        changes: dict[str, Any] = {}
        for name in node_fields(type(node)):
            old = getattr(node, name)
            new = self._visit_value(old)
            if new is not old:
                changes[name] = new
        return replace(node, **changes) if changes else node

    def _visit_value(self, value: Any) -> Any:
        if isinstance(value, Buffer):
            return self.visit_buffer(value)
        if isinstance(value, Node):
            return self.visit(value)
        if isinstance(value, tuple):
            new = tuple(self._visit_value(v) for v in value)
            return value if all(a is b for a, b in zip(new, value)) else new
        return value

    def visit_buffer(self, buffer: Buffer) -> Buffer:
        return buffer


class _Substituter(Transformer):
    def __init__(self, vmap: Mapping[Var, Expr], bmap: Mapping[Buffer, Buffer]) -> None:
        self.vmap = vmap
        self.bmap = bmap

    def visit_Var(self, node: Var) -> Expr:
        return self.vmap.get(node, node)

    def visit_buffer(self, buffer: Buffer) -> Buffer:
        return self.bmap.get(buffer, buffer)


def substitute(node: Any, vmap: Mapping[Var, Expr] | None = None, bmap: Mapping[Buffer, Buffer] | None = None) -> Any:
    """Replace variables and buffers everywhere in ``node``."""
    if not vmap and not bmap:
        return node
    return _Substituter(vmap or {}, bmap or {}).visit(node)


class _PostOrder(Visitor):
    def __init__(self, fn: Callable[[Any], None]) -> None:
        self.fn = fn

    def visit(self, node: Any) -> None:
        self.generic_visit(node)
        self.fn(node)


def post_order_visit(node: Any, fn: Callable[[Any], None]) -> None:
    """Call ``fn`` on every node below and including ``node``, children first."""
    _PostOrder(fn).visit(node)


class _PreOrder(Visitor):
    def __init__(self, cls: type | tuple[type, ...]) -> None:
        self.cls = cls
        self.found: list[Any] = []

    def visit(self, node: Any) -> None:
        if isinstance(node, self.cls):
            self.found.append(node)
        self.generic_visit(node)


def collect(node: Any, cls: type | tuple[type, ...]) -> list[Any]:
    """Every node of class ``cls`` under ``node``, in pre order (program order for statements)."""
    c = _PreOrder(cls)
    c.visit(node)
    return c.found


def free_vars(node: Any) -> set[Var]:
    """Every variable referenced under ``node`` (bound or not)."""
    return set(collect(node, Var))
