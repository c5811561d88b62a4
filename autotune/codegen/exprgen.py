"""Expressions of generated kernels (their names: :mod:`autotune.codegen.names`).

Float
constants become module-level typed constants (``_c0 = np.float32(2.0)``; numba
freezes globals), so float32 arithmetic never silently widens to float64.
"""

from __future__ import annotations

import math
import re
from math import prod

import numpy as np

from .. import ir
from ..analysis import Interval, eval_interval
from ..errors import CodegenError
from ..ir import expr as E
from .names import SELECT, Names, py_ident
from .regions import StraightLine
from .trees import Partials

__all__ = ["SELECT", "ExprWriter", "Names", "py_ident"]

# Python precedence: a higher number binds tighter.
_PREC = {"or": 1, "and": 2, "==": 4, "!=": 4, "<": 4, "<=": 4, ">": 4, ">=": 4}
_PREC.update({"+": 5, "-": 5, "*": 6, "/": 6, "//": 6, "%": 6})
_NOT_PREC = 3
_LEAVES = (E.BufferLoad, E.IntImm, E.FloatImm, E.Var)
"""The select values computed without a branch when both are in bounds (:meth:`ExprWriter.expr_Select`)."""
_CMP = frozenset({"==", "!=", "<", "<=", ">", ">="})

# IR intrinsic -> numpy ufunc on scalars, which keeps float32 as float32 in numba.
_FLOAT_INTRINSICS = {
    "floor": "np.floor",
    "ceil": "np.ceil",
    "round": "np.rint",
    "sqrt": "np.sqrt",
    "exp": "np.exp",
    "log": "np.log",
    "abs": "np.abs",
    "tanh": "np.tanh",
}
_NUMPY_TYPES = {
    "float32",
    "float64",
    "float16",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
}


MAX_BANKS = 100
"""The most banks a buffer may have: they reach the kernel as one tuple of arrays."""

_NO_NUMBA_TYPES = frozenset({"float16"})
"""Types numba cannot load, store or compute with on the CPU (its arrays of them fail to compile)."""


def _int_range(dtype: str) -> tuple[int, int]:
    """The values an integer constant of ``dtype`` can hold (``bool``: 0 and 1)."""
    if dtype == E.BOOL:
        return 0, 1
    info = np.iinfo(dtype)
    return int(info.min), int(info.max)


def _is_literal(text: str) -> bool:
    """Whether ``text`` is an integer literal as this module writes them (``3``, ``(-3)``)."""
    return re.fullmatch(r"\(?-?\d+\)?", text) is not None


class ExprWriter(StraightLine):
    """Writes IR expressions as numba-compatible Python expressions (sharing loads, indices and
    partial results inside straight-line regions: :class:`~autotune.codegen.regions.StraightLine`)."""

    def __init__(self, names: Names) -> None:
        self.names = names
        self.bound: dict[E.Var, str] = {}
        self.values: dict[E.Var, int] = {}
        self.registers: dict[ir.Buffer, list[str]] = {}
        self.written: frozenset[E.Var] = frozenset()
        self.cse: dict[str, str] | None = None
        self.partials = Partials()
        self.pending: list[str] = []
        self.scope: set[E.Var] = set()
        self.ranges: dict[E.Var, Interval] = {}
        """The values each enclosing loop's variable takes (what proves a load in bounds)."""
        self.decls: dict[ir.Buffer, tuple[str, int]] = {}
        self.consts: dict[str, str] = {}
        self.uses_select = False

    # ---- environment ------------------------------------------------------
    def bind(self, var: E.Var, value: int) -> None:
        """Write ``var`` as the constant ``value`` (an unrolled loop's) until :meth:`unbind`."""
        self.bound[var] = str(value)
        self.values[var] = value

    def unbind(self, var: E.Var) -> None:
        self.bound.pop(var, None)
        self.values.pop(var, None)

    def declare(self, buf: ir.Buffer, name: str, split: int = 0) -> None:
        """Access ``buf`` through the kernel variable ``name``.

        ``split > 0`` makes it banked: a tuple indexed by the row-major flattening
        of the first ``split`` indices, each entry indexed by the remaining ones.
        """
        banks = prod(buf.const_shape()[:split]) if split else 1
        if banks > MAX_BANKS:
            raise CodegenError(
                f"codegen: buffer {buf.name} has {banks} banks; a kernel takes at most {MAX_BANKS} "
                "(numba refuses a longer tuple of arrays in a parallel function)"
            )
        self.decls[buf] = (name, split)

    def constants(self) -> list[tuple[str, str]]:
        """The module-level constants used so far, as ``(name, initialiser)``."""
        return [(name, text) for text, name in self.consts.items()]

    # ---- buffers ----------------------------------------------------------
    def access(self, buf: ir.Buffer, indices: tuple[E.Expr, ...]) -> str:
        """``B[i, j]``, or ``B[bank][i, j]`` for a banked buffer, or a register's variable."""
        if buf in self.registers:
            return self.register(buf, indices)
        if buf not in self.decls:
            raise CodegenError(f"codegen: buffer {buf.name} is used outside its declaration")
        if buf.dtype in _NO_NUMBA_TYPES:
            raise CodegenError(f"codegen: buffer {buf.name} is {buf.dtype}, which numba cannot load or store on the CPU")
        name, split = self.decls[buf]
        if len(indices) != buf.ndim:
            raise CodegenError(
                f"codegen: buffer {buf.name} has {buf.ndim} dimensions, indexed with {len(indices)}"
            )
        inner = ", ".join(self.index(i) for i in indices[split:])
        if not split:
            return f"{name}[{inner}]"
        shape = buf.const_shape()[:split]
        bank: E.Expr = indices[0]
        for idx, dim in zip(indices[1:split], shape[1:]):
            bank = E.Add(E.Mul(bank, E.IntImm(dim)), idx)
        if prod(shape) == 1:
            return f"{name}[0][{inner}]"
        return f"{name}[{self.index(bank)}][{inner}]"

    def index(self, e: E.Expr) -> str:
        """An array index: a loop variable or constant as is, anything else cast to ``np.uintp``.

        numba wraps a signed index it cannot prove non-negative (``i < 0 ? i + n : i``)
        on every access, which turns contiguous vector loads into gathers. Indices of
        a lowered function are in bounds, hence non-negative, so the cast is exact.
        """
        if self.values and not ir.free_vars(e).isdisjoint(self.values):
            e = self._substituted(e)  # one text per element: the copies of unrolled code share loads
        if self.cse is not None and not E.is_float(e.dtype):
            shared = self._shared_index(e)
            if shared is not None:
                return shared
        text = self.expr(e)
        if isinstance(e, E.IntImm) or (isinstance(e, E.Var) and e not in self.bound) or text.isdigit():
            return text
        if E.is_float(e.dtype):
            return text  # not an index: numba rejects it, and the kernel fails to compile
        return f"np.uintp({text})"

    # ---- registers --------------------------------------------------------
    def declare_registers(self, buf: ir.Buffer, names: list[str]) -> None:
        """Access ``buf`` (a ``local`` allocation) as the scalar variables ``names``, row-major."""
        self.registers[buf] = names

    def register(self, buf: ir.Buffer, indices: tuple[E.Expr, ...]) -> str:
        """The scalar variable of a register buffer at constant ``indices``."""
        shape = buf.const_shape()
        names = self.registers[buf]
        if len(indices) != len(shape) or prod(shape) > len(names):
            raise CodegenError(
                f"codegen: local buffer {buf.name} of shape {shape} indexed with {len(indices)} indices "
                f"over {len(names)} registers"
            )
        flat = 0
        for idx, dim in zip(indices, shape):
            value = self.constant_value(idx)
            if value is None or not 0 <= value < dim:
                raise CodegenError(
                    f"codegen: local buffer {buf.name} lives in registers and needs constant in-bounds "
                    f"indices, got {ir.to_text(idx)} (unroll the loops over it)"
                )
            flat = flat * dim + value
        return names[flat]

    def constant_value(self, e: E.Expr) -> int | None:
        """The integer value of ``e`` with unrolled loop variables replaced by their values, or None."""
        if not self.values:
            return E.as_int(e)
        return E.as_int(self._substituted(e))

    def _substituted(self, e: E.Expr) -> E.Expr:
        """``e`` with unrolled loop variables replaced by their values, simplified to the canonical
        sum form: ``(x*4 + 1)*64 + 0*64`` and ``(x*4 + 0)*64 + 1*64`` both become ``x*256 + 64``."""
        from ..analysis import simplify

        bound = {v: E.IntImm(k, v.dtype) for v, k in self.values.items()}
        return simplify(ir.substitute(e, bound))

    # ---- expressions ------------------------------------------------------
    def constant(self, value: float, dtype: str) -> str:
        """The name of a module-level constant of ``dtype`` with ``value``."""
        if dtype in _NO_NUMBA_TYPES:
            raise CodegenError(f"codegen: constant {value} is {dtype}, which numba cannot compute with on the CPU")
        if math.isnan(value):
            literal = "np.nan"
        elif math.isinf(value):
            literal = "np.inf" if value > 0 else "-np.inf"
        else:
            literal = repr(float(value))
        text = f"np.{dtype}({literal})"
        if text not in self.consts:
            self.consts[text] = f"_c{len(self.consts)}"
        return self.consts[text]

    def expr(self, e: E.Expr, parent: int = 0) -> str:
        """The Python text of ``e``, parenthesised if it binds looser than ``parent``."""
        for cls in type(e).__mro__:  # subclasses too (te's ReduceAxis is a Var)
            method = getattr(self, "expr_" + cls.__name__, None)
            if method is not None:
                return method(e, parent)  # type: ignore[no-any-return]
        if isinstance(e, (E.Min, E.Max)):
            text = f"{e.symbol}({self.expr(e.a)}, {self.expr(e.b)})"
            # a clamp of a load (relu6 applied by the consumer) is computed once per straight-line region,
            # not once per unrolled copy that reads it: numba's min/max are branches that LLVM does not merge
            return self.share(e, text, "t") if ir.collect(e, E.BufferLoad) else text
        if isinstance(e, E.BinaryOp):
            return self.binary(e, parent)
        raise CodegenError(f"codegen: cannot generate expression {type(e).__name__}")

    def binary(self, e: E.BinaryOp, parent: int) -> str:
        sym = e.symbol
        prec = _PREC[sym]
        a, b = e.a, e.b
        if sym not in _CMP and sym not in ("and", "or") and E.is_float(e.a.dtype) != E.is_float(e.b.dtype):
            # mixed int/float: compute in the float operand's dtype, never float64 by accident
            ftype = e.a.dtype if E.is_float(e.a.dtype) else e.b.dtype
            a, b = (a, E.Cast(ftype, b)) if E.is_float(a.dtype) else (E.Cast(ftype, a), b)
        if sym == "/" and not E.is_float(a.dtype):
            raise CodegenError(f"codegen: true division of integers ({ir.to_text(e)}); use //")
        # comparisons do not chain, so both sides of one are parenthesised at equal precedence
        left = prec + 1 if sym in _CMP else prec
        ta = self.expr(a, left)
        # `a and b`, `a or b`: b runs only sometimes, so its loads are not shared
        tb = self.lazy(b, prec + 1) if sym in ("and", "or") else self.expr(b, prec + 1)
        if (sym in "+-" and tb == "0") or (sym == "*" and tb == "1"):
            return self.expr(a, parent)  # an unrolled loop's `i + 0`
        if (sym == "+" and ta == "0") or (sym == "*" and ta == "1"):
            return self.expr(b, parent)
        if sym in ("+", "-", "*") and _is_literal(ta) and _is_literal(tb):
            value = {"+": int.__add__, "-": int.__sub__, "*": int.__mul__}[sym](int(ta.strip("()")), int(tb.strip("()")))
            return str(value) if value >= 0 or parent == 0 else f"({value})"
        if sym == "*" and (ta == "0" or tb == "0"):
            return "0"
        text = f"{ta} {sym} {tb}"
        return f"({text})" if prec < parent else text

    def expr_IntImm(self, e: E.IntImm, parent: int) -> str:
        if e.dtype in ("int32", "int64"):
            # a Python integer: numba computes in int64 and never wraps it to the IR type
            return str(e.value) if e.value >= 0 or parent == 0 else f"({e.value})"
        lo, hi = _int_range(e.dtype)
        if not lo <= e.value <= hi:
            # np.int8(-2147483648) would wrap to 0 without a word
            raise CodegenError(f"codegen: constant {e.value} is outside the range of {e.dtype} [{lo}, {hi}]")
        if e.dtype == E.BOOL:
            return "True" if e.value else "False"
        return f"np.{e.dtype}({e.value})"

    def expr_FloatImm(self, e: E.FloatImm, parent: int) -> str:
        if e.dtype not in _NUMPY_TYPES:
            raise CodegenError(f"codegen: unsupported float type {e.dtype}")
        return self.constant(e.value, e.dtype)

    def expr_Var(self, e: E.Var, parent: int) -> str:
        if e in self.bound:
            return self.bound[e]
        if e not in self.scope:
            raise CodegenError(f"codegen: variable {e.name} is used outside any loop that defines it")
        return self.names.var(e)

    def expr_BufferLoad(self, e: E.BufferLoad, parent: int) -> str:
        return self.share(e, self.access(e.buffer, e.indices), "ld")

    def expr_Not(self, e: E.Not, parent: int) -> str:
        text = f"not {self.expr(e.a, _NOT_PREC + 1)}"
        return f"({text})" if parent > _NOT_PREC else text

    def expr_Select(self, e: E.Select, parent: int) -> str:
        # only the taken branch runs (a padded load outside its buffer sits in the other), and a
        # shared load runs before the statement: a branch's loads are shared only when every one
        # is in bounds whatever the condition (a window over a rolling buffer with its halo)
        safe = [self.in_bounds(b) for b in (e.true_value, e.false_value)]
        true, false = (self.expr(b) if ok else self.lazy(b) for b, ok in zip((e.true_value, e.false_value), safe))
        values = (e.true_value, e.false_value)
        if all(safe) and all(isinstance(b, _LEAVES) for b in values) and any(isinstance(b, E.BufferLoad) for b in values):
            # a load inside its buffer and a constant, a variable or another such load: computing
            # both costs nothing, so no branch (runtime.select), and a condition of comparisons
            # alone is written with & and | (no short-circuit branches either), once per
            # straight-line region (a padded tile's elements share their column's)
            self.uses_select = True
            cond = self.branch_free(e.cond)
            if isinstance(e.cond, (E.And, E.Or)):
                cond = self.share(e.cond, cond, "cond")
            return self.share(e, f"{SELECT}({cond}, {true}, {false})", "sel")
        # a compound condition once per straight-line region: its `and`s are branches
        cond = self.expr(e.cond)
        if isinstance(e.cond, (E.And, E.Or)):
            cond = self.share(e.cond, cond, "cond")
        # the whole select runs where it is shared (before the statement), and only its taken branch
        return self.share(e, f"({true} if {cond} else {false})", "sel")

    def branch_free(self, e: E.Expr) -> str:
        """``e``, a condition, with its ``and``/``or`` of comparisons written ``&``/``|`` when nothing
        in it loads (every operand can run), else as :meth:`expr` writes it."""
        if not isinstance(e, (E.And, E.Or)) or ir.collect(e, E.BufferLoad):
            return self.expr(e)

        def operand(x: E.Expr) -> str:
            if isinstance(x, type(e)):
                return " ".join(operand(y) if i == 0 else f"{'&' if isinstance(e, E.And) else '|'} {operand(y)}"
                                for i, y in enumerate((x.a, x.b)))
            return f"({self.expr(x)})"

        return f"({operand(e)})"

    def in_bounds(self, e: E.Expr) -> bool:
        """Whether every load in ``e`` reads inside its buffer for every value of the enclosing
        loops (:attr:`ranges`; an unrolled loop's variable is its value)."""
        for load in ir.collect(e, E.BufferLoad):
            try:
                shape = load.buffer.const_shape()
            except ValueError:
                return False
            for index, dim in zip(load.indices, shape):
                span = eval_interval(self._substituted(index) if self.values else index, self.ranges)
                if span.lo is None or span.hi is None or span.lo < 0 or span.hi >= dim:
                    return False
        return True

    def expr_Cast(self, e: E.Cast, parent: int) -> str:
        value = self.expr(e.value)
        if e.dtype == e.value.dtype:
            return self.expr(e.value, parent)
        if e.dtype == E.BOOL:
            return f"({value} != 0)"
        if e.dtype not in _NUMPY_TYPES:
            raise CodegenError(f"codegen: unsupported cast to {e.dtype}")
        return f"np.{e.dtype}({value})"

    def expr_Call(self, e: E.Call, parent: int) -> str:
        args = ", ".join(self.expr(a) for a in e.args)
        if len(e.args) != 1:
            raise CodegenError(f"codegen: intrinsic {e.op} takes one argument, got {len(e.args)}")
        if not E.is_float(e.args[0].dtype):
            if e.op == "abs":
                return f"abs({args})"
            if e.op in ("floor", "ceil", "round"):
                return self.expr(e.args[0], parent)
            raise CodegenError(f"codegen: intrinsic {e.op} of integer type {e.args[0].dtype}")
        fn = _FLOAT_INTRINSICS.get(e.op)
        if fn is None:
            raise CodegenError(f"codegen: unknown intrinsic {e.op!r}")
        text = f"{fn}({args})"
        return text if e.dtype == e.args[0].dtype else f"np.{e.dtype}({text})"
