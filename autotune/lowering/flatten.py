"""FlattenBuffer: every buffer becomes its physical shape (tvm-rfcs 0063).

Runs after ``lower_blocks``. A buffer declared by a ``DeclBuffer`` becomes 1-d,
or N-d with one axis per group of its ``axis_separators`` (``[2, 2, 4096]``
with separators ``[2]`` becomes ``[4, 4096]`` with separators ``[1]``: four
banks); its indices are linearised inside each group with the buffer's element
strides (row-major, or the padded strides compaction gives the private copies
of a parallel loop), and the ``Allocate`` of its storage gets the physical
extents, padding included. Parameters keep their
logical shapes in the signature; a parameter of more than one dimension is
accessed through ``<param>_flat``, a 1-d alias of its data declared at the top
of the body. A 1-d parameter is already flat and is accessed as it is.
"""

from __future__ import annotations

from dataclasses import replace
from math import prod

from .. import ir
from ..analysis.arith import Analyzer
from ..errors import LoweringError


def _const_shape(buf: ir.Buffer) -> tuple[int, ...]:
    try:
        return buf.const_shape()
    except ValueError:
        raise LoweringError(f"flatten_buffers: buffer '{buf.name}' has a symbolic shape {list(map(str, buf.shape))}") from None


def _check_strides(buf: ir.Buffer, param: bool = False) -> None:
    """Strides must be constant, one per dimension, and nested: no two elements of a group share an address.

    A parameter is a dense numpy array, so its strides (if given) must be row-major.
    """
    if not buf.strides:
        return
    shape = _const_shape(buf)
    given = f"buffer '{buf.name}' has strides [{', '.join(map(str, buf.strides))}]"
    try:
        strides = buf.element_strides()
    except ValueError:
        raise LoweringError(f"flatten_buffers: {given}; expected one constant stride per dimension ({len(shape)})") from None
    if param:
        if strides != buf.with_(strides=()).element_strides():
            raise LoweringError(f"flatten_buffers: parameter {given}; a parameter is a row-major array")
        return
    for lo, hi in buf.groups():
        for k in range(lo, hi):
            least = strides[k + 1] * shape[k + 1] if k + 1 < hi else 1
            if strides[k] < least:
                raise LoweringError(
                    f"flatten_buffers: {given}; the stride of dimension {k} must be at least {least} "
                    "so that its slices do not overlap"
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
        _const_shape(buf)
        strides = buf.element_strides()
        out = []
        for lo, hi in buf.groups():
            acc: ir.Expr = ir.const(0)
            for idx, stride in zip(indices[lo:hi], strides[lo:hi]):
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
        _check_strides(p, param=True)
        if p.ndim != 1 and id(p) in used:
            alias = flat_buffer(p, name=f"{p.name}_flat")
            flat[p] = alias
            aliases.append(alias)
    body = _Flatten(flat).visit(func.body)
    for alias in reversed(aliases):
        body = ir.DeclBuffer(alias, body)
    return replace(func, body=body)
