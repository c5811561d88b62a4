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
  ``A[k][i] = e`` (the value converted to the array's dtype), and ``f(A, B, i)``, a call of
  another translated nest (:class:`Callee`) with arrays the function was given and integers;
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
from collections.abc import Callable, Collection

import numpy as np

from .nest_llvm_exprs import Expressions
from .nest_llvm_types import LLTYPE, MEMTYPE, Callee, Constant, Local, Param, Unsupported, Value

__all__ = ["Callee", "Constant", "Param", "Unsupported", "translate"]


class _Emitter(Expressions):
    """The statements of one function (its expressions: :class:`~.nest_llvm_exprs.Expressions`)."""

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
                stored = Value(self.op(f"zext i1 {stored.text} to i8"), "uint8")
            self.emit(f"store {MEMTYPE[dtype]} {stored.text}, ptr {pointer}, align {np.dtype(dtype).itemsize}")
        else:
            raise Unsupported(f"assignment to {type(target).__name__} (line {s.lineno})")

    def assign(self, name: str, value: Value, line: int) -> None:
        if name in self.params or self.constants(name) is not None:
            raise Unsupported(f"assignment to the argument or global {name!r} (line {line})")
        local = self.locals.get(name)
        if local is None:
            local = self.locals[name] = Local(f"%v.{name}", value.dtype)
            self.slots.append(f"  {local.slot} = alloca {LLTYPE[value.dtype]}")
        elif local.dtype != value.dtype:
            raise Unsupported(f"{name!r} assigned {local.dtype} and then {value.dtype} (line {line})")
        self.emit(f"store {LLTYPE[value.dtype]} {value.text}, ptr {local.slot}")

    def stmt_For(self, s: ast.For) -> None:
        if s.orelse or not isinstance(s.target, ast.Name):
            raise Unsupported(f"for loop with else or a target other than a name (line {s.lineno})")
        call = s.iter
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "range"
                and 1 <= len(call.args) <= 2 and not call.keywords):
            raise Unsupported(f"loop over something other than range(stop) or range(start, stop) (line {s.lineno})")
        bounds = [self.cast(self.int_value(a), "int64") for a in call.args]
        start, stop = (Value("0", "int64"), bounds[0]) if len(bounds) == 1 else (bounds[0], bounds[1])
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
        self.assign(s.target.id, Value(i, "int64"), s.lineno)
        self.stmts(s.body)
        self.branch(f"br label %{head}")
        self.start(done)

    def stmt_Expr(self, s: ast.Expr) -> None:
        """``f(A, B, i)``: a call of another translated nest, each array passed as the callee takes
        it (its data pointer and dimensions, or its banks), each integer converted to its type."""
        call = s.value
        if not isinstance(call, ast.Call) or not isinstance(call.func, ast.Name):
            raise Unsupported(f"expression statement other than a call of a nest (line {s.lineno})")
        name = call.func.id
        callee = self.callees(name)
        if not isinstance(callee, Callee):
            raise Unsupported(f"call of {name!r} as a statement (line {s.lineno})")
        if call.keywords or len(call.args) != len(callee.params):
            raise Unsupported(f"call of the nest {name!r} with {len(call.args)} arguments, not {len(callee.params)} (line {s.lineno})")
        args: list[str] = []
        for param, arg in zip(callee.params, call.args):
            if param.kind == "int":
                args.append(f"{LLTYPE[param.dtype]} {self.cast(self.int_value(arg), param.dtype).text}")
                continue
            mine = self.params.get(arg.id) if isinstance(arg, ast.Name) else None
            if mine is None or (mine.kind, mine.dtype, mine.ndim, mine.banks) != (param.kind, param.dtype, param.ndim, param.banks):
                raise Unsupported(
                    f"argument {param.name!r} of the nest {name!r} is not an array argument of its kind (line {s.lineno})"
                )
            args += [f"{ty} {value}" for ty, value in _flat_args(mine)]
        types = ", ".join(ty for p in callee.params for ty, _ in _flat_args(p))
        self.declares.add(f"declare void @{callee.symbol}({types})")
        self.emit(f"call void @{callee.symbol}({', '.join(args)})")

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

def _flat_args(p: Param) -> list[tuple[str, str]]:
    """``p`` as the LLVM arguments it is passed as, (type, value): an integer as itself, an array
    as its data pointer and its dimensions after the first, banks as one pointer each."""
    if p.kind == "int":
        return [(LLTYPE[p.dtype], f"%a.{p.name}")]
    if p.kind == "banks":
        return [("ptr", f"%a.{p.name}.b{k}") for k in range(p.banks)]
    return [("ptr", f"%a.{p.name}")] + [("i64", f"%a.{p.name}.d{axis}") for axis in range(1, p.ndim)]


def _signature(params: list[Param], noalias: bool | Collection[str]) -> str:
    """The function's parameter list; the pointers of the arrays ``noalias`` names (True: of every
    array) are ``noalias``."""

    def marked(p: Param) -> bool:
        return noalias is True or (not isinstance(noalias, bool) and p.name in noalias)

    return ", ".join(
        f"{'ptr noalias' if ty == 'ptr' and marked(p) else ty} {value}" for p in params for ty, value in _flat_args(p)
    )


def translate(
    source: str,
    params: list[Param],
    constants: Callable[[str], Constant | None],
    callees: Callable[[str], str | Callee | None],
    symbol: str,
    fastmath: tuple[str, ...],
    noalias: bool | Collection[str] = False,
) -> str:
    """The LLVM IR module text of the function defined in ``source`` (its decorators ignored),
    as the function ``symbol`` taking ``params`` in order: an array as its data pointer (an N-d
    array also its dimensions after the first, as ``i64``), banks as one pointer each, an integer
    as itself. ``constants`` gives the module-level value of a name (None: not one);
    ``callees`` what a called global name is (``min``, ``max``, ``abs``, ``select``, ``numpy`` for
    the module whose functions ``np.<name>`` calls, a :class:`Callee` for a translated nest, or
    None); a called nest is declared in the module, whose user links its code.
    ``noalias``: the arrays (True: every array argument) that the caller promises share no memory
    with another argument (a bank with no other bank either), as numba takes for the arrays of a
    parallel loop's body; their pointers are marked ``noalias``.
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
    emitter = _Emitter(params, constants, callees, " ".join(fastmath))
    emitter.stmts(fn.body)
    if not emitter.terminated:
        emitter.emit("ret void")
    lines = [
        f"define void @{symbol}({_signature(params, noalias)}) #0 {{",
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
