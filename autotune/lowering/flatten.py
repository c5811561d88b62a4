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

A view (a ``DeclBuffer`` of another buffer's storage, tvm-rfcs 0063) is flattened
the same way, its ``elem_offset`` added to its indices. A view of an intermediate
allocation may have another numeric dtype (the code generator reinterprets the
bytes); a view of a parameter keeps the parameter's dtype, and views of banked
storage (axis separators on either side) are refused.
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
    """The physical form of ``buf``: one axis per separator group, sharing its data (``buf`` itself if already flat).

    A view that starts ``elem_offset`` elements into its storage becomes a 1-d buffer from the
    start of the storage, ``elem_offset`` elements longer; its indices are shifted by the offset.
    """
    _check_strides(buf)
    phys = buf.physical_shape() if buf.shape else (1,)
    offset = ir.as_int(buf.elem_offset) or 0
    if name is None and len(buf.shape) == len(phys) == 1 and not buf.strides and not offset:
        return buf
    if offset:
        phys = (offset + phys[0],)
    return buf.with_(
        name=name or buf.name,
        shape=tuple(ir.const(d) for d in phys),
        strides=(),
        axis_separators=tuple(range(1, len(phys))),
        elem_offset=ir.const(0),
    )


def _check_view(view: ir.Buffer, owner: ir.Buffer, param: bool) -> None:
    """What a view of ``owner``'s storage may be here: flat storage, read at an ``elem_offset``, and
    for an intermediate allocation also in another numeric dtype (its bytes reinterpreted)."""
    what = f"flatten_buffers: buffer '{view.name}' views the storage of {'parameter' if param else 'buffer'} '{owner.name}'"
    if view.axis_separators or owner.axis_separators:
        raise LoweringError(f"{what}, and one of them has axis separators: a view of banked storage is not supported")
    if ir.as_int(view.elem_offset) is None:
        raise LoweringError(f"{what} at elem_offset {view.elem_offset}, which is not a constant")
    if view.dtype == owner.dtype:
        return
    if param:
        raise LoweringError(
            f"{what} as {view.dtype}: a parameter is the caller's {owner.dtype} array and is not reinterpreted "
            "(reinterpret an intermediate copy of it)"
        )
    if "bool" in (view.dtype, owner.dtype):
        raise LoweringError(f"{what} as {view.dtype}: only numeric dtypes reinterpret each other's bytes")


class _Flatten(ir.Transformer):
    """Rewrite every access through the flat form of its buffer; loop bounds help simplify indices."""

    def __init__(self, flat: dict[ir.Buffer, ir.Buffer], params: tuple[ir.Buffer, ...]) -> None:
        self.flat = flat
        self.an = Analyzer()
        self.params = set(params)
        self.owners: dict[ir.Var, ir.Buffer] = {p.data: p for p in params}

    def _indices(self, buf: ir.Buffer, indices: tuple[ir.Expr, ...]) -> tuple[ir.Expr, ...]:
        _const_shape(buf)
        strides = buf.element_strides()
        out = []
        for lo, hi in buf.groups():
            acc: ir.Expr = buf.elem_offset
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
        owner = self.owners.setdefault(node.buffer.data, node.buffer)
        if owner is not node.buffer:
            _check_view(node.buffer, owner, param=owner in self.params)
        flat = self.flat.setdefault(node.buffer, flat_buffer(node.buffer))
        return ir.DeclBuffer(flat, self.visit(node.body))

    def visit_Allocate(self, node: ir.Allocate) -> ir.Stmt:
        decl = node.body
        while isinstance(decl, ir.DeclBuffer) and decl.buffer.data is not node.data:
            decl = decl.body
        if isinstance(decl, ir.DeclBuffer):
            self.owners[node.data] = decl.buffer  # the first buffer declared on it owns it; later ones view it
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
    body = _Flatten(flat, func.params).visit(func.body)
    for alias in reversed(aliases):
        body = ir.DeclBuffer(alias, body)
    return replace(func, body=body)
