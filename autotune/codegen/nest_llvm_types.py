"""The values of a translated nest (:mod:`~autotune.codegen.nest_llvm`): numpy dtypes as LLVM
types, numpy's promotion of two operands, constants as LLVM writes them, and what refuses a nest."""

from __future__ import annotations

import ast
import struct
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

__all__ = [
    "CASTS", "FLOAT_CALLS", "FLOAT_CMP", "INT_CMP", "LLTYPE", "MEMTYPE", "Callee", "Constant", "Local", "Param",
    "Unsupported", "Value", "bits", "float_literal", "is_float", "is_int", "promote",
]


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
class Callee:
    """A translated nest that the function calls as a statement: its LLVM symbol and its arguments."""

    symbol: str
    params: tuple[Param, ...]


@dataclass(frozen=True, slots=True)
class Constant:
    """A module-level value the nest reads: ``value`` of numpy ``dtype`` (``bool``, ints, floats)."""

    dtype: str
    value: float | int | bool


LLTYPE = {
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
MEMTYPE = {**LLTYPE, "bool": "i8"}
"""How an array stores an element (numpy's bool is a byte)."""
FLOAT_CALLS = {"floor": "floor", "ceil": "ceil", "rint": "rint", "sqrt": "sqrt", "exp": "exp", "log": "log", "abs": "fabs"}
CASTS = frozenset(LLTYPE) - {"bool"} | {"uintp", "intp"}
INT_CMP = {ast.Eq: "eq", ast.NotEq: "ne", ast.Lt: "lt", ast.LtE: "le", ast.Gt: "gt", ast.GtE: "ge"}
FLOAT_CMP = {ast.Eq: "oeq", ast.NotEq: "une", ast.Lt: "olt", ast.LtE: "ole", ast.Gt: "ogt", ast.GtE: "oge"}


def is_float(dtype: str) -> bool:
    return dtype.startswith("float")


def is_int(dtype: str) -> bool:
    return dtype.startswith(("int", "uint"))


def bits(dtype: str) -> int:
    return 1 if dtype == "bool" else int(np.dtype(dtype).itemsize * 8)


def float_literal(value: float, dtype: str) -> str:
    """An LLVM float constant: the double bit pattern of the value (exact for float too)."""
    if dtype == "float32":
        value = float(np.float32(value))
    return "0x" + struct.pack(">d", value).hex().upper()


class Value(NamedTuple):
    text: str
    dtype: str


class Local(NamedTuple):
    slot: str
    dtype: str


def promote(a: str, b: str, what: str) -> str:
    """The dtype numba computes ``a op b`` in, for two integers or two floats."""
    if is_float(a) != is_float(b) or "bool" in (a, b):
        raise Unsupported(f"{what} of {a} and {b}")
    result = np.promote_types(a, b).name
    if is_int(a) and is_float(result):
        raise Unsupported(f"{what} of {a} and {b} (numpy computes it in {result})")
    return result
