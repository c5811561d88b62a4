"""An outlined nest's Python text translated to LLVM IR, without numba's frontend.

numba types and lowers every statement of a function in Python before LLVM sees it; for an
unrolled register tile (thousands of statements) that frontend took three quarters of the
compile (``experiments/compile_time.py``). The text of an outlined nest
(:mod:`~autotune.codegen.outline`) is a small, regular subset of Python, so it is translated here
straight to LLVM IR with the meaning numba gives it, and LLVM compiles that
(:func:`autotune.codegen.runtime.nest`).

The subset, with numba's meaning:

- statements: ``for v in range([a,] b)`` (no ``else``), ``if``/``else``, ``pass``, ``name = e``
  (a name keeps the type of its first assignment), ``A[i] = e``, ``A[i, j] = e`` and, for banks,
  ``A[k][i] = e`` (the value converted to the array's dtype);
- expressions: integer and bool literals; the nest's arguments, locals and module constants
  (numpy scalars); ``+ - *`` and comparisons on one kind (integers promoted as numpy promotes
  them), ``/`` of floats, ``//`` and ``%`` of integers (Python's floor semantics, 0 for a zero
  divisor as under ``error_model="numpy"``), ``&``/``|`` of bools, ``and``/``or``/``not``
  (short-circuit), unary ``-``, ``x if c else y`` (only the taken side runs), ``min``/``max``
  (Python's order of comparison), ``abs``, ``np.<dtype>(x)`` and ``np.uintp(x)`` conversions,
  ``np.floor/ceil/rint/sqrt/exp/log/abs`` of floats, and the runtime's ``select(c, a, b)``;
  loads ``A[i]``, ``A[i, j]`` (C-contiguous), ``A[k][i]`` (banks).

A loop is written as numba writes ``range``: a count of the iterations left, tested against 0,
beside the loop's value. LLVM unswitches and vectorises that form where it did not the
same loop tested ``i < stop`` (a 3x3 depthwise register tile over a padded window, whose
selects depend on the window's position, ran 2.8 times slower, ``experiments/compile_time.py``).

An index is taken as in bounds and non-negative (as the code generator guarantees, see
:meth:`~autotune.codegen.exprgen.ExprWriter.index`): no wraparound, no bounds check. Float
arithmetic, comparisons and float calls carry the kernel's fast-math flags, as numba's fast-math
rewrite puts them. Anything else raises :class:`Unsupported` with the construct, and the nest is
compiled by numba instead.
"""

from __future__ import annotations

import ast
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

__all__ = ["Constant", "Param", "Unsupported", "translate"]


class Unsupported(Exception):
    """The nest uses a construct outside the subset (its message says which)."""


@dataclass(frozen=True, slots=True)
class Param:
    """One argument of the nest: ``kind`` is ``array`` (C-contiguous, ``ndim`` dimensions),
    ``banks`` (a tuple of ``banks`` 1-d arrays) or ``int``; ``dtype`` a numpy dtype name."""

    name: str
    kind: str
    dtype: str
    ndim: int = 1
    banks: int = 1


@dataclass(frozen=True, slots=True)
class Constant:
    """A module-level value the nest reads: ``value`` of numpy ``dtype`` (``bool``, ints, floats)."""

    dtype: str
    value: float | int | bool


_LLTYPE = {
    "bool": "i1",
    "int8": "i8",
    "uint8": "i8",
    "int16": "i16",
    "uint16": "i16",
    "int32": "i32",
    "uint32": "i32",
    "int64": "i64",
    "uint64": "i64",
    "float32": "float",
    "float64": "double",
}
_MEMTYPE = {**_LLTYPE, "bool": "i8"}
"""How an array stores an element (numpy's bool is a byte)."""
_FLOAT_CALLS = {"floor": "floor", "ceil": "ceil", "rint": "rint", "sqrt": "sqrt", "exp": "exp", "log": "log", "abs": "fabs"}
_CASTS = frozenset(_LLTYPE) - {"bool"} | {"uintp", "intp"}
_INT_CMP = {ast.Eq: "eq", ast.NotEq: "ne", ast.Lt: "lt", ast.LtE: "le", ast.Gt: "gt", ast.GtE: "ge"}
_FLOAT_CMP = {ast.Eq: "oeq", ast.NotEq: "une", ast.Lt: "olt", ast.LtE: "ole", ast.Gt: "ogt", ast.GtE: "oge"}


def _is_float(dtype: str) -> bool:
    return dtype.startswith("float")


def _is_int(dtype: str) -> bool:
    return dtype.startswith(("int", "uint"))


def _bits(dtype: str) -> int:
    return 1 if dtype == "bool" else int(np.dtype(dtype).itemsize * 8)


def _float_literal(value: float, dtype: str) -> str:
    """An LLVM float constant: the double bit pattern of the value (exact for float too)."""
    if dtype == "float32":
        value = float(np.float32(value))
    return "0x" + struct.pack(">d", value).hex().upper()


class _Value(NamedTuple):
    text: str
    dtype: str


class _Local(NamedTuple):
    slot: str
    dtype: str


def _promote(a: str, b: str, what: str) -> str:
    """The dtype numba computes ``a op b`` in, for two integers or two floats."""
    if _is_float(a) != _is_float(b) or "bool" in (a, b):
        raise Unsupported(f"{what} of {a} and {b}")
    result = np.promote_types(a, b).name
    if _is_int(a) and _is_float(result):
        raise Unsupported(f"{what} of {a} and {b} (numpy computes it in {result})")
    return result


class _Emitter:
    """Writes one function's LLVM IR: its blocks, its entry block's slots for locals."""

    def __init__(self, params: list[Param], constants: Callable[[str], Constant | None], fastmath: str) -> None:
        self.params = {p.name: p for p in params}
        self.constants = constants
        self.fast = f"{fastmath} " if fastmath else ""
        self.slots: list[str] = []
        self.body: list[str] = []
        self.locals: dict[str, _Local] = {}
        self.count = 0
        self.block = "start"
        """The block being written (a phi names the blocks it comes from)."""
        self.terminated = False

    # ---- plumbing -------------------------------------------------------
    def tmp(self) -> str:
        self.count += 1
        return f"%t{self.count}"

    def label(self, hint: str) -> str:
        self.count += 1
        return f"{hint}{self.count}"

    def emit(self, line: str) -> None:
        self.body.append("  " + line)

    def op(self, text: str) -> str:
        name = self.tmp()
        self.emit(f"{name} = {text}")
        return name

    def start(self, label: str) -> None:
        if not self.terminated:
            self.emit(f"br label %{label}")
        self.body.append(f"{label}:")
        self.block = label
        self.terminated = False

    def branch(self, text: str) -> None:
        self.emit(text)
        self.terminated = True


    # ---- statements -----------------------------------------------------
    def stmts(self, body: list[ast.stmt]) -> None:
        for s in body:
            method = getattr(self, "stmt_" + type(s).__name__, None)
            if method is None:
                raise Unsupported(f"statement {type(s).__name__} (line {s.lineno})")
            method(s)

    def stmt_Pass(self, s: ast.Pass) -> None:
        pass

    def stmt_Assign(self, s: ast.Assign) -> None:
        if len(s.targets) != 1:
            raise Unsupported(f"chained assignment (line {s.lineno})")
        target = s.targets[0]
        value = self.expr(s.value)
        if isinstance(target, ast.Name):
            self.assign(target.id, value, s.lineno)
        elif isinstance(target, ast.Subscript):
            pointer, dtype = self.element(target)
            stored = self.cast(value, dtype)
            if dtype == "bool":
                stored = _Value(self.op(f"zext i1 {stored.text} to i8"), "uint8")
            self.emit(f"store {_MEMTYPE[dtype]} {stored.text}, ptr {pointer}, align {np.dtype(dtype).itemsize}")
        else:
            raise Unsupported(f"assignment to {type(target).__name__} (line {s.lineno})")

    def assign(self, name: str, value: _Value, line: int) -> None:
        if name in self.params or self.constants(name) is not None:
            raise Unsupported(f"assignment to the argument or global {name!r} (line {line})")
        local = self.locals.get(name)
        if local is None:
            local = self.locals[name] = _Local(f"%v.{name}", value.dtype)
            self.slots.append(f"  {local.slot} = alloca {_LLTYPE[value.dtype]}")
        elif local.dtype != value.dtype:
            raise Unsupported(f"{name!r} assigned {local.dtype} and then {value.dtype} (line {line})")
        self.emit(f"store {_LLTYPE[value.dtype]} {value.text}, ptr {local.slot}")

    def stmt_For(self, s: ast.For) -> None:
        if s.orelse or not isinstance(s.target, ast.Name):
            raise Unsupported(f"for loop with else or a target other than a name (line {s.lineno})")
        call = s.iter
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "range"
                and 1 <= len(call.args) <= 2 and not call.keywords):
            raise Unsupported(f"loop over something other than range(stop) or range(start, stop) (line {s.lineno})")
        bounds = [self.cast(self.int_value(a), "int64") for a in call.args]
        start, stop = (_Value("0", "int64"), bounds[0]) if len(bounds) == 1 else (bounds[0], bounds[1])
        # numba's range loop: a count of the iterations left, down to 0, beside the value
        self.count += 1
        left, value = f"%n{self.count}", f"%i{self.count}"
        self.slots += [f"  {left} = alloca i64", f"  {value} = alloca i64"]
        span = self.op(f"sub nsw i64 {stop.text}, {start.text}")
        positive = self.op(f"icmp sgt i64 {span}, 0")
        count = self.op(f"select i1 {positive}, i64 {span}, i64 0")
        self.emit(f"store i64 {count}, ptr {left}")
        self.emit(f"store i64 {start.text}, ptr {value}")
        head, body, done = self.label("head"), self.label("body"), self.label("done")
        self.start(head)
        n = self.op(f"load i64, ptr {left}")
        more = self.op(f"icmp sgt i64 {n}, 0")
        self.branch(f"br i1 {more}, label %{body}, label %{done}")
        self.start(body)
        i = self.op(f"load i64, ptr {value}")
        self.emit(f"store i64 {self.op(f'add nsw i64 {i}, 1')}, ptr {value}")
        self.emit(f"store i64 {self.op(f'sub nsw i64 {n}, 1')}, ptr {left}")
        self.assign(s.target.id, _Value(i, "int64"), s.lineno)
        self.stmts(s.body)
        self.branch(f"br label %{head}")
        self.start(done)

    def stmt_If(self, s: ast.If) -> None:
        cond = self.truth(self.expr(s.test))
        then, other, done = self.label("then"), self.label("else"), self.label("endif")
        self.branch(f"br i1 {cond.text}, label %{then}, label %{other if s.orelse else done}")
        self.start(then)
        self.stmts(s.body)
        if s.orelse:
            if not self.terminated:
                self.branch(f"br label %{done}")
            self.start(other)
            self.stmts(s.orelse)
        self.start(done)

    # ---- expressions ----------------------------------------------------
    def expr(self, e: ast.expr) -> _Value:
        method = getattr(self, "expr_" + type(e).__name__, None)
        if method is None:
            raise Unsupported(f"expression {type(e).__name__} (line {e.lineno})")
        return method(e)  # type: ignore[no-any-return]

    def int_value(self, e: ast.expr) -> _Value:
        value = self.expr(e)
        if not _is_int(value.dtype):
            raise Unsupported(f"{value.dtype} where an integer is needed (line {e.lineno})")
        return value

    def expr_Constant(self, e: ast.Constant) -> _Value:
        if isinstance(e.value, bool):
            return _Value("true" if e.value else "false", "bool")
        if isinstance(e.value, int):
            return _Value(str(e.value), "int64")
        if isinstance(e.value, float):
            return _Value(_float_literal(e.value, "float64"), "float64")
        raise Unsupported(f"constant {e.value!r} (line {e.lineno})")

    def expr_Name(self, e: ast.Name) -> _Value:
        local = self.locals.get(e.id)
        if local is not None:
            return _Value(self.op(f"load {_LLTYPE[local.dtype]}, ptr {local.slot}"), local.dtype)
        param = self.params.get(e.id)
        if param is not None:
            if param.kind != "int":
                raise Unsupported(f"array {e.id!r} used as a value (line {e.lineno})")
            return _Value(f"%a.{e.id}", param.dtype)
        const = self.constants(e.id)
        if const is None:
            raise Unsupported(f"name {e.id!r} used before it is assigned, or unknown (line {e.lineno})")
        if const.dtype == "bool":
            return _Value("true" if const.value else "false", "bool")
        if _is_float(const.dtype):
            return _Value(_float_literal(float(const.value), const.dtype), const.dtype)
        return _Value(str(int(const.value)), const.dtype)

    def expr_Subscript(self, e: ast.Subscript) -> _Value:
        pointer, dtype = self.element(e)
        loaded = self.op(f"load {_MEMTYPE[dtype]}, ptr {pointer}, align {np.dtype(dtype).itemsize}")
        if dtype == "bool":
            return _Value(self.op(f"icmp ne i8 {loaded}, 0"), "bool")
        return _Value(loaded, dtype)

    def element(self, e: ast.Subscript) -> tuple[str, str]:
        """The address of ``A[i]``, ``A[i, j]`` or ``A[k][i]`` and the array's dtype."""
        base, bank = e.value, None
        if isinstance(e.value, ast.Subscript):
            base, bank = e.value.value, e.value.slice
        if not isinstance(base, ast.Name) or base.id not in self.params:
            raise Unsupported(f"subscript of something other than an array argument (line {e.lineno})")
        param = self.params[base.id]
        if param.kind == "int" or (param.kind == "banks") != (bank is not None):
            raise Unsupported(f"{param.kind} argument {base.id!r} indexed as it is not (line {e.lineno})")
        indices = list(e.slice.elts) if isinstance(e.slice, ast.Tuple) else [e.slice]
        if len(indices) != param.ndim:
            raise Unsupported(f"{param.ndim}-d array {base.id!r} indexed with {len(indices)} (line {e.lineno})")
        flat = self.cast(self.int_value(indices[0]), "int64")
        for axis, index in enumerate(indices[1:], start=1):
            scaled = self.op(f"mul nsw i64 {flat.text}, %a.{base.id}.d{axis}")
            flat = _Value(self.op(f"add nsw i64 {scaled}, {self.cast(self.int_value(index), 'int64').text}"), "int64")
        data = f"%a.{base.id}" if bank is None else self.bank(param, bank)
        pointer = self.op(f"getelementptr {_MEMTYPE[param.dtype]}, ptr {data}, i64 {flat.text}")
        return pointer, param.dtype

    def bank(self, param: Param, index: ast.expr) -> str:
        """The data pointer of bank ``index`` of ``param`` (a constant picks it; else a select chain)."""
        k = self.cast(self.int_value(index), "int64")
        if k.text.lstrip("-").isdigit():
            if not 0 <= int(k.text) < param.banks:
                raise Unsupported(f"bank {k.text} of {param.name!r}, which has {param.banks}")
            return f"%a.{param.name}.b{k.text}"
        pointer = f"%a.{param.name}.b0"
        for b in range(1, param.banks):
            hit = self.op(f"icmp eq i64 {k.text}, {b}")
            pointer = self.op(f"select i1 {hit}, ptr %a.{param.name}.b{b}, ptr {pointer}")
        return pointer

    def expr_BinOp(self, e: ast.BinOp) -> _Value:
        a, b = self.expr(e.left), self.expr(e.right)
        op = type(e.op)
        if op in (ast.BitAnd, ast.BitOr) and a.dtype == b.dtype == "bool":
            return _Value(self.op(f"{'and' if op is ast.BitAnd else 'or'} i1 {a.text}, {b.text}"), "bool")
        dtype = _promote(a.dtype, b.dtype, type(e.op).__name__)
        a, b = self.cast(a, dtype), self.cast(b, dtype)
        ty = _LLTYPE[dtype]
        if _is_float(dtype):
            names = {ast.Add: "fadd", ast.Sub: "fsub", ast.Mult: "fmul", ast.Div: "fdiv"}
            if op not in names:
                raise Unsupported(f"{op.__name__} of {dtype} (line {e.lineno})")
            return _Value(self.op(f"{names[op]} {self.fast}{ty} {a.text}, {b.text}"), dtype)
        names = {ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul"}
        if op in names:
            # numba's signed arithmetic ignores overflow (``nsw``), which lets LLVM fold an index's
            # constant offset into the address
            nsw = " nsw" if dtype.startswith("int") else ""
            return _Value(self.op(f"{names[op]}{nsw} {ty} {a.text}, {b.text}"), dtype)
        if op in (ast.FloorDiv, ast.Mod):
            return self.floor_divmod(a, b, dtype, op is ast.Mod)
        raise Unsupported(f"{op.__name__} of {dtype} (line {e.lineno})")

    def floor_divmod(self, a: _Value, b: _Value, dtype: str, mod: bool) -> _Value:
        """Python's ``a // b`` or ``a % b`` (the quotient rounded down, the remainder taking the
        divisor's sign); 0 when ``b`` is 0 (numba's ``error_model="numpy"``)."""
        ty, signed = _LLTYPE[dtype], dtype.startswith("int")
        constant = b.text.lstrip("-").isdigit()
        if constant and int(b.text) == 0:
            return _Value("0", dtype)
        divisor = b.text
        if not constant:
            zero = self.op(f"icmp eq {ty} {b.text}, 0")
            divisor = self.op(f"select i1 {zero}, {ty} 1, {ty} {b.text}")
        if not signed:
            result = self.op(f"{'urem' if mod else 'udiv'} {ty} {a.text}, {divisor}")
        else:
            quot = self.op(f"sdiv {ty} {a.text}, {divisor}")
            rem = self.op(f"srem {ty} {a.text}, {divisor}")
            nonzero = self.op(f"icmp ne {ty} {rem}, 0")
            rneg = self.op(f"icmp slt {ty} {rem}, 0")
            bneg = self.op(f"icmp slt {ty} {divisor}, 0")
            signs = self.op(f"xor i1 {rneg}, {bneg}")
            adjust = self.op(f"and i1 {nonzero}, {signs}")
            if mod:
                fixed = self.op(f"add {ty} {rem}, {divisor}")
                result = self.op(f"select i1 {adjust}, {ty} {fixed}, {ty} {rem}")
            else:
                fixed = self.op(f"sub {ty} {quot}, 1")
                result = self.op(f"select i1 {adjust}, {ty} {fixed}, {ty} {quot}")
        if not constant:
            result = self.op(f"select i1 {zero}, {ty} 0, {ty} {result}")
        return _Value(result, dtype)

    def expr_UnaryOp(self, e: ast.UnaryOp) -> _Value:
        value = self.expr(e.operand)
        if isinstance(e.op, ast.Not):
            return _Value(self.op(f"xor i1 {self.truth(value).text}, true"), "bool")
        if isinstance(e.op, ast.USub):
            if _is_float(value.dtype):
                return _Value(self.op(f"fneg {self.fast}{_LLTYPE[value.dtype]} {value.text}"), value.dtype)
            if _is_int(value.dtype):
                if value.text.isdigit():
                    return _Value(f"-{value.text}", value.dtype)
                return _Value(self.op(f"sub {_LLTYPE[value.dtype]} 0, {value.text}"), value.dtype)
        if isinstance(e.op, ast.UAdd) and value.dtype != "bool":
            return value
        raise Unsupported(f"unary {type(e.op).__name__} of {value.dtype} (line {e.lineno})")

    def expr_Compare(self, e: ast.Compare) -> _Value:
        if len(e.ops) != 1:
            raise Unsupported(f"chained comparison (line {e.lineno})")
        return self.compare(type(e.ops[0]), self.expr(e.left), self.expr(e.comparators[0]), e.lineno)

    def compare(self, op: type, a: _Value, b: _Value, line: int) -> _Value:
        if op not in _INT_CMP:
            raise Unsupported(f"comparison {op.__name__} (line {line})")
        if a.dtype == b.dtype == "bool" and op in (ast.Eq, ast.NotEq):
            return _Value(self.op(f"icmp {_INT_CMP[op]} i1 {a.text}, {b.text}"), "bool")
        dtype = _promote(a.dtype, b.dtype, "comparison")
        a, b = self.cast(a, dtype), self.cast(b, dtype)
        if _is_float(dtype):
            return _Value(self.op(f"fcmp {self.fast}{_FLOAT_CMP[op]} {_LLTYPE[dtype]} {a.text}, {b.text}"), "bool")
        pred = _INT_CMP[op]
        if pred not in ("eq", "ne"):
            pred = ("s" if dtype.startswith("int") else "u") + pred
        return _Value(self.op(f"icmp {pred} {_LLTYPE[dtype]} {a.text}, {b.text}"), "bool")

    def expr_BoolOp(self, e: ast.BoolOp) -> _Value:
        """``a and b`` / ``a or b`` of bools: ``b`` runs only when ``a`` does not decide."""
        is_and = isinstance(e.op, ast.And)
        result = self.truth_strict(self.expr(e.values[0]), e.lineno)
        for operand in e.values[1:]:
            rhs, done = self.label("rhs"), self.label("bool")
            came = self.block
            self.branch(f"br i1 {result}, label %{rhs if is_and else done}, label %{done if is_and else rhs}")
            self.start(rhs)
            value = self.truth_strict(self.expr(operand), e.lineno)
            came_rhs = self.block
            self.start(done)
            short = "false" if is_and else "true"
            result = self.op(f"phi i1 [ {short}, %{came} ], [ {value}, %{came_rhs} ]")
        return _Value(result, "bool")

    def truth_strict(self, value: _Value, line: int) -> str:
        if value.dtype != "bool":
            raise Unsupported(f"and/or of {value.dtype} (its value is an operand, not a bool) (line {line})")
        return value.text

    def truth(self, value: _Value) -> _Value:
        """``value`` as a bool (numbers: not zero)."""
        if value.dtype == "bool":
            return value
        if _is_float(value.dtype):
            return _Value(self.op(f"fcmp {self.fast}une {_LLTYPE[value.dtype]} {value.text}, 0.0"), "bool")
        return _Value(self.op(f"icmp ne {_LLTYPE[value.dtype]} {value.text}, 0"), "bool")

    def expr_IfExp(self, e: ast.IfExp) -> _Value:
        """``a if c else b``: only the taken side runs; both sides must have one dtype."""
        cond = self.truth(self.expr(e.test))
        then, other, done = self.label("ifx"), self.label("elsex"), self.label("endx")
        self.branch(f"br i1 {cond.text}, label %{then}, label %{other}")
        self.start(then)
        a = self.expr(e.body)
        came_a = self.block
        self.branch(f"br label %{done}")
        self.start(other)
        b = self.expr(e.orelse)
        came_b = self.block
        if a.dtype != b.dtype:
            raise Unsupported(f"conditional expression of {a.dtype} and {b.dtype} (line {e.lineno})")
        self.start(done)
        return _Value(self.op(f"phi {_LLTYPE[a.dtype]} [ {a.text}, %{came_a} ], [ {b.text}, %{came_b} ]"), a.dtype)

    def unify(self, a: _Value, b: _Value, line: int) -> str:
        if a.dtype == b.dtype:
            return a.dtype
        return _promote(a.dtype, b.dtype, f"values of one expression (line {line})")

    def expr_Call(self, e: ast.Call) -> _Value:
        if e.keywords:
            raise Unsupported(f"call with keywords (line {e.lineno})")
        func = e.func
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and self.callee(func.value.id) == "numpy":
            return self.numpy_call(func.attr, e)
        if not isinstance(func, ast.Name):
            raise Unsupported(f"call of {ast.dump(func)} (line {e.lineno})")
        kind = self.callee(func.id)
        args = [self.expr(a) for a in e.args]
        if kind in ("min", "max") and len(args) >= 2:
            return self.minmax(kind, args, e.lineno)
        if kind == "abs" and len(args) == 1:
            return self.absolute(args[0])
        if kind == "select" and len(args) == 3:
            cond = self.truth(args[0])
            dtype = self.unify(args[1], args[2], e.lineno)
            a, b = self.cast(args[1], dtype), self.cast(args[2], dtype)
            ty = _LLTYPE[dtype]
            return _Value(self.op(f"select i1 {cond.text}, {ty} {a.text}, {ty} {b.text}"), dtype)
        raise Unsupported(f"call of {func.id!r} with {len(args)} arguments (line {e.lineno})")

    callee: Callable[[str], str]
    """What a called global name is (``min``, ``max``, ``abs``, ``select``), set by :func:`translate`."""

    def minmax(self, kind: str, args: list[_Value], line: int) -> _Value:
        """numba's ``max(a, b, ...)``: left to right, a value replaces the result when greater
        (``min``: less), so a NaN after the first value is never chosen."""
        acc = args[0]
        for value in args[1:]:
            dtype = self.unify(acc, value, line)
            acc, value = self.cast(acc, dtype), self.cast(value, dtype)
            better = self.compare(ast.Gt if kind == "max" else ast.Lt, value, acc, line)
            ty = _LLTYPE[dtype]
            acc = _Value(self.op(f"select i1 {better.text}, {ty} {value.text}, {ty} {acc.text}"), dtype)
        return acc

    def absolute(self, value: _Value) -> _Value:
        ty = _LLTYPE[value.dtype]
        if _is_float(value.dtype):
            return self.intrinsic("fabs", value)
        if value.dtype.startswith("uint") or value.dtype == "bool":
            return value
        neg = self.op(f"icmp slt {ty} {value.text}, 0")
        flipped = self.op(f"sub {ty} 0, {value.text}")
        return _Value(self.op(f"select i1 {neg}, {ty} {flipped}, {ty} {value.text}"), value.dtype)

    def intrinsic(self, name: str, value: _Value) -> _Value:
        ty = _LLTYPE[value.dtype]
        suffix = "f32" if value.dtype == "float32" else "f64"
        self.declares.add(f"declare {ty} @llvm.{name}.{suffix}({ty})")
        return _Value(self.op(f"call {self.fast}{ty} @llvm.{name}.{suffix}({ty} {value.text})"), value.dtype)

    declares: set[str]

    def numpy_call(self, name: str, e: ast.Call) -> _Value:
        if len(e.args) != 1:
            raise Unsupported(f"np.{name} with {len(e.args)} arguments (line {e.lineno})")
        value = self.expr(e.args[0])
        if name in _CASTS:
            return self.cast(value, {"uintp": "uint64", "intp": "int64"}.get(name, name))
        if name in _FLOAT_CALLS and _is_float(value.dtype):
            return self.intrinsic(_FLOAT_CALLS[name], value)
        raise Unsupported(f"np.{name} of {value.dtype} (line {e.lineno})")

    def cast(self, value: _Value, dtype: str) -> _Value:
        """``value`` converted to ``dtype`` as numba converts (C semantics; bool is 0 or 1)."""
        src = value.dtype
        if src == dtype:
            return value
        if dtype == "bool":
            return self.truth(value)
        to, frm = _LLTYPE[dtype], _LLTYPE[src]
        literal = value.text.lstrip("-").isdigit() and src != "bool"
        if _is_int(src) or src == "bool":
            if _is_float(dtype):
                op = "uitofp" if src.startswith("uint") or src == "bool" else "sitofp"
                return _Value(self.op(f"{op} {frm} {value.text} to {to}"), dtype)
            if to == frm or literal:
                if literal:
                    n = int(value.text) % (1 << _bits(dtype))
                    if dtype.startswith("int") and n >= 1 << (_bits(dtype) - 1):
                        n -= 1 << _bits(dtype)
                    return _Value(str(n), dtype)
                return _Value(value.text, dtype)
            if _bits(dtype) < _bits(src):
                return _Value(self.op(f"trunc {frm} {value.text} to {to}"), dtype)
            op = "zext" if src.startswith("uint") or src == "bool" else "sext"
            return _Value(self.op(f"{op} {frm} {value.text} to {to}"), dtype)
        if _is_float(dtype):
            op = "fpext" if _bits(dtype) > _bits(src) else "fptrunc"
            return _Value(self.op(f"{op} {frm} {value.text} to {to}"), dtype)
        op = "fptoui" if dtype.startswith("uint") else "fptosi"
        return _Value(self.op(f"{op} {frm} {value.text} to {to}"), dtype)


def _signature(params: list[Param]) -> str:
    parts: list[str] = []
    for p in params:
        if p.kind == "int":
            parts.append(f"{_LLTYPE[p.dtype]} %a.{p.name}")
        elif p.kind == "banks":
            parts += [f"ptr %a.{p.name}.b{k}" for k in range(p.banks)]
        else:
            parts.append(f"ptr %a.{p.name}")
            parts += [f"i64 %a.{p.name}.d{axis}" for axis in range(1, p.ndim)]
    return ", ".join(parts)


def translate(
    source: str,
    params: list[Param],
    constants: Callable[[str], Constant | None],
    callees: Callable[[str], str | None],
    symbol: str,
    fastmath: tuple[str, ...],
) -> str:
    """The LLVM IR module text of the function defined in ``source`` (its decorators ignored),
    as the function ``symbol`` taking ``params`` in order: an array as its data pointer (an N-d
    array also its dimensions after the first, as ``i64``), banks as one pointer each, an integer
    as itself. ``constants`` gives the module-level value of a name (None: not one);
    ``callees`` what a called global name is (``min``, ``max``, ``abs``, ``select``, ``numpy`` for
    the module whose functions ``np.<name>`` calls, or None).
    Raises :class:`Unsupported` for a construct outside the subset (see the module docstring)."""
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise Unsupported(f"source does not parse: {exc}") from exc
    funcs = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
    if len(funcs) != 1:
        raise Unsupported(f"source defines {len(funcs)} functions, not one")
    fn = funcs[0]
    names = [a.arg for a in fn.args.args]
    if names != [p.name for p in params] or fn.args.vararg or fn.args.kwarg or fn.args.kwonlyargs:
        raise Unsupported(f"arguments ({', '.join(names)}) do not match the signature's {len(params)}")
    emitter = _Emitter(params, constants, " ".join(fastmath))

    def callee(name: str) -> str:
        kind = callees(name)
        if kind is None:
            raise Unsupported(f"call of {name!r}")
        return kind

    emitter.callee = callee  # type: ignore[method-assign]
    emitter.declares = set()
    emitter.stmts(fn.body)
    if not emitter.terminated:
        emitter.emit("ret void")
    lines = [
        f"define void @{symbol}({_signature(params)}) #0 {{",
        "entry:",
        *emitter.slots,
        "  br label %start",
        "start:",
        *emitter.body,
        "}",
        "",
        *sorted(emitter.declares),
        'attributes #0 = { nounwind }',
        "",
    ]
    return "\n".join(lines)
