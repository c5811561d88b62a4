"""How allocations and buffer declarations become kernel variables (a mixin of the generator).

An ``Allocate`` becomes a storage argument of the kernel (a 1-d array, or a tuple
of banks for an allocation with axis separators), or for a ``local`` one a scalar
variable per element; a ``DeclBuffer`` becomes the storage itself, a ``reshape``
of it, its bytes reinterpreted as another dtype (``.view``), or a view of a parameter.
"""

from __future__ import annotations

from math import prod

from .. import ir
from ..errors import CodegenError
from ..ir import expr as E
from ..schedule.primitives.memory import REGISTER_LIMIT
from .exprgen import ExprWriter
from .names import Names
from .signature import StorageArg


class Declarations:
    """The generator's handling of ``Allocate`` and ``DeclBuffer`` (see the module docstring)."""

    names: Names
    exprs: ExprWriter
    storage: dict[E.Var, StorageArg]
    register_names: dict[E.Var, list[str]]
    param_data: dict[E.Var, ir.Buffer]
    separated: set[E.Var]

    def emit(self, depth: int, text: str) -> None:
        raise NotImplementedError

    def stmt(self, s: ir.Stmt, depth: int) -> None:
        raise NotImplementedError

    def stmt_Allocate(self, s: ir.Allocate, depth: int) -> None:
        if ir.ann_get(s.annotations, "scope") == ir.REGISTER_SCOPE:
            self._registers(s, depth)
            return
        self.storage_of(s)
        self.stmt(s.body, depth)

    def storage_of(self, s: ir.Allocate) -> StorageArg:
        """The kernel's storage argument for the (not ``local``) allocation ``s``, recorded on first use."""
        st = self.storage.get(s.data)
        if st is None:
            extents = tuple(E.as_int(e) for e in s.extents)
            if not extents or any(e is None or e <= 0 for e in extents):
                raise CodegenError(
                    f"codegen: allocation {s.data.name} needs constant positive extents, got "
                    f"[{', '.join(str(e) for e in s.extents)}]"
                )
            if not self._banked(s):
                extents = (prod(extents),)  # type: ignore[arg-type]
            alloc_name = s.data.name.removesuffix("_data") or s.data.name
            arg = self.names.var(s.data)
            st = self.storage[s.data] = StorageArg(arg, alloc_name, s.dtype, extents, s.annotations)  # type: ignore[arg-type]
        return st

    def _registers(self, s: ir.Allocate, depth: int) -> None:
        """A ``local`` allocation: one scalar variable per element, which LLVM keeps in registers."""
        extents = [E.as_int(e) for e in s.extents]
        n = prod(e or 0 for e in extents)
        if any(e is None or e <= 0 for e in extents) or n > REGISTER_LIMIT:
            raise CodegenError(
                f"codegen: local allocation {s.data.name} of [{', '.join(str(e) for e in s.extents)}] must have "
                f"constant extents and at most {REGISTER_LIMIT} elements (it lives in registers)"
            )
        base = self.names.var(s.data).removesuffix("_data")
        names = [self.names.fresh(f"{base}_{k}") for k in range(n)]
        self.register_names[s.data] = names
        zero = self.exprs.constant(0.0, s.dtype) if E.is_float(s.dtype) else f"np.{s.dtype}(0)"
        for k in range(0, n, 8):  # defined before any loop: numba types them once
            self.emit(depth, "; ".join(f"{name} = {zero}" for name in names[k : k + 8]))
        self.stmt(s.body, depth)

    def _banked(self, s: ir.Allocate) -> bool:
        """Whether the allocation is physically N-d (a tuple of banks) rather than flat.

        N-d extents alone do not say so: before flattening, an ``Allocate`` carries
        the buffer's logical shape. It is banked when a buffer with axis separators
        is declared on it, or when the planner placed it per bank (tuple ``pool``).
        """
        return len(s.extents) > 1 and (
            s.data in self.separated or isinstance(ir.ann_get(s.annotations, "pool"), tuple)
        )

    def stmt_DeclBuffer(self, s: ir.DeclBuffer, depth: int) -> None:
        buf = s.buffer
        if buf.data in self.register_names:
            self.exprs.declare_registers(buf, self.register_names[buf.data])
        elif buf.data in self.storage:
            self._decl_storage(buf, self.storage[buf.data], depth)
        elif buf.data in self.param_data:
            self._decl_param_alias(buf, self.param_data[buf.data], depth)
        else:
            raise CodegenError(f"codegen: buffer {buf.name} is declared on storage that is never allocated")
        self.stmt(s.body, depth)

    def _decl_storage(self, buf: ir.Buffer, st: StorageArg, depth: int) -> None:
        shape = _const_shape(buf)
        groups = buf.physical_shape()
        if buf.dtype != st.dtype:
            self._decl_reinterpreted(buf, st, depth)
            return
        if len(groups) != len(st.extents) or prod(groups[:-1]) != st.banks:
            raise CodegenError(
                f"codegen: buffer {buf.name} of shape {shape} with axis separators "
                f"{list(buf.axis_separators)} does not match allocation extents {list(st.extents)}"
            )
        inner = shape[(buf.axis_separators or (0,))[-1] :] if st.banked else shape
        if prod(inner) > st.bank_elems:
            raise CodegenError(f"codegen: buffer {buf.name} of shape {shape} is larger than {st.arg}")
        src = self.names.var(buf.data)
        if st.is_whole(buf):
            self.exprs.declare(buf, src)  # the storage itself, no new name
            return
        name = self.names.buffer(buf)
        split = buf.axis_separators[-1] if st.banked else 0
        self.exprs.declare(buf, name, split)
        if not st.banked:
            self.emit(depth, f"{name} = {_reshape(src, inner, st.bank_elems)}")
            return
        banks = ", ".join(_reshape(f"{src}[{k}]", inner, st.bank_elems) for k in range(st.banks))
        self.emit(depth, f"{name} = ({banks}{',' if st.banks == 1 else ''})")

    def _decl_reinterpreted(self, buf: ir.Buffer, st: StorageArg, depth: int) -> None:
        """A flat view of another dtype: the first bytes of the storage, reinterpreted (``.view``)."""
        shape = _const_shape(buf)
        if st.banked or len(shape) != 1:
            raise CodegenError(f"codegen: buffer {buf.name} ({buf.dtype}) reinterprets {st.arg} ({st.dtype}) but is not flat")
        need, unit = shape[0] * ir.dtype_bytes(buf.dtype), ir.dtype_bytes(st.dtype)
        if need > st.bank_elems * unit:
            raise CodegenError(f"codegen: buffer {buf.name} of {need} bytes is larger than {st.arg} ({st.bank_elems * unit} bytes)")
        elems = -(-need // unit)  # the storage elements that hold the view's bytes
        name = self.names.buffer(buf)
        self.exprs.declare(buf, name)
        src = self.names.var(buf.data)
        self.emit(depth, f"{name} = {src}[:{elems}].view(np.{buf.dtype})")

    def _decl_param_alias(self, buf: ir.Buffer, param: ir.Buffer, depth: int) -> None:
        shape, pshape = _const_shape(buf), _const_shape(param)
        if buf.dtype != param.dtype or buf.axis_separators or prod(shape) > prod(pshape):
            raise CodegenError(
                f"codegen: buffer {buf.name} {shape} {buf.dtype} cannot alias parameter "
                f"{param.name} {pshape} {param.dtype}"
            )
        src = self.names.buffer(param)
        if shape == pshape:
            self.exprs.declare(buf, src)
            return
        name = self.names.buffer(buf)
        self.exprs.declare(buf, name)
        if len(pshape) == 1:
            self.emit(depth, f"{name} = {_reshape(src, shape, pshape[0])}")
        else:
            self.emit(depth, f"{name} = {_reshape(src + '.reshape(-1)', shape, prod(pshape))}")


def _const_shape(buf: ir.Buffer) -> tuple[int, ...]:
    try:
        return buf.const_shape()
    except ValueError as exc:
        raise CodegenError(f"codegen: {exc}") from None


def _reshape(src: str, shape: tuple[int, ...], available: int) -> str:
    n = prod(shape)
    base = src if n == available else f"{src}[:{n}]"
    if len(shape) == 1:
        return base
    return f"{base}.reshape(({', '.join(str(d) for d in shape)}))"


