"""Outlined loop nests: a nest compiled as a function of its own, with its own vectoriser.

LLVM optimises a function with one choice of vectoriser (see
:func:`autotune.schedule.primitives.memory.set_vectorizer`). A loop annotated
with a vectoriser other than the kernel's becomes a separate function in the
kernel's module, called where the loop stood::

    for x_0 in range(56):                        project_x_0(depthwise_data, w_project_flat, project_flat, y_0)
        ... (the nest, SLP register tile)   -->
                                                 @_nest("void(float32[::1], float32[::1], float32[::1], int64)", vectorizer="slp", ...)
                                                 def project_x_0(depthwise_data, w_project_flat, project_flat, y_0):
                                                     for x_0 in range(56): ...

Its decorator, :func:`autotune.codegen.runtime.nest`, translates the function's text to LLVM IR
(:mod:`~autotune.codegen.nest_llvm`), optimised with its vectoriser and linked into each kernel
that calls it (numba compiles it only when the text leaves the translator's subset).

Its arguments are the arrays the nest accesses (each a 1-d or N-d C-contiguous
array, by the name the kernel already gives it; a banked buffer, such as the two
slots of a double buffer, as its tuple of banks, ``UniTuple(float32[::1], 2)``)
and the enclosing loop variables it uses (``int64``). The kernel's text defines the
function; :func:`nest_module` also writes it as a module of its own, the function
``nest`` and the constants it uses, which depends on the nest's code only.
:func:`autotune.codegen.build` imports that module (content-addressed: once per
process; its LLVM code is optimised once per process, and each kernel that calls it
is cached on disk by numba with the nest's code in it), and the module it imports for the
kernel binds ``nest`` under the kernel's name for it. What the nest may not do, each a :class:`CodegenError`:
hold a parallel loop (it runs on the calling thread), declare a buffer on storage allocated
outside it, or declare a view of storage allocated inside it (a reshape, another dtype, banks).
Storage allocated inside it (an intermediate allocated under a tile loop) is the kernel's
preallocated storage argument, which the function takes.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from math import prod

from .. import ir
from ..errors import CodegenError
from .exprgen import ExprWriter
from .names import NEST, SELECT, Names
from .signature import NestModule, StorageArg

__all__ = ["Outlined", "nest_module", "outlined_args", "unshared"]

_CONST = re.compile(r"\b_c\d+\b")
"""A module-level constant's name (:meth:`ExprWriter.constant`; no other kernel name has this form)."""


@dataclass(frozen=True, slots=True)
class Outlined:
    """One outlined nest: its function's name, vectoriser, parameters, their numba signature and
    its body; ``noalias``: the arrays that share no byte with another of its arrays (:func:`unshared`;
    True: all of them); ``linked``: its callers link its code (a parallel loop's body is not: see
    :func:`autotune.codegen.runtime.nest`)."""

    name: str
    vectorizer: str
    params: tuple[str, ...]
    signature: str
    lines: tuple[str, ...]
    noalias: bool | tuple[str, ...] = False
    linked: bool = True


def _array_type(buf: ir.Buffer, split: int = 0) -> str:
    """The numba type of ``buf``'s argument: a C-contiguous array, or for a buffer banked at
    ``split`` the tuple of its banks, each an array of the dimensions after ``split``."""
    ndim = len(buf.shape) - split
    array = f"{buf.dtype}[{', '.join([':'] * (ndim - 1) + ['::1'])}]"
    return f"UniTuple({array}, {prod(buf.const_shape()[:split])})" if split else array


def outlined_args(
    nest: ir.Stmt,
    exprs: ExprWriter,
    names: Names,
    storage: Mapping[ir.Var, StorageArg],
    what: str | None = None,
) -> tuple[list[str], list[str], dict[str, ir.Var]]:
    """The argument names of the function for ``nest`` (a loop, or the body of a parallel loop
    called ``what`` in messages), their numba types, and the data (an allocation's or a
    parameter's) that each array argument views.

    ``storage``: the kernel's storage arguments of the allocations inside ``nest`` other than
    ``local`` registers (the kernel's storage is preallocated: an allocation inside a tile loop
    binds a name to it). The function takes such an allocation's storage as an argument when every
    buffer declared on it is the storage itself (:meth:`StorageArg.is_whole`): a view of it (a
    reshape, another dtype, banks) would be a statement outside the translator's subset
    (:mod:`~autotune.codegen.nest_llvm`).

    Arrays first, in order of first access, then the enclosing loop variables the nest uses.
    """
    if what is None:
        what = f"outlined loop '{nest.loop_var.name}'" if isinstance(nest, ir.For) else "outlined statement"
    parallel = [f.loop_var.name for f in ir.collect(nest, ir.For) if f.kind == ir.ForKind.PARALLEL]
    if parallel:
        raise CodegenError(f"codegen: {what} holds the parallel loop '{parallel[0]}'")
    inner = {a.data for a in ir.collect(nest, ir.Allocate) if ir.ann_get(a.annotations, "scope") == ir.REGISTER_SCOPE}
    allocated = set(storage)
    for decl in ir.collect(nest, ir.DeclBuffer):
        buf = decl.buffer
        if buf.data in inner:
            continue
        if buf.data not in allocated:
            raise CodegenError(
                f"codegen: {what} declares buffer {buf.name} on storage allocated outside it; only "
                "local registers and storage allocated inside may be declared inside an outlined nest"
            )
        if not storage[buf.data].is_whole(buf):
            raise CodegenError(
                f"codegen: {what} declares buffer {buf.name} as a view of {storage[buf.data].arg} "
                "(a reshape, another dtype or banks); inside an outlined nest a buffer on storage "
                "must be the storage itself"
            )
    args: list[str] = []
    types: list[str] = []
    arrays: dict[str, ir.Var] = {}  # array argument -> the data it views
    for access in ir.collect(nest, (ir.BufferLoad, ir.BufferStore)):
        buf = access.buffer
        if buf.data in inner:
            continue
        if buf in exprs.registers:
            raise CodegenError(
                f"codegen: {what} uses the local registers {buf.name}, allocated outside it "
                "(registers cannot be passed to a function)"
            )
        if buf.data in allocated:
            name, array = storage[buf.data].arg, f"{buf.dtype}[::1]"
        elif buf in exprs.decls:
            name, split = exprs.decls[buf]
            array = _array_type(buf, split)
        else:
            raise CodegenError(f"codegen: buffer {buf.name} is used outside its declaration")
        if name not in args:
            args.append(name)
            types.append(array)
            arrays[name] = buf.data
    bound = {f.loop_var for f in ir.collect(nest, ir.For)}
    data = {b.data for b in (*exprs.decls, *exprs.registers)} | inner | allocated
    for var in sorted(ir.free_vars(nest) - bound - data, key=names.var):
        if var in exprs.bound:
            continue  # an unrolled loop's variable: written as its constant
        if var not in exprs.scope:
            raise CodegenError(f"codegen: {what} uses {var.name}, which no enclosing loop defines")
        args.append(names.var(var))
        types.append("int64")
    return args, types, arrays


def unshared(arrays: Mapping[str, ir.Var], storage: Mapping[ir.Var, StorageArg]) -> tuple[str, ...]:
    """The array arguments (``arrays``: argument -> the data it views, from :func:`outlined_args`)
    that share no byte with another, in order: no other views the same data, and, for the kernel's
    storage (``storage``: every allocation's argument), none is on storage that may share bytes
    with its own (:meth:`StorageArg.may_share_bytes`: the plan reuses the bytes of allocations
    whose lifetimes do not meet, and a function that holds both uses both). A parameter is an
    array of its own. These are the arrays that a function may mark ``noalias``."""
    out = []
    for name, data in arrays.items():
        others = [d for n, d in arrays.items() if n != name]
        if data in others:
            continue
        mine = storage.get(data)
        if mine is not None and any(d in storage and mine.may_share_bytes(storage[d]) for d in others):
            continue
        out.append(name)
    return tuple(out)


def nest_module(nest: Outlined, constants: list[tuple[str, str]], decorator: str) -> NestModule:
    """``nest`` as its function in the kernel's text and as a module of its own.

    ``constants`` are the kernel's (name, value); ``decorator`` is the function's decorator
    line (:func:`autotune.codegen.runtime.nest`). In the module the function is called ``nest`` and the constants it uses are renumbered
    in order of first use, so the module's text depends on the nest's code alone::

        _c0 = np.float32(0.0)
        @_nest("void(float32[::1], ...)", vectorizer="slp", fastmath={...})
        def nest(A_flat, B_flat, matmul_flat, io): ...
    """
    params = ", ".join(nest.params)
    definition = "\n".join([decorator, f"def {nest.name}({params}):", *nest.lines]) + "\n"
    values = dict(constants)
    renamed: dict[str, str] = {}

    def rename(match: re.Match[str]) -> str:
        return renamed.setdefault(match.group(0), f"_c{len(renamed)}")

    body = [_CONST.sub(rename, line) for line in nest.lines]
    uses_select = any(f"{SELECT}(" in line for line in body)
    lines = [
        f"# autotune outlined nest (vectorizer: {nest.vectorizer})",
        "# generated by autotune.codegen from the lowered IR; imported by the kernels that call it; do not edit",
        "import numba",
        "import numpy as np",
        *([f"from autotune.codegen.runtime import select as {SELECT}"] if uses_select else []),
        f"from autotune.codegen.runtime import nest as {NEST}",
        "",
        *(f"{new} = {values[old]}" for old, new in renamed.items()),
        "",
        "",
        decorator,
        f"def nest({params}):",
        *body,
    ]
    return NestModule(nest.name, nest.vectorizer, "\n".join(lines) + "\n", definition)
