"""Names in generated kernels.

Names follow the IR printer's rule (unique, in order of first appearance: a
second variable called ``i`` is ``i_1``), made valid Python identifiers that are
no keyword and no name the kernel module itself uses.
"""

from __future__ import annotations

import keyword
import re
from typing import Any

from .. import ir
from ..ir import expr as E

__all__ = ["NEST", "SELECT", "Names", "py_ident"]

_IDENT = re.compile(r"[^0-9A-Za-z_]")
SELECT = "_select"
"""The kernel's name for :func:`autotune.codegen.runtime.select`."""
NEST = "_nest"
"""The kernel's name for :func:`autotune.codegen.runtime.nest`, the decorator of its outlined nests."""
_RESERVED = frozenset(
    {"np", "math", "numba", "range", "min", "max", "abs", "int", "float", "bool", "len", SELECT, NEST}
)


def py_ident(name: str) -> str:
    """``name`` made a valid Python identifier that is no keyword or reserved kernel name."""
    text = _IDENT.sub("_", name) or "v"
    if text[0].isdigit() or keyword.iskeyword(text) or text in _RESERVED or re.fullmatch(r"_c\d+", text):
        text = "v_" + text
    return text


class Names:
    """Unique Python names for variables and buffers, by identity, in order of first use."""

    def __init__(self, reserved: set[str] | frozenset[str] = frozenset()) -> None:
        self.by_obj: dict[int, str] = {}
        self.used: set[str] = set(reserved)
        self.keep: list[Any] = []  # keep objects alive so ids stay unique

    def get(self, obj: Any, base: str) -> str:
        key = id(obj)
        name = self.by_obj.get(key)
        if name is None:
            base = py_ident(base)
            name, n = base, 0
            while name in self.used:
                n += 1
                name = f"{base}_{n}"
            self.used.add(name)
            self.by_obj[key] = name
            self.keep.append(obj)
        return name

    def fresh(self, base: str) -> str:
        """A new unique name from ``base``, bound to no object."""
        return self.get(object(), base)

    def var(self, v: E.Var) -> str:
        return self.get(v, v.name)

    def buffer(self, b: ir.Buffer) -> str:
        return self.get(b, b.name)
