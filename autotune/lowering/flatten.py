"""FlattenBuffer: every buffer becomes its physical shape (tvm-rfcs 0063).

Runs after ``lower_blocks``. A buffer declared by a ``DeclBuffer`` becomes 1-d,
or N-d with one axis per group of its ``axis_separators`` (``[2, 2, 4096]``
with separators ``[2]`` becomes ``[4, 4096]`` with separators ``[1]``: four
banks); its indices are linearised row-major inside each group, and the
``Allocate`` of its storage gets the physical extents. Parameters keep their
logical shapes in the signature; a parameter of more than one dimension is
accessed through ``<param>_flat``, a 1-d alias of its data declared at the top
of the body. A 1-d parameter is already flat and is accessed as it is.
"""

from __future__ import annotations

import itertools
from dataclasses import replace
from math import prod

from .. import ir
from ..analysis.arith import Analyzer
from ..errors import LoweringError


def _row_major(shape: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(prod(shape[k + 1 :]) for k in range(len(shape)))


def _const_shape(buf: ir.Buffer) -> tuple[int, ...]:
    try:
        return buf.const_shape()
    except ValueError:
        raise LoweringError(f"flatten_buffers: buffer '{buf.name}' has a symbolic shape {list(map(str, buf.shape))}") from None


def _check_strides(buf: ir.Buffer) -> None:
    if not buf.strides:
        return
    strides = tuple(ir.as_int(s) for s in buf.strides)
    if strides != _row_major(_const_shape(buf)):
        raise LoweringError(
            f"flatten_buffers: buffer '{buf.name}' has strides [{', '.join(map(str, buf.strides))}]; only row-major buffers are supported"
        )


def flat_buffer(buf: ir.Buffer, name: str | None = None) -> ir.Buffer:
    """The physical form of ``buf``: one axis per separator group, sharing its data (``buf`` itself if already flat)."""
    _check_strides(buf)
    phys = buf.physical_shape() if buf.shape else (1,)
    if name is None and len(buf.shape) == len(phys) == 1 and not buf.strides:
        return buf
    return buf.with_(
        name=name or buf.name, shape=tuple(ir.const(d) for d in phys), strides=(), axis_separators=tuple(range(1, len(phys)))
    )


class _Flatten(ir.Transformer):
    """Rewrite every access through the flat form of its buffer; loop bounds help simplify indices."""

    def __init__(self, flat: dict[ir.Buffer, ir.Buffer]) -> None:
        self.flat = flat
        self.an = Analyzer()

    def _indices(self, buf: ir.Buffer, indices: tuple[ir.Expr, ...]) -> tuple[ir.Expr, ...]:
        shape = _const_shape(buf)
        bounds = (0, *buf.axis_separators, len(shape))
        out = []
        for lo, hi in itertools.pairwise(bounds):
            strides = _row_major(shape[lo:hi])
            acc: ir.Expr = ir.const(0)
            for idx, stride in zip(indices[lo:hi], strides):
                acc = ir.Add(acc, ir.Mul(idx, ir.const(stride)))
            out.append(self.an.simplify(acc))
        return tuple(out) if out else (ir.const(0),)

    def _target(self, buf: ir.Buffer) -> ir.Buffer | None:
        flat = self.flat.get(buf)
        return None if flat is None or flat is buf else flat

    def visit_BufferLoad(self, node: ir.BufferLoad) -> ir.Expr:
        out = self.generic_visit(node)
        flat = self._target(node.buffer)
        return out if flat is None else ir.BufferLoad(flat, self._indices(node.buffer, out.indices))  # type: ignore[no-any-return]

    def visit_BufferStore(self, node: ir.BufferStore) -> ir.Stmt:
        out = self.generic_visit(node)
        flat = self._target(node.buffer)
        return out if flat is None else ir.BufferStore(flat, out.value, self._indices(node.buffer, out.indices))  # type: ignore[no-any-return]

    def visit_For(self, node: ir.For) -> ir.Stmt:
        with self.an.scoped():
            self.an.bind(node.loop_var, ir.Range(node.min, node.extent))
            return self.generic_visit(node)  # type: ignore[no-any-return]

    def visit_DeclBuffer(self, node: ir.DeclBuffer) -> ir.Stmt:
        flat = self.flat.setdefault(node.buffer, flat_buffer(node.buffer))
        return ir.DeclBuffer(flat, self.visit(node.body))

    def visit_Allocate(self, node: ir.Allocate) -> ir.Stmt:
        body = self.visit(node.body)
        decl = body
        while isinstance(decl, ir.DeclBuffer) and decl.buffer.data is not node.data:
            decl = decl.body
        if isinstance(decl, ir.DeclBuffer):
            extents = decl.buffer.shape
        else:
            sizes = [ir.as_int(e) for e in node.extents]
            known = [s for s in sizes if s is not None]
            extents = (ir.const(prod(known)),) if len(known) == len(sizes) else node.extents
        return replace(node, extents=tuple(extents), body=body)

    def visit_Block(self, node: ir.Block) -> ir.Stmt:
        raise LoweringError(f"flatten_buffers: block '{node.name}' is still there; run lower_blocks first")


def flatten_buffers(func: ir.Func) -> ir.Func:
    """Flatten every buffer to its physical shape (see the module docstring)."""
    flat: dict[ir.Buffer, ir.Buffer] = {}
    aliases = []
    used = {id(b) for node in ir.collect(func.body, (ir.BufferLoad, ir.BufferStore)) for b in (node.buffer,)}
    for p in func.params:
        _check_strides(p)
        if p.ndim != 1 and id(p) in used:
            alias = flat_buffer(p, name=f"{p.name}_flat")
            flat[p] = alias
            aliases.append(alias)
    body = _Flatten(flat).visit(func.body)
    for alias in reversed(aliases):
        body = ir.DeclBuffer(alias, body)
    return replace(func, body=body)
