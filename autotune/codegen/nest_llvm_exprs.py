"""Expressions of a translated nest (:mod:`~autotune.codegen.nest_llvm`) written as LLVM
instructions, with the meaning numba gives them (the list is in that module's docstring)."""

from __future__ import annotations

import ast
from collections.abc import Callable

import numpy as np

from .nest_llvm_types import (
    CASTS,
    FLOAT_CALLS,
    FLOAT_CMP,
    INT_CMP,
    LLTYPE,
    MEMTYPE,
    Callee,
    Constant,
    Local,
    Param,
    Unsupported,
    Value,
    bits,
    float_literal,
    is_float,
    is_int,
    promote,
)

__all__ = ["Expressions"]


class Expressions:
    """Writes one function's LLVM IR, its expressions here (its statements: :class:`~autotune.codegen.nest_llvm._Emitter`):
    its blocks, its entry block's slots for locals."""

    def __init__(
        self,
        params: list[Param],
        constants: Callable[[str], Constant | None],
        callees: Callable[[str], str | Callee | None],
        fastmath: str,
    ) -> None:
        self.params = {p.name: p for p in params}
        self.constants = constants
        self.callees = callees
        self.declares: set[str] = set()
        """The LLVM intrinsics the function calls, declared after it."""
        self.fast = f"{fastmath} " if fastmath else ""
        self.slots: list[str] = []
        self.body: list[str] = []
        self.locals: dict[str, Local] = {}
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


    # ---- expressions ----------------------------------------------------
    def expr(self, e: ast.expr) -> Value:
        method = getattr(self, "expr_" + type(e).__name__, None)
        if method is None:
            raise Unsupported(f"expression {type(e).__name__} (line {e.lineno})")
        return method(e)  # type: ignore[no-any-return]

    def int_value(self, e: ast.expr) -> Value:
        value = self.expr(e)
        if not is_int(value.dtype):
            raise Unsupported(f"{value.dtype} where an integer is needed (line {e.lineno})")
        return value

    def expr_Constant(self, e: ast.Constant) -> Value:
        if isinstance(e.value, bool):
            return Value("true" if e.value else "false", "bool")
        if isinstance(e.value, int):
            return Value(str(e.value), "int64")
        if isinstance(e.value, float):
            return Value(float_literal(e.value, "float64"), "float64")
        raise Unsupported(f"constant {e.value!r} (line {e.lineno})")

    def expr_Name(self, e: ast.Name) -> Value:
        local = self.locals.get(e.id)
        if local is not None:
            return Value(self.op(f"load {LLTYPE[local.dtype]}, ptr {local.slot}"), local.dtype)
        param = self.params.get(e.id)
        if param is not None:
            if param.kind != "int":
                raise Unsupported(f"array {e.id!r} used as a value (line {e.lineno})")
            return Value(f"%a.{e.id}", param.dtype)
        const = self.constants(e.id)
        if const is None:
            raise Unsupported(f"name {e.id!r} used before it is assigned, or unknown (line {e.lineno})")
        if const.dtype == "bool":
            return Value("true" if const.value else "false", "bool")
        if is_float(const.dtype):
            return Value(float_literal(float(const.value), const.dtype), const.dtype)
        return Value(str(int(const.value)), const.dtype)

    def expr_Subscript(self, e: ast.Subscript) -> Value:
        pointer, dtype = self.element(e)
        loaded = self.op(f"load {MEMTYPE[dtype]}, ptr {pointer}, align {np.dtype(dtype).itemsize}")
        if dtype == "bool":
            return Value(self.op(f"icmp ne i8 {loaded}, 0"), "bool")
        return Value(loaded, dtype)

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
            flat = Value(self.op(f"add nsw i64 {scaled}, {self.cast(self.int_value(index), 'int64').text}"), "int64")
        data = f"%a.{base.id}" if bank is None else self.bank(param, bank)
        pointer = self.op(f"getelementptr {MEMTYPE[param.dtype]}, ptr {data}, i64 {flat.text}")
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

    def expr_BinOp(self, e: ast.BinOp) -> Value:
        a, b = self.expr(e.left), self.expr(e.right)
        op = type(e.op)
        if op in (ast.BitAnd, ast.BitOr) and a.dtype == b.dtype == "bool":
            return Value(self.op(f"{'and' if op is ast.BitAnd else 'or'} i1 {a.text}, {b.text}"), "bool")
        dtype = promote(a.dtype, b.dtype, type(e.op).__name__)
        a, b = self.cast(a, dtype), self.cast(b, dtype)
        ty = LLTYPE[dtype]
        if is_float(dtype):
            names = {ast.Add: "fadd", ast.Sub: "fsub", ast.Mult: "fmul", ast.Div: "fdiv"}
            if op not in names:
                raise Unsupported(f"{op.__name__} of {dtype} (line {e.lineno})")
            return Value(self.op(f"{names[op]} {self.fast}{ty} {a.text}, {b.text}"), dtype)
        names = {ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul"}
        if op in names:
            # numba's signed arithmetic ignores overflow (``nsw``), which lets LLVM fold an index's
            # constant offset into the address
            nsw = " nsw" if dtype.startswith("int") else ""
            return Value(self.op(f"{names[op]}{nsw} {ty} {a.text}, {b.text}"), dtype)
        if op in (ast.FloorDiv, ast.Mod):
            return self.floor_divmod(a, b, dtype, op is ast.Mod)
        raise Unsupported(f"{op.__name__} of {dtype} (line {e.lineno})")

    def floor_divmod(self, a: Value, b: Value, dtype: str, mod: bool) -> Value:
        """Python's ``a // b`` or ``a % b`` (the quotient rounded down, the remainder taking the
        divisor's sign); 0 when ``b`` is 0 (numba's ``error_model="numpy"``)."""
        ty, signed = LLTYPE[dtype], dtype.startswith("int")
        constant = b.text.lstrip("-").isdigit()
        if constant and int(b.text) == 0:
            return Value("0", dtype)
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
        return Value(result, dtype)

    def expr_UnaryOp(self, e: ast.UnaryOp) -> Value:
        value = self.expr(e.operand)
        if isinstance(e.op, ast.Not):
            return Value(self.op(f"xor i1 {self.truth(value).text}, true"), "bool")
        if isinstance(e.op, ast.USub):
            if is_float(value.dtype):
                return Value(self.op(f"fneg {self.fast}{LLTYPE[value.dtype]} {value.text}"), value.dtype)
            if is_int(value.dtype):
                if value.text.isdigit():
                    return Value(f"-{value.text}", value.dtype)
                return Value(self.op(f"sub {LLTYPE[value.dtype]} 0, {value.text}"), value.dtype)
        if isinstance(e.op, ast.UAdd) and value.dtype != "bool":
            return value
        raise Unsupported(f"unary {type(e.op).__name__} of {value.dtype} (line {e.lineno})")

    def expr_Compare(self, e: ast.Compare) -> Value:
        if len(e.ops) != 1:
            raise Unsupported(f"chained comparison (line {e.lineno})")
        return self.compare(type(e.ops[0]), self.expr(e.left), self.expr(e.comparators[0]), e.lineno)

    def compare(self, op: type, a: Value, b: Value, line: int) -> Value:
        if op not in INT_CMP:
            raise Unsupported(f"comparison {op.__name__} (line {line})")
        if a.dtype == b.dtype == "bool" and op in (ast.Eq, ast.NotEq):
            return Value(self.op(f"icmp {INT_CMP[op]} i1 {a.text}, {b.text}"), "bool")
        dtype = promote(a.dtype, b.dtype, "comparison")
        a, b = self.cast(a, dtype), self.cast(b, dtype)
        if is_float(dtype):
            return Value(self.op(f"fcmp {self.fast}{FLOAT_CMP[op]} {LLTYPE[dtype]} {a.text}, {b.text}"), "bool")
        pred = INT_CMP[op]
        if pred not in ("eq", "ne"):
            pred = ("s" if dtype.startswith("int") else "u") + pred
        return Value(self.op(f"icmp {pred} {LLTYPE[dtype]} {a.text}, {b.text}"), "bool")

    def expr_BoolOp(self, e: ast.BoolOp) -> Value:
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
        return Value(result, "bool")

    def truth_strict(self, value: Value, line: int) -> str:
        if value.dtype != "bool":
            raise Unsupported(f"and/or of {value.dtype} (its value is an operand, not a bool) (line {line})")
        return value.text

    def truth(self, value: Value) -> Value:
        """``value`` as a bool (numbers: not zero)."""
        if value.dtype == "bool":
            return value
        if is_float(value.dtype):
            return Value(self.op(f"fcmp {self.fast}une {LLTYPE[value.dtype]} {value.text}, 0.0"), "bool")
        return Value(self.op(f"icmp ne {LLTYPE[value.dtype]} {value.text}, 0"), "bool")

    def expr_IfExp(self, e: ast.IfExp) -> Value:
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
        return Value(self.op(f"phi {LLTYPE[a.dtype]} [ {a.text}, %{came_a} ], [ {b.text}, %{came_b} ]"), a.dtype)

    def unify(self, a: Value, b: Value, line: int) -> str:
        if a.dtype == b.dtype:
            return a.dtype
        return promote(a.dtype, b.dtype, f"values of one expression (line {line})")

    def expr_Call(self, e: ast.Call) -> Value:
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
            ty = LLTYPE[dtype]
            return Value(self.op(f"select i1 {cond.text}, {ty} {a.text}, {ty} {b.text}"), dtype)
        raise Unsupported(f"call of {func.id!r} with {len(args)} arguments (line {e.lineno})")

    def callee(self, name: str) -> str:
        """What the called global ``name`` is (``min``, ``max``, ``abs``, ``select``, ``numpy``)."""
        kind = self.callees(name)
        if kind is None:
            raise Unsupported(f"call of {name!r}")
        if isinstance(kind, Callee):
            raise Unsupported(f"call of the nest {name!r} as a value")
        return kind

    def minmax(self, kind: str, args: list[Value], line: int) -> Value:
        """numba's ``max(a, b, ...)``: left to right, a value replaces the result when greater
        (``min``: less), so a NaN after the first value is never chosen."""
        acc = args[0]
        for value in args[1:]:
            dtype = self.unify(acc, value, line)
            acc, value = self.cast(acc, dtype), self.cast(value, dtype)
            better = self.compare(ast.Gt if kind == "max" else ast.Lt, value, acc, line)
            ty = LLTYPE[dtype]
            acc = Value(self.op(f"select i1 {better.text}, {ty} {value.text}, {ty} {acc.text}"), dtype)
        return acc

    def absolute(self, value: Value) -> Value:
        ty = LLTYPE[value.dtype]
        if is_float(value.dtype):
            return self.intrinsic("fabs", value)
        if value.dtype.startswith("uint") or value.dtype == "bool":
            return value
        neg = self.op(f"icmp slt {ty} {value.text}, 0")
        flipped = self.op(f"sub {ty} 0, {value.text}")
        return Value(self.op(f"select i1 {neg}, {ty} {flipped}, {ty} {value.text}"), value.dtype)

    def intrinsic(self, name: str, value: Value) -> Value:
        ty = LLTYPE[value.dtype]
        suffix = "f32" if value.dtype == "float32" else "f64"
        self.declares.add(f"declare {ty} @llvm.{name}.{suffix}({ty})")
        return Value(self.op(f"call {self.fast}{ty} @llvm.{name}.{suffix}({ty} {value.text})"), value.dtype)

    def numpy_call(self, name: str, e: ast.Call) -> Value:
        if len(e.args) != 1:
            raise Unsupported(f"np.{name} with {len(e.args)} arguments (line {e.lineno})")
        value = self.expr(e.args[0])
        if name in CASTS:
            return self.cast(value, {"uintp": "uint64", "intp": "int64"}.get(name, name))
        if name in FLOAT_CALLS and is_float(value.dtype):
            return self.intrinsic(FLOAT_CALLS[name], value)
        raise Unsupported(f"np.{name} of {value.dtype} (line {e.lineno})")

    def cast(self, value: Value, dtype: str) -> Value:
        """``value`` converted to ``dtype`` as numba converts (C semantics; bool is 0 or 1)."""
        src = value.dtype
        if src == dtype:
            return value
        if dtype == "bool":
            return self.truth(value)
        to, frm = LLTYPE[dtype], LLTYPE[src]
        literal = value.text.lstrip("-").isdigit() and src != "bool"
        if is_int(src) or src == "bool":
            if is_float(dtype):
                op = "uitofp" if src.startswith("uint") or src == "bool" else "sitofp"
                return Value(self.op(f"{op} {frm} {value.text} to {to}"), dtype)
            if to == frm or literal:
                if literal:
                    n = int(value.text) % (1 << bits(dtype))
                    if dtype.startswith("int") and n >= 1 << (bits(dtype) - 1):
                        n -= 1 << bits(dtype)
                    return Value(str(n), dtype)
                return Value(value.text, dtype)
            if bits(dtype) < bits(src):
                return Value(self.op(f"trunc {frm} {value.text} to {to}"), dtype)
            op = "zext" if src.startswith("uint") or src == "bool" else "sext"
            return Value(self.op(f"{op} {frm} {value.text} to {to}"), dtype)
        if is_float(dtype):
            op = "fpext" if bits(dtype) > bits(src) else "fptrunc"
            return Value(self.op(f"{op} {frm} {value.text} to {to}"), dtype)
        op = "fptoui" if dtype.startswith("uint") else "fptosi"
        return Value(self.op(f"{op} {frm} {value.text} to {to}"), dtype)
