"""Expression nodes of the IR.

Nodes are frozen, slotted dataclasses compared structurally, except :class:`Var`
(and :class:`~autotune.ir.buffer.Buffer`), which are compared by identity as in
TVM: two loops named ``i`` are different variables.

Arithmetic operators build nodes (``i * 4 + j``); ``==`` stays structural
equality, so equality tests are built with :func:`eq` / :func:`ne`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Union

if TYPE_CHECKING:
    from .buffer import Buffer

INT = "int32"
BOOL = "bool"


class Node:
    """Base of every IR node (expressions, statements, regions, functions)."""

    __slots__ = ()

    def __str__(self) -> str:
        from .printer import to_text

        return to_text(self)


class Expr(Node):
    """Base of expressions. ``dtype`` is a property or a field of every subclass."""

    __slots__ = ()
    dtype: str

    def _other(self, other: ExprLike) -> Expr:
        """``other`` as an expression; Python numbers take this expression's dtype."""
        return const(other, self.dtype if self.dtype != BOOL else None)

    def __add__(self, other: ExprLike) -> Expr:
        return Add(self, self._other(other))

    def __radd__(self, other: ExprLike) -> Expr:
        return Add(self._other(other), self)

    def __sub__(self, other: ExprLike) -> Expr:
        return Sub(self, self._other(other))

    def __rsub__(self, other: ExprLike) -> Expr:
        return Sub(self._other(other), self)

    def __mul__(self, other: ExprLike) -> Expr:
        return Mul(self, self._other(other))

    def __rmul__(self, other: ExprLike) -> Expr:
        return Mul(self._other(other), self)

    def __truediv__(self, other: ExprLike) -> Expr:
        return Div(self, self._other(other))

    def __floordiv__(self, other: ExprLike) -> Expr:
        return FloorDiv(self, self._other(other))

    def __mod__(self, other: ExprLike) -> Expr:
        return FloorMod(self, self._other(other))

    def __neg__(self) -> Expr:
        return Sub(const(0, self.dtype), self)

    def __lt__(self, other: ExprLike) -> Expr:
        return LT(self, self._other(other))

    def __le__(self, other: ExprLike) -> Expr:
        return LE(self, self._other(other))

    def __gt__(self, other: ExprLike) -> Expr:
        return GT(self, self._other(other))

    def __ge__(self, other: ExprLike) -> Expr:
        return GE(self, self._other(other))


ExprLike = Union[Expr, int, float]  # noqa: UP007 (a runtime alias, evaluated on 3.10)


@dataclass(frozen=True, slots=True)
class IntImm(Expr):
    value: int
    dtype: str = INT


@dataclass(frozen=True, slots=True)
class FloatImm(Expr):
    value: float
    dtype: str = "float32"


@dataclass(frozen=True, slots=True, eq=False)
class Var(Expr):
    """A variable, compared by identity."""

    name: str
    dtype: str = INT

    def __repr__(self) -> str:
        return f"Var({self.name!r})"


@dataclass(frozen=True, slots=True)
class BinaryOp(Expr):
    a: Expr
    b: Expr
    symbol: ClassVar[str] = "?"

    @property
    def dtype(self) -> str:  # type: ignore[override]
        return self.a.dtype


@dataclass(frozen=True, slots=True)
class Add(BinaryOp):
    symbol: ClassVar[str] = "+"


@dataclass(frozen=True, slots=True)
class Sub(BinaryOp):
    symbol: ClassVar[str] = "-"


@dataclass(frozen=True, slots=True)
class Mul(BinaryOp):
    symbol: ClassVar[str] = "*"


@dataclass(frozen=True, slots=True)
class Div(BinaryOp):
    """True division (floating point)."""

    symbol: ClassVar[str] = "/"


@dataclass(frozen=True, slots=True)
class FloorDiv(BinaryOp):
    symbol: ClassVar[str] = "//"


@dataclass(frozen=True, slots=True)
class FloorMod(BinaryOp):
    symbol: ClassVar[str] = "%"


@dataclass(frozen=True, slots=True)
class Min(BinaryOp):
    symbol: ClassVar[str] = "min"


@dataclass(frozen=True, slots=True)
class Max(BinaryOp):
    symbol: ClassVar[str] = "max"


@dataclass(frozen=True, slots=True)
class CmpOp(BinaryOp):
    @property
    def dtype(self) -> str:  # type: ignore[override]
        return BOOL


@dataclass(frozen=True, slots=True)
class EQ(CmpOp):
    symbol: ClassVar[str] = "=="


@dataclass(frozen=True, slots=True)
class NE(CmpOp):
    symbol: ClassVar[str] = "!="


@dataclass(frozen=True, slots=True)
class LT(CmpOp):
    symbol: ClassVar[str] = "<"


@dataclass(frozen=True, slots=True)
class LE(CmpOp):
    symbol: ClassVar[str] = "<="


@dataclass(frozen=True, slots=True)
class GT(CmpOp):
    symbol: ClassVar[str] = ">"


@dataclass(frozen=True, slots=True)
class GE(CmpOp):
    symbol: ClassVar[str] = ">="


@dataclass(frozen=True, slots=True)
class And(CmpOp):
    symbol: ClassVar[str] = "and"


@dataclass(frozen=True, slots=True)
class Or(CmpOp):
    symbol: ClassVar[str] = "or"


@dataclass(frozen=True, slots=True)
class Not(Expr):
    a: Expr
    dtype: str = BOOL


@dataclass(frozen=True, slots=True)
class Select(Expr):
    cond: Expr
    true_value: Expr
    false_value: Expr

    @property
    def dtype(self) -> str:  # type: ignore[override]
        return self.true_value.dtype


@dataclass(frozen=True, slots=True)
class Cast(Expr):
    dtype: str
    value: Expr


# Intrinsics a Call may name, with whether they return the argument dtype.
INTRINSICS = ("floor", "ceil", "round", "sqrt", "exp", "log", "abs", "tanh")


@dataclass(frozen=True, slots=True)
class Call(Expr):
    """A call of a pure intrinsic (see :data:`INTRINSICS`)."""

    dtype: str
    op: str
    args: tuple[Expr, ...]


@dataclass(frozen=True, slots=True)
class BufferLoad(Expr):
    buffer: Buffer
    indices: tuple[Expr, ...]

    def __post_init__(self) -> None:
        if not all(isinstance(i, Expr) for i in self.indices):
            object.__setattr__(self, "indices", tuple(const(i) for i in self.indices))

    @property
    def dtype(self) -> str:  # type: ignore[override]
        return self.buffer.dtype


def const(value: ExprLike, dtype: str | None = None) -> Expr:
    """Wrap a Python number as an immediate; pass expressions through."""
    if isinstance(value, Expr):
        return value
    if isinstance(value, bool):
        return IntImm(int(value), BOOL)
    if isinstance(value, int):
        if dtype is not None and is_float(dtype):
            return FloatImm(float(value), dtype)
        return IntImm(value, dtype or INT)
    if isinstance(value, float):
        return FloatImm(value, dtype if dtype is not None and is_float(dtype) else "float32")
    raise TypeError(f"cannot make an IR constant from {value!r}")


def is_float(dtype: str) -> bool:
    return dtype.startswith("float")


def eq(a: ExprLike, b: ExprLike) -> Expr:
    return EQ(const(a), const(b))


def ne(a: ExprLike, b: ExprLike) -> Expr:
    return NE(const(a), const(b))


def min_(a: ExprLike, b: ExprLike) -> Expr:
    return Min(const(a), const(b))


def max_(a: ExprLike, b: ExprLike) -> Expr:
    return Max(const(a), const(b))


def floor(x: Expr) -> Expr:
    return Call(x.dtype, "floor", (x,))


def sqrt(x: Expr) -> Expr:
    return Call(x.dtype, "sqrt", (x,))


def select(cond: Expr, a: ExprLike, b: ExprLike) -> Expr:
    return Select(cond, const(a), const(b))


def cast(dtype: str, x: ExprLike) -> Expr:
    return Cast(dtype, const(x))


def as_int(e: ExprLike) -> int | None:
    """The value of an integer constant, or None."""
    if isinstance(e, int):
        return e
    if isinstance(e, IntImm):
        return e.value
    return None
