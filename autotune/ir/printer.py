"""The one printer: deterministic text that reads like TVMScript.

It is the golden-test format and what ``autotune show`` prints. Names are made
unique in order of first appearance (a second, different variable called ``i``
prints as ``i_1``), so the text of a function depends only on its structure.
"""

from __future__ import annotations

import math
from typing import Any

from . import expr as E
from .buffer import Buffer, BufferRegion, Range
from .stmt import (
    Allocate,
    Block,
    BufferStore,
    DeclBuffer,
    Evaluate,
    For,
    ForKind,
    Func,
    IfThenElse,
    IterVar,
    SeqStmt,
)

_PREC = {"or": 1, "and": 2, "==": 3, "!=": 3, "<": 3, "<=": 3, ">": 3, ">=": 3, "+": 4, "-": 4, "*": 5, "/": 5, "//": 5, "%": 5}
_FOR_FN = {ForKind.SERIAL: "T.serial", ForKind.PARALLEL: "T.parallel", ForKind.VECTORIZED: "T.vectorized", ForKind.UNROLLED: "T.unroll"}


def _tuple(items: list[str]) -> str:
    """Python's text of a tuple of these items."""
    return f"({items[0]},)" if len(items) == 1 else f"({', '.join(items)})"


class _Names:
    def __init__(self) -> None:
        self.by_obj: dict[int, str] = {}
        self.used: set[str] = set()
        self.keep: list[Any] = []  # keep objects alive so ids stay unique

    def get(self, obj: Any, base: str) -> str:
        key = id(obj)
        name = self.by_obj.get(key)
        if name is None:
            name, n = base, 0
            while name in self.used:
                n += 1
                name = f"{base}_{n}"
            self.used.add(name)
            self.by_obj[key] = name
            self.keep.append(obj)
        return name


class Printer:
    def __init__(self) -> None:
        self.names = _Names()
        self.lines: list[str] = []

    # ---- names -------------------------------------------------------------
    def var(self, v: E.Var) -> str:
        return self.names.get(v, v.name)

    def buf(self, b: Buffer) -> str:
        return self.names.get(b, b.name)

    # ---- expressions -------------------------------------------------------
    def expr(self, e: Any, parent_prec: int = 0) -> str:
        if isinstance(e, E.IntImm):
            if e.dtype == E.BOOL:
                return "True" if e.value else "False"
            return str(e.value) if e.dtype == E.INT else f"T.{e.dtype}({e.value})"
        if isinstance(e, E.FloatImm):
            v = e.value
            text = repr(v) if math.isfinite(v) else ("T.inf" if v > 0 else "-T.inf")
            return text if e.dtype == "float32" else f"T.{e.dtype}({text})"
        if isinstance(e, E.Var):
            return self.var(e)
        if isinstance(e, E.BufferLoad):
            return f"{self.buf(e.buffer)}[{self.indices(e.indices)}]"
        if isinstance(e, (E.Min, E.Max)):
            return f"T.{e.symbol}({self.expr(e.a)}, {self.expr(e.b)})"
        if isinstance(e, E.BinaryOp):
            prec = _PREC[e.symbol]
            # left-associative: the right operand needs parentheses at equal precedence
            text = f"{self.expr(e.a, prec)} {e.symbol} {self.expr(e.b, prec + 1)}"
            return f"({text})" if prec < parent_prec else text
        if isinstance(e, E.Not):
            return f"not {self.expr(e.a, 6)}"
        if isinstance(e, E.Select):
            return f"T.Select({self.expr(e.cond)}, {self.expr(e.true_value)}, {self.expr(e.false_value)})"
        if isinstance(e, E.Cast):
            return f'T.Cast("{e.dtype}", {self.expr(e.value)})'
        if isinstance(e, E.Call):
            return f"T.{e.op}({', '.join(self.expr(a) for a in e.args)})"
        raise TypeError(f"cannot print expression {type(e).__name__}")

    def indices(self, idx: tuple[E.Expr, ...]) -> str:
        return ", ".join(self.expr(i) for i in idx)

    def range_(self, r: Range) -> str:
        ext = E.as_int(r.extent)
        if ext == 1:
            return self.expr(r.min)
        lo, mn = self.expr(r.min), E.as_int(r.min)
        hi = str(mn + ext) if mn is not None and ext is not None else self.expr(E.Add(r.min, r.extent))
        return f"{lo}:{hi}"

    def region(self, br: BufferRegion) -> str:
        return f"{self.buf(br.buffer)}[{', '.join(self.range_(r) for r in br.region)}]"

    def buffer_decl(self, b: Buffer) -> str:
        shape = _tuple([self.expr(d) for d in b.shape])
        extra = ""
        if b.strides:
            extra += f", strides={_tuple([self.expr(x) for x in b.strides])}"
        if b.axis_separators:
            extra += f", axis_separators={list(b.axis_separators)}"
        if b.scope != "global":
            extra += f', scope="{b.scope}"'
        if E.as_int(b.elem_offset) != 0:
            extra += f", elem_offset={self.expr(b.elem_offset)}"
        return f'{shape}, "{b.dtype}"{extra}'

    def annotations(self, ann: tuple[tuple[str, Any], ...]) -> str:
        return "{" + ", ".join(f'"{k}": {_value(v)}' for k, v in ann) + "}"

    # ---- statements --------------------------------------------------------
    def emit(self, depth: int, text: str) -> None:
        self.lines.append("    " * depth + text)

    def stmt(self, s: Any, depth: int) -> None:
        method = getattr(self, "stmt_" + type(s).__name__, None)
        if method is None:
            raise TypeError(f"cannot print statement {type(s).__name__}")
        method(s, depth)

    def stmt_SeqStmt(self, s: SeqStmt, depth: int) -> None:
        if not s.seq:
            self.emit(depth, "T.evaluate(0)")
        for child in s.seq:
            self.stmt(child, depth)

    def stmt_For(self, s: For, depth: int) -> None:
        lo, ext = E.as_int(s.min), E.as_int(s.extent)
        if lo == 0:
            bounds = self.expr(s.extent)
        elif lo is not None and ext is not None:
            bounds = f"{lo}, {lo + ext}"
        else:
            # an extent written ``stop - min`` prints as the stop it means
            stop = s.extent.a if isinstance(s.extent, E.Sub) and s.extent.b == s.min else E.Add(s.min, s.extent)
            bounds = f"{self.expr(s.min)}, {self.expr(stop)}"
        ann = f", annotations={self.annotations(s.annotations)}" if s.annotations else ""
        self.emit(depth, f"for {self.var(s.loop_var)} in {_FOR_FN[s.kind]}({bounds}{ann}):")
        self.stmt(s.body, depth + 1)

    def stmt_BufferStore(self, s: BufferStore, depth: int) -> None:
        self.emit(depth, f"{self.buf(s.buffer)}[{self.indices(s.indices)}] = {self.expr(s.value)}")

    def stmt_IfThenElse(self, s: IfThenElse, depth: int) -> None:
        self.emit(depth, f"if {self.expr(s.condition)}:")
        self.stmt(s.then_case, depth + 1)
        if s.else_case is not None:
            self.emit(depth, "else:")
            self.stmt(s.else_case, depth + 1)

    def stmt_Evaluate(self, s: Evaluate, depth: int) -> None:
        self.emit(depth, f"T.evaluate({self.expr(s.value)})")

    def stmt_Allocate(self, s: Allocate, depth: int) -> None:
        ext = ", ".join(self.expr(e) for e in s.extents)
        ann = f", annotations={self.annotations(s.annotations)}" if s.annotations else ""
        self.emit(depth, f'{self.var(s.data)} = T.allocate([{ext}], "{s.dtype}"{ann})')
        self.stmt(s.body, depth)

    def stmt_DeclBuffer(self, s: DeclBuffer, depth: int) -> None:
        b = s.buffer
        self.emit(depth, f"{self.buf(b)} = T.decl_buffer({self.buffer_decl(b)}, data={self.var(b.data)})")
        self.stmt(s.body, depth)

    def stmt_Block(self, s: Block, depth: int) -> None:
        self.emit(depth, f'with T.block("{s.name}"):')
        d = depth + 1
        for iv, binding in zip(s.iter_vars, s.bindings):
            self.emit(d, f"{self.var(iv.var)} = {self.iter_var(iv)}, {self.expr(binding)})")
        if not (isinstance(s.predicate, E.IntImm) and s.predicate.value == 1):
            self.emit(d, f"T.where({self.expr(s.predicate)})")
        if s.iter_vars or s.reads or s.writes:
            self.emit(d, f"T.reads({', '.join(self.region(r) for r in s.reads)})")
            self.emit(d, f"T.writes({', '.join(self.region(r) for r in s.writes)})")
        if s.annotations:
            self.emit(d, f"T.block_attr({self.annotations(s.annotations)})")
        for b in s.alloc_buffers:
            self.emit(d, f"{self.buf(b)} = T.alloc_buffer({self.buffer_decl(b)})")
        if s.init is not None:
            self.emit(d, "with T.init():")
            self.stmt(s.init, d + 1)
        self.stmt(s.body, d)

    def iter_var(self, iv: IterVar) -> str:
        kind = "spatial" if iv.kind == "spatial" else "reduce"
        dom = self.expr(iv.dom.extent) if E.as_int(iv.dom.min) == 0 else f"({self.expr(iv.dom.min)}, {self.expr(E.Add(iv.dom.min, iv.dom.extent))})"
        return f"T.axis.{kind}({dom}"

    def func(self, f: Func) -> None:
        params = ", ".join(f"{self.buf(b)}: T.Buffer({self.buffer_decl(b)})" for b in f.params)
        self.emit(0, "@T.prim_func")
        self.emit(0, f"def {f.name}({params}):")
        if f.attrs:
            self.emit(1, f"T.func_attr({self.annotations(f.attrs)})")
        self.stmt(f.body, 1)


def _value(v: Any) -> str:
    if isinstance(v, str):
        return f'"{v}"'
    if isinstance(v, tuple):
        if v and all(isinstance(x, tuple) and len(x) == 2 and isinstance(x[0], str) for x in v):
            return "{" + ", ".join(f'"{k}": {_value(x)}' for k, x in v) + "}"
        return "[" + ", ".join(_value(x) for x in v) + "]"
    return repr(v)


def to_text(node: Any) -> str:
    """The text of a function, statement or expression."""
    p = Printer()
    if isinstance(node, Func):
        p.func(node)
    elif isinstance(node, E.Expr):
        return p.expr(node)
    elif isinstance(node, BufferRegion):
        return p.region(node)
    elif isinstance(node, Range):
        return p.range_(node)
    elif isinstance(node, Buffer):
        return f"{node.name}: T.Buffer({p.buffer_decl(node)})"
    else:
        p.stmt(node, 0)
    return "\n".join(p.lines) + "\n"
