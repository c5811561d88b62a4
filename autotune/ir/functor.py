"""Generic visitor and transformer over IR nodes.

Both dispatch on the class name (``visit_For``, ``visit_BufferLoad``...) and fall
back to a generic walk over the dataclass fields. The transformer rebuilds a node
only when one of its children changed, so unchanged subtrees keep their identity.
Buffers are leaves of the walk; every place a buffer is referenced goes through
:meth:`Transformer.visit_buffer`, so a subclass can swap buffers everywhere.

The walk descends into a field's value when it is a node, a buffer or a tuple (of
any of these); a field declared ``str``, ``int``, ``float`` or ``bool`` holds none
of them and is skipped (:func:`walked_fields`). What a value is, is looked up by its
class once (:func:`_kind_of`), not tested with ``isinstance`` at every field. Looking for
statements only, :func:`collect` does not descend into the nodes that hold none
(:func:`_holds_no_statement`: expressions, ranges, regions, iteration variables).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import fields, is_dataclass, replace
from typing import Any, ClassVar

from .buffer import Buffer
from .expr import Expr, Node, Var
from .stmt import Stmt

_FIELDS: dict[type, tuple[str, ...]] = {}
_WALKED: dict[type, tuple[str, ...]] = {}
_SCALAR_TYPES = frozenset({"str", "int", "float", "bool", str, int, float, bool})

_OTHER, _BUFFER, _TUPLE, _NODE, _PLAIN = 0, 1, 2, 3, 4  # _PLAIN: a node that holds no statement; nodes last
_KINDS: dict[type, int] = {}
_STMT_ONLY: dict[Any, bool] = {}


def node_fields(cls: type) -> tuple[str, ...]:
    names = _FIELDS.get(cls)
    if names is None:
        names = tuple(f.name for f in fields(cls))
        _FIELDS[cls] = names
    return names


def walked_fields(cls: type) -> tuple[str, ...]:
    """The fields of the dataclass ``cls`` that may hold a node, a buffer or a tuple: all but those
    declared ``str``, ``int``, ``float`` or ``bool`` (keyed on the class, whose fields never change)."""
    names = _WALKED.get(cls)
    if names is None:
        names = tuple(f.name for f in fields(cls) if f.type not in _SCALAR_TYPES)
        _WALKED[cls] = names
    return names


_NO_STATEMENT_NAMES = frozenset({"str", "int", "float", "bool", "None", "tuple", "Expr", "Var", "Buffer"})


def _holds_no_statement(cls: type) -> bool:
    """True for an expression class (expressions never hold statements), and for a node class whose
    fields are declared with only scalars, expressions, buffers, tuples of them and other such
    classes (``Range``, ``BufferRegion``, ``IterVar``); False for anything else, statements included."""
    if issubclass(cls, Expr):
        return True
    if issubclass(cls, Stmt) or not is_dataclass(cls):
        return False
    return all(_declared_without_statement(cls, f.type) for f in fields(cls))


def _declared_without_statement(cls: type, declared: Any) -> bool:
    """True when a field of ``cls`` declared ``declared`` holds no statement: every name in the
    declaration is a scalar, ``tuple``, ``Expr``, ``Var``, ``Buffer`` or a class that holds none."""
    module = sys.modules[cls.__module__]
    for name in re.findall(r"[A-Za-z_]\w*", declared if isinstance(declared, str) else str(declared)):
        if name in _NO_STATEMENT_NAMES:
            continue
        ref = getattr(module, name, None)
        if not (isinstance(ref, type) and ref is not cls and _holds_no_statement(ref)):
            return False
    return True


_STATEMENT_FIELDS: dict[type, tuple[str, ...]] = {}


def statement_fields(cls: type) -> tuple[str, ...]:
    """The walked fields of the dataclass ``cls`` that may hold a statement (:func:`walked_fields`
    less those declared without one, :func:`_declared_without_statement`), keyed on the class."""
    names = _STATEMENT_FIELDS.get(cls)
    if names is None:
        declared = {f.name: f.type for f in fields(cls)}
        names = tuple(n for n in walked_fields(cls) if not _declared_without_statement(cls, declared[n]))
        _STATEMENT_FIELDS[cls] = names
    return names


def _kind_of(cls: type) -> int:
    """What a value of class ``cls`` is to the walk: a buffer (a leaf), a node that holds no statement,
    another node, a tuple, or other."""
    kind = _KINDS.get(cls)
    if kind is None:
        if issubclass(cls, Buffer):
            kind = _BUFFER
        elif issubclass(cls, Node):
            kind = _PLAIN if _holds_no_statement(cls) else _NODE
        elif issubclass(cls, tuple):
            kind = _TUPLE
        else:
            kind = _OTHER
        _KINDS[cls] = kind
    return kind


def _dispatch(obj: Any, cls: type) -> Any:
    """The ``visit_<Class>`` function of ``obj``'s class for ``cls`` or its nearest base class, or None."""
    table = type(obj).__dict__.get("_dispatch_table")
    if table is None:
        table = {}
        type(obj)._dispatch_table = table  # type: ignore[attr-defined]
    if cls not in table:
        name = next(
            (
                f"visit_{base.__name__}"
                for base in cls.__mro__
                if hasattr(obj, f"visit_{base.__name__}") and base is not object
            ),
            None,
        )
        table[cls] = getattr(type(obj), name) if name is not None else None
    return table[cls]


_UNKNOWN = object()


class Visitor:
    """Read-only walk. Override ``visit_<Class>`` (a subclass of Class dispatches there too)
    and call ``generic_visit`` to descend."""

    _dispatch_table: ClassVar[dict[type, Any]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._dispatch_table = {}  # each class its own (:func:`_dispatch`)

    def visit(self, node: Any) -> None:
        method = self._dispatch_table.get(type(node), _UNKNOWN)
        if method is _UNKNOWN:
            method = _dispatch(self, type(node))
        if method is not None:
            method(self, node)
        else:
            self.generic_visit(node)

    def generic_visit(self, node: Any) -> None:
        for name in _WALKED.get(type(node)) or walked_fields(type(node)):
            value = getattr(node, name)
            kind = _KINDS.get(type(value))
            if kind is None:
                kind = _kind_of(type(value))
            if kind >= _NODE:
                self.visit(value)
            elif kind != _OTHER:
                self._visit_value(value)

    def _visit_value(self, value: Any) -> None:
        cls = type(value)
        kind = _KINDS.get(cls)
        if kind is None:
            kind = _kind_of(cls)
        if kind >= _NODE:
            self.visit(value)
        elif kind == _TUPLE:
            for item in value:
                self._visit_value(item)
        elif kind == _BUFFER:
            self.visit_buffer(value)

    def visit_buffer(self, buffer: Buffer) -> None:
        """Called for every buffer reference."""


class Transformer:
    """Rebuilding walk. ``visit_<Class>`` returns the replacement node."""

    _dispatch_table: ClassVar[dict[type, Any]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._dispatch_table = {}  # each class its own (:func:`_dispatch`)

    def visit(self, node: Any) -> Any:
        method = self._dispatch_table.get(type(node), _UNKNOWN)
        if method is _UNKNOWN:
            method = _dispatch(self, type(node))
        if method is not None:
            return method(self, node)
        return self.generic_visit(node)

    def generic_visit(self, node: Any) -> Any:
        changes: dict[str, Any] | None = None
        for name in _WALKED.get(type(node)) or walked_fields(type(node)):
            old = getattr(node, name)
            kind = _KINDS.get(type(old))
            if kind is None:
                kind = _kind_of(type(old))
            if kind >= _NODE:
                new = self.visit(old)
            elif kind != _OTHER:
                new = self._visit_value(old)
            else:
                continue
            if new is not old:
                if changes is None:
                    changes = {}
                changes[name] = new
        return replace(node, **changes) if changes else node

    def _visit_value(self, value: Any) -> Any:
        cls = type(value)
        kind = _KINDS.get(cls)
        if kind is None:
            kind = _kind_of(cls)
        if kind >= _NODE:
            return self.visit(value)
        if kind == _TUPLE:
            new = [self._visit_value(v) for v in value]
            for a, b in zip(new, value):
                if a is not b:
                    return tuple(new)
            return value
        if kind == _BUFFER:
            return self.visit_buffer(value)
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


def _stmt_only(cls: type | tuple[type, ...]) -> bool:
    """True when every class of ``cls`` is a statement class (keyed on ``cls``, a class or a tuple of them)."""
    only = _STMT_ONLY.get(cls)
    if only is None:
        only = all(issubclass(c, Stmt) for c in (cls if isinstance(cls, tuple) else (cls,)))
        _STMT_ONLY[cls] = only
    return only


def _walk(node: Any, found: Callable[[Any], None], cls: type | tuple[type, ...]) -> None:
    """Call ``found`` on every node of class ``cls`` under ``node`` (``node`` included, whatever it
    is), in pre order, without descending into buffers below ``node``. Looking for statements only,
    it does not descend into the nodes and fields that hold none (:func:`_holds_no_statement`,
    :func:`statement_fields`)."""
    if isinstance(node, cls):
        found(node)
    stack = [getattr(node, name) for name in reversed(walked_fields(type(node)))]
    pop, push = stack.pop, stack.extend
    skip_plain = _stmt_only(cls)
    kinds = _KINDS
    walked, fields_of = (_STATEMENT_FIELDS, statement_fields) if skip_plain else (_WALKED, walked_fields)
    while stack:
        value = pop()
        vcls = type(value)
        kind = kinds.get(vcls)
        if kind is None:
            kind = _kind_of(vcls)
        if kind == _PLAIN:
            if skip_plain:
                continue
        elif kind != _NODE:
            if kind == _TUPLE:
                push(reversed(value))
            continue
        if isinstance(value, cls):
            found(value)
        names = walked.get(vcls)
        if names is None:
            names = fields_of(vcls)
        for name in reversed(names):
            stack.append(getattr(value, name))


def collect(node: Any, cls: type | tuple[type, ...]) -> list[Any]:
    """Every node of class ``cls`` under ``node``, in pre order (program order for statements)."""
    found: list[Any] = []
    _walk(node, found.append, cls)
    return found


def free_vars(node: Any) -> set[Var]:
    """Every variable referenced under ``node`` (bound or not)."""
    found: set[Var] = set()
    _walk(node, found.add, Var)
    return found
