"""Lowered IR -> the Python source of one numba kernel (pure Python: numba is not imported here).

The kernel takes every buffer from its caller and allocates nothing::

    @T.prim_func                                    @numba.njit(...)
    def f(A: T.Buffer((8,), "float32"), ...):       def f(A, B, T_data):
        T_data = T.allocate([8], "float32")  --->       for i in range(8):
        T = T.decl_buffer((8,), data=T_data)                T_data[i] = A[i] * _c0
        for i in T.serial(8): T[i] = A[i] * 2.0

Arguments are the function's parameters (numpy arrays in their logical shape)
followed by one storage argument per ``Allocate``: a 1-d array, or for an N-d
allocation (a buffer with axis separators, e.g. two banks ``[2, 4096]``) a tuple
of ``prod(extents[:-1])`` 1-d arrays, one per bank. A ``DeclBuffer`` of storage
or of a parameter becomes a ``reshape`` (a tuple of reshaped banks for an N-d one).
A nest outlined with another vectoriser (:mod:`.outline`) is a function defined in the
kernel's text and also the text of a module of its own (``KernelSource.nests``), which
is what :func:`~autotune.codegen.build` compiles and the kernel it imports calls.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from .. import ir
from ..analysis import Interval, loop_interval
from ..errors import CodegenError
from ..ir import expr as E
from .declare import Declarations, _const_shape
from .exprgen import ExprWriter
from .names import NEST, SELECT, Names, py_ident
from .outline import Outlined, nest_module, outlined_args, unshared
from .signature import KernelSource, ParamArg, StorageArg
from .trees import TREE_PREC, UNROLL_LIMIT, balanced, combine, unrolled_reduction

__all__ = ["UNROLL_LIMIT", "KernelSource", "ParamArg", "StorageArg", "generate_source", "kernel_decorator"]


FASTMATH_FLAGS = ("afn", "arcp", "contract", "nsz", "reassoc")
"""LLVM fast-math flags of every kernel: ``fastmath=True`` minus ``nnan`` and ``ninf``,
because kernels use ``-inf`` as the max-pool identity and padding value, and the
checker fills outputs with NaN."""


VECTORIZERS = ("loop", "slp")


def kernel_decorator(
    signature: str | None = None,
    vectorizer: str = "loop",
    noalias: bool | tuple[str, ...] = False,
    linked: bool = True,
    parallel: bool = True,
) -> str:
    """The decorator line put on every kernel (part of the source, hence of the cache key).

    A kernel is ``parallel=True``, serial ones too, unless ``parallel`` is False: a serial kernel
    whose body is a function of its own (see :func:`generate_source`). With ``signature``, the decorator of an outlined nest (:mod:`~autotune.codegen.outline`):
    :func:`autotune.codegen.runtime.nest`, which compiles it for that signature with
    ``vectorizer`` and the kernel's fast-math flags; not parallel (it runs on the calling thread).
    ``noalias`` (True: every array; a tuple: those arrays) and ``linked=False`` (a parallel loop's
    body) are written only when set."""
    flags = "{" + ", ".join(f'"{f}"' for f in FASTMATH_FLAGS) + "}"
    if signature is not None:
        if isinstance(noalias, bool):
            marked = repr(noalias)
        else:  # a tuple of names, written with double quotes as the rest of the line
            marked = "(" + ", ".join(f'"{a}"' for a in noalias) + ("," if len(noalias) == 1 else "") + ")"
        extra = (f", noalias={marked}" if noalias else "") + ("" if linked else ", linked=False")
        return f'@{NEST}("{signature}", vectorizer="{vectorizer}", fastmath={flags}{extra})'
    return f'@numba.njit(cache=True, fastmath={flags}, nogil=True, error_model="numpy", parallel={parallel})'


_RANGE = {
    ir.ForKind.SERIAL: "range",
    ir.ForKind.VECTORIZED: "range",
    ir.ForKind.UNROLLED: "range",
    ir.ForKind.PARALLEL: "numba.prange",
}


class _Generator(Declarations):
    """Walks a lowered function once and emits the kernel body."""

    def __init__(self, func: ir.Func, kernel_name: str, vectorizer: str) -> None:
        self.func = func
        self.kernel = kernel_name
        self.vectorizer = vectorizer
        self.outlined: list[Outlined] = []
        self.outlining: str | None = None
        """The vectoriser of the nest being outlined, while its function is written."""
        self.bodies: list[Outlined] = []
        """The parallel loops' bodies written as functions of their own (:meth:`_outline_body`)."""
        self.pending: str | None = None
        """The parallel loop whose body is outlined at the first statement below it that does not
        declare storage (named for messages)."""
        self.names = Names(reserved={kernel_name})
        self.exprs = ExprWriter(self.names)
        self.lines: list[str] = []
        self.storage: dict[E.Var, StorageArg] = {}
        self.register_names: dict[E.Var, list[str]] = {}
        self.param_data: dict[E.Var, ir.Buffer] = {}
        self.parallel = False
        self.separated = {
            d.buffer.data for d in ir.collect(func.body, ir.DeclBuffer) if d.buffer.axis_separators
        }
        for buf in func.params:
            self.exprs.declare(buf, self.names.buffer(buf))
            self.param_data.setdefault(buf.data, buf)

    def emit(self, depth: int, text: str) -> None:
        self.lines.append("    " * depth + text)

    def stmt(self, s: ir.Stmt, depth: int) -> None:
        if self.pending is not None and not self._declares_storage(s):
            what, self.pending = self.pending, None
            if self._outline_body(s, depth, what):
                return
        method = getattr(self, "stmt_" + type(s).__name__, None)
        if method is None:
            raise CodegenError(f"codegen: cannot generate {type(s).__name__}; lower the function first")
        before = len(self.lines)
        method(s, depth)
        if len(self.lines) == before:
            self.emit(depth, "pass")

    def stmt_SeqStmt(self, s: ir.SeqStmt, depth: int) -> None:
        for child in s.seq:
            self.stmt(child, depth)

    def stmt_Evaluate(self, s: ir.Evaluate, depth: int) -> None:
        self.emit(depth, "pass")

    def stmt_BufferStore(self, s: ir.BufferStore, depth: int) -> None:
        target = self.exprs.access(s.buffer, s.indices)
        value = self.exprs.expr(s.value)
        for line in self.exprs.take_pending():
            self.emit(depth, line)
        self.emit(depth, f"{target} = {value}")

    def stmt_IfThenElse(self, s: ir.IfThenElse, depth: int) -> None:
        cse, written = self.exprs.cse, self.exprs.written
        self.exprs.straight_line(False)
        self.emit(depth, f"if {self.exprs.expr(s.condition)}:")
        self.stmt(s.then_case, depth + 1)
        if s.else_case is not None:
            self.emit(depth, "else:")
            self.stmt(s.else_case, depth + 1)
        self.exprs.straight_line(cse is not None, written)

    def stmt_For(self, s: ir.For, depth: int) -> None:
        mode = ir.ann_get(s.annotations, ir.VECTORIZER_ATTR)
        if mode is not None and mode != (self.outlining or self.vectorizer):
            self._outline(s, str(mode), depth)
            return
        lo, ext = E.as_int(s.min), E.as_int(s.extent)
        if s.kind == ir.ForKind.UNROLLED and lo is not None and ext is not None and ext <= UNROLL_LIMIT:
            reduction = unrolled_reduction(s)
            with self._straight_line(s):
                if reduction is not None:
                    self._tree_reduction(*reduction, depth)
                    return
                for k in range(lo, lo + ext):
                    self.exprs.bind(s.loop_var, k)
                    self.stmt(s.body, depth)
                self.exprs.unbind(s.loop_var)
            return
        self.exprs.straight_line(False)
        if s.kind not in _RANGE:
            raise CodegenError(f"codegen: unknown loop kind {s.kind!r}")
        if s.kind == ir.ForKind.PARALLEL:
            self.parallel = True
        if lo == 0:
            bounds = self.exprs.expr(s.extent)
        elif lo is not None and ext is not None:
            bounds = f"{lo}, {lo + ext}"
        else:
            bounds = f"{self.exprs.expr(s.min)}, {self.exprs.expr(E.Add(s.min, s.extent))}"
        self.emit(depth, f"for {self.names.var(s.loop_var)} in {_RANGE[s.kind]}({bounds}):")
        self.exprs.scope.add(s.loop_var)
        self.exprs.ranges[s.loop_var] = self._loop_range(s)
        if s.kind == ir.ForKind.PARALLEL and self.outlining is None:
            self.pending = f"the body of parallel loop '{s.loop_var.name}'"
        self.stmt(s.body, depth + 1)
        self.pending = None
        self.exprs.scope.discard(s.loop_var)
        del self.exprs.ranges[s.loop_var]
        self.exprs.straight_line(False)

    def _outline(self, s: ir.For, mode: str, depth: int) -> None:
        """``s`` as a call of a function of its own, compiled with vectoriser ``mode`` (see :mod:`.outline`)."""
        loop = s.loop_var.name
        if mode not in VECTORIZERS:
            raise CodegenError(f"codegen: unknown vectorizer {mode!r} on loop '{loop}' (annotation {ir.VECTORIZER_ATTR})")
        if self.outlining is not None:
            raise CodegenError(f"codegen: loop '{loop}' asks for vectorizer {mode!r} inside a nest outlined as {self.outlining!r}")
        args, types, _ = outlined_args(s, self.exprs, self.names, self._inner_storage(s))
        name = self.names.fresh(f"{self.kernel}_{self.names.var(s.loop_var)}")
        outer, self.lines, self.outlining = self.lines, [], mode
        self.stmt(s, 1)
        body, self.lines, self.outlining = self.lines, outer, None
        self.outlined.append(Outlined(name, mode, tuple(args), f"void({', '.join(types)})", tuple(body)))
        self.emit(depth, f"{name}({', '.join(args)})")

    def _declares_storage(self, s: ir.Stmt) -> bool:
        """Whether ``s`` allocates or declares a buffer on storage other than registers."""
        if isinstance(s, ir.Allocate):
            return ir.ann_get(s.annotations, "scope") != ir.REGISTER_SCOPE
        return isinstance(s, ir.DeclBuffer) and s.buffer.data not in self.register_names

    def _outline_body(self, s: ir.Stmt, depth: int, what: str) -> bool:
        """``s``, the body of a parallel loop ``what`` below its storage declarations, as a call of
        a function of its own with the kernel's vectoriser; False (nothing written) when it cannot
        be one (:func:`~.outline.outlined_args`: it declares storage, holds a parallel loop or uses
        registers from outside), and the body stays in the kernel's text.

        numba compiles a parallel loop's body as a function of its own and links it, with every
        nest it calls, into three more (its wrapper, the thread pool's, the kernel), optimising
        and generating the code of each again (most of a kernel's compile: ``experiments/compile_time.py``,
        ``results/compile_time_body.md``).
        The body written as a translated nest (:func:`autotune.codegen.runtime.nest` with
        ``linked=False``) is optimised once, its nests inlined into it, and numba's functions only
        call it. Its arrays are ``noalias``, as numba's body takes them, except those that share
        bytes with another of its arrays (:func:`~.outline.unshared`).
        """
        try:
            args, types, arrays = outlined_args(s, self.exprs, self.names, self._inner_storage(s), what)
        except CodegenError:
            return False
        free = unshared(arrays, self.storage)
        noalias = True if len(free) == len(arrays) else free
        name = self.names.fresh(f"{self.kernel}_body")
        outer, self.lines = self.lines, []
        self.stmt(s, 1)
        body, self.lines = self.lines, outer
        signature = f"void({', '.join(types)})"
        self.bodies.append(Outlined(name, self.vectorizer, tuple(args), signature, tuple(body), noalias, linked=False))
        self.emit(depth, f"{name}({', '.join(args)})")
        return True

    def _inner_storage(self, s: ir.Stmt) -> dict[E.Var, StorageArg]:
        """The kernel's storage arguments of the allocations inside ``s`` other than ``local`` registers."""
        return {
            a.data: self.storage_of(a)
            for a in ir.collect(s, ir.Allocate)
            if ir.ann_get(a.annotations, "scope") != ir.REGISTER_SCOPE
        }

    def _loop_range(self, s: ir.For) -> Interval:
        """The values of ``s``'s variable: ``[min, min + extent - 1]`` over the enclosing loops."""
        return loop_interval(s.min, s.extent, self.exprs.ranges)

    def _tree_reduction(self, loops: list[ir.For], store: ir.BufferStore, op: str, term: E.Expr, depth: int) -> None:
        """``acc = op(acc, term)`` over fully unrolled ``loops`` as one tree of the terms.

        Written as a chain, every step waits for the previous one (9 dependent
        ``max`` per 3x3 window); as a tree the terms combine in parallel and only
        the last step reads the accumulator (two cascaded 3x3 max pools ran 1.6x
        faster unrolled, experiments/knob_variants.py). The kernel is compiled with ``reassoc`` fast-math,
        which allows the same reordering of a float sum. The tree follows the
        nest (:meth:`_tree`), so the schedule's loop order says which partial
        results neighbouring copies share.
        """
        text = self._tree(loops, op, term)
        for f in loops:
            self.exprs.unbind(f.loop_var)
        target = self.exprs.access(store.buffer, store.indices)
        for line in self.exprs.take_pending():
            self.emit(depth, line)
        self.emit(depth, f"{target} = {combine(op, target, text)}")

    def _tree(self, loops: list[ir.For], op: str, term: E.Expr) -> str:
        """The terms over ``loops`` (outermost first), the innermost loop's combined first.

        Where the term's copies may share (``ExprWriter.shares``: a straight-line region that
        does not write what the term reads), each loop's values combine through
        ``ExprWriter.reduce``, which reuses the partial results of earlier copies: with the
        window's rows innermost, the max over a column of a 3x3 window is one local, which the
        copies for the next two output columns reuse, and the copies for the next output row
        reuse its pair of shared rows. Elsewhere each loop's values combine pairwise
        (:func:`~autotune.codegen.trees.balanced`).
        """
        shared = self.exprs.shares(term)
        first, inner = loops[0], loops[1:]
        lo, ext = E.as_int(first.min) or 0, E.as_int(first.extent) or 0
        parts: list[str] = []
        for value in range(lo, lo + ext):
            self.exprs.bind(first.loop_var, value)
            parts.append(self._tree(inner, op, term) if inner else self.exprs.expr(term, TREE_PREC[op]))
        return self.exprs.reduce(op, parts) if shared else balanced(op, parts)

    @contextmanager
    def _straight_line(self, nest: ir.For) -> Iterator[None]:
        """Share loads inside an unrolled nest; the outermost unrolled loop opens and ends the region."""
        outer = self.exprs.cse is not None
        if not outer:
            written = frozenset(st.buffer.data for st in ir.collect(nest, ir.BufferStore))
            self.exprs.straight_line(True, written)
        yield
        if not outer:
            self.exprs.straight_line(False)


def generate_source(func: ir.Func, name: str | None = None) -> KernelSource:
    """The source of a Python module defining one numba kernel that computes ``func``.

    ``func`` must be lowered (no blocks). ``name`` is the kernel's Python name
    (default: the function's). Raises :class:`CodegenError` for a construct the
    generator cannot express (a symbolic allocation, a block, an unknown intrinsic).

    Each parallel loop's body is a function of its own where it can be
    (:meth:`_Generator._outline_body`). A serial kernel's body is the one iteration of a
    ``prange(1)``: numba compiles the body of a parallel loop as a separate function whose array
    arguments are all ``noalias`` when no variable of the body aliases another (its
    ``find_potential_aliases_parfor``: an assignment such as ``V = T_data.reshape(...)`` is one;
    two arguments that view shared bytes of a pool are not), and an outlined body marks ``noalias``
    the arrays that share no byte with another (:func:`~.outline.unshared`, which also reads the
    memory plan's offsets). A plain
    function gets no such attribute, so LLVM must assume that every store may change every array,
    and it neither vectorises nor hoists: a serial kernel of three convolution stages (1x1,
    depthwise 3x3, 1x1) ran 5.2 ms as a function and 1.1 ms as a one-iteration parallel loop, on
    one thread both. (``numba.set_num_threads(1)`` around it would keep the other worker from
    waking, but a kernel that calls it cannot be cached.)

    When that body is written as a function of its own (:meth:`_Generator._outline_body`), the kernel only declares its storage and calls it,
    and is a plain function (``parallel=False``, ``range(1)``): a one-iteration parallel loop still
    goes through numba's thread pool at every call, which costs a microsecond or two and exposes a
    serial kernel to another process's use of the other core (``experiments/serial_dispatch.py``,
    ``results/serial_dispatch.md``).
    """
    kernel = py_ident(name or func.name)
    vectorizer = str(ir.ann_get(func.attrs, ir.VECTORIZER_ATTR, "loop"))
    if vectorizer not in VECTORIZERS:
        raise CodegenError(f"codegen: unknown vectorizer {vectorizer!r} (attribute {ir.VECTORIZER_ATTR})")
    gen = _Generator(func, kernel, vectorizer)
    once = gen.names.fresh("once")
    if any(f.kind == ir.ForKind.PARALLEL for f in ir.collect(func.body, ir.For)):
        gen.stmt(func.body, 1)
    else:
        gen.emit(1, f"for {once} in numba.prange(1):")  # a serial kernel: see the docstring
        loop = len(gen.lines) - 1
        gen.pending = "the kernel's body"
        gen.stmt(func.body, 2)
        if gen.bodies:  # the body is a function of its own: the kernel only calls it
            gen.lines[loop] = gen.lines[loop].replace("numba.prange(1)", "range(1)")
    params = tuple(ParamArg(gen.names.buffer(b), b.name, _const_shape(b), b.dtype) for b in func.params)
    storage = tuple(gen.storage.values())
    args = ", ".join([p.arg for p in params] + [s.arg for s in storage])
    lines = [
        f"# autotune kernel for function {func.name}",
        "# generated by autotune.codegen from the lowered IR; do not edit",
        *(["# vectorizer: slp (compiled with LLVM's loop vectorizer off and SLP on)"] if vectorizer == "slp" else []),
        *(f"# outlined: {o.name} (vectorizer: {o.vectorizer})" for o in gen.outlined),
        *(f"# parallel loop body: {b.name} (compiled once, called by its symbol)" for b in gen.bodies),
        "import numba",
        "import numpy as np",
        *([f"from autotune.codegen.runtime import select as {SELECT}"] if gen.exprs.uses_select else []),
        *([f"from autotune.codegen.runtime import nest as {NEST}"] if gen.outlined or gen.bodies else []),
        "",
    ]
    consts = gen.exprs.constants()
    if consts:
        lines += [f"{c} = {v}" for c, v in consts] + [""]
    nests = tuple(nest_module(o, consts, kernel_decorator(o.signature, o.vectorizer)) for o in gen.outlined)
    for nest in nests:
        lines += ["", nest.definition.removesuffix("\n"), ""]
    for b in gen.bodies:
        decorator = kernel_decorator(b.signature, b.vectorizer, b.noalias, b.linked)
        lines += ["", decorator, f"def {b.name}({', '.join(b.params)}):", *b.lines, ""]
    lines += ["", kernel_decorator(parallel=gen.parallel or not gen.bodies), f"def {kernel}({args}):"]
    lines += [f"    # {_arg_doc(p)}" for p in params] + [f"    # {_storage_doc(s)}" for s in storage]
    lines += gen.lines
    outlined = tuple(o.name for o in gen.outlined)
    mode = gen.outlined[0].vectorizer if gen.outlined else None
    text = "\n".join(lines) + "\n"
    bodies = tuple(b.name for b in gen.bodies)
    return KernelSource(kernel, text, params, storage, gen.parallel, vectorizer, outlined, mode, nests, bodies)


def _arg_doc(p: ParamArg) -> str:
    return f"{p.arg}: {p.dtype}{list(p.shape)}"


def _storage_doc(s: StorageArg) -> str:
    kind = f"{s.banks} banks of {s.bank_elems}" if s.banked else f"{s.bank_elems}"
    pool = ir.ann_get(s.annotations, "pool")
    where = f" in pool {pool} at offset {ir.ann_get(s.annotations, 'offset')}" if pool is not None else ""
    return f"{s.arg}: {s.dtype}[{kind}] (allocation {s.name}{where})"
