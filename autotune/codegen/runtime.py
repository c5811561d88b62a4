"""Functions and the compiler pipeline the generated kernels use (this module imports numba:
only kernels import it).

``select(cond, a, b)`` is ``a if cond else b`` as one LLVM ``select`` instruction:
both values are computed and no branch is taken. The code generator writes it for a
select whose two values read only inside their buffers (a padded window whose loads
``clamp_guarded_loads`` keeps in bounds), so a register tile of padded loads stays
straight-line code: SLP can pack the selects of neighbouring channels into vector
blends, and numba compiles one call instead of a branch and a merge per element.

``nest(signature, vectorizer, fastmath)`` is the decorator of every outlined nest: the nest's
text translated to LLVM IR (:mod:`~autotune.codegen.nest_llvm`) and called from numba code as an
intrinsic, or, for a construct outside the translator's subset, the function compiled by numba
with ``NestCompiler``. ``vectorizer_config(mode)`` sets LLVM's vectorisers for one compile.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import os
import textwrap
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import llvmlite
import llvmlite.binding as ll
import numpy as np
from llvmlite import ir as llvmir
from numba import njit, types
from numba.core import cgutils, sigutils
from numba.core import config as _config
from numba.core.compiler import CompilerBase, DefaultPassBuilder
from numba.core.compiler_lock import global_compiler_lock
from numba.core.compiler_machinery import PassManager
from numba.core.registry import cpu_target
from numba.extending import intrinsic

from .nest_llvm import Constant, Param, Unsupported, translate


@intrinsic
def select(typingctx: Any, cond: Any, a: Any, b: Any) -> Any:
    result = typingctx.unify_types(a, b)
    if result is None or not isinstance(result, (types.Number, types.Boolean)):
        return None
    sig = result(cond, a, b)

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        c, x, y = args
        c = context.cast(builder, c, signature.args[0], types.boolean)
        x = context.cast(builder, x, signature.args[1], signature.return_type)
        y = context.cast(builder, y, signature.args[2], signature.return_type)
        return builder.select(c, x, y)

    return sig, codegen


class NestCompiler(CompilerBase):  # type: ignore[misc]
    """numba's nopython pipeline without its SSA reconstruction, for outlined nests.

    numba rebuilds SSA once per variable assigned more than once, each time over the whole
    function: a register tile's accumulators (assigned before the reduction loop and in it)
    made it quadratic in the tile, 512 accumulators x 30,000 statements. numba compiles
    without it where it inlines functions (the pipeline's ``enable_ssa`` flag); a nest is
    typed the same either way (every accumulator keeps its one dtype) and LLVM builds its
    own SSA form from numba's stack slots. The kernel's entry function keeps the default
    pipeline: its parallel loops need SSA. What it saves: ``experiments/compile_time.py``.
    """

    def define_pipelines(self) -> list[PassManager]:
        self.state.flags.enable_ssa = False
        return [DefaultPassBuilder.define_nopython_pipeline(self.state)]


@contextmanager
def vectorizer_config(mode: str) -> Iterator[None]:
    """Compile with LLVM's loop vectoriser on and SLP off (``loop``, numba's defaults) or the
    loop vectoriser off and SLP on (``slp``) for the duration of one compile, restored after.

    numba reads ``config.LOOP_VECTORIZE``/``SLP_VECTORIZE`` each time it builds a pass manager,
    and its cheap pre-pass reads the codegen's ``_loopvect``. A compile happens under numba's
    compiler lock (and the build's), so nothing else compiles meanwhile.
    """
    config: Any = _config
    codegen = cpu_target.target_context.codegen()
    saved = (config.LOOP_VECTORIZE, config.SLP_VECTORIZE, codegen._loopvect)
    if mode == "slp":
        config.LOOP_VECTORIZE, config.SLP_VECTORIZE, codegen._loopvect = False, True, False
    elif saved[1]:
        config.LOOP_VECTORIZE, config.SLP_VECTORIZE = True, False
    try:
        yield
    finally:
        config.LOOP_VECTORIZE, config.SLP_VECTORIZE, codegen._loopvect = saved


@functools.cache
def _reads_opaque_pointers() -> bool:
    """Whether this llvmlite's LLVM parses the IR the translator writes (pointers as ``ptr``)."""
    try:
        ll.parse_assembly("define void @f(ptr %p) {\n  ret void\n}\n")
    except RuntimeError:
        return False
    return True


_LIBRARIES: dict[str, Any] = {}
"""A translated nest's compiled code library, by symbol, once per process."""
_LIBRARIES_LOCK = threading.Lock()

_CALLEES = {min: "min", max: "max", abs: "abs", select: "select"}


def _param(name: str, ty: Any) -> Param:
    if isinstance(ty, types.Array) and ty.layout == "C":
        return Param(name, "array", str(ty.dtype), ty.ndim)
    if isinstance(ty, types.UniTuple) and isinstance(ty.dtype, types.Array) and ty.dtype.ndim == 1 and ty.dtype.layout == "C":
        return Param(name, "banks", str(ty.dtype.dtype), 1, ty.count)
    if isinstance(ty, types.Integer):
        return Param(name, "int", str(ty))
    raise Unsupported(f"argument {name!r} of type {ty}")


def _resolver(namespace: dict[str, Any]) -> tuple[Callable[[str], Constant | None], Callable[[str], str | None]]:
    """What the nest's global names are: numpy scalar constants, and the functions it calls."""

    def constant(name: str) -> Constant | None:
        value = namespace.get(name)
        if isinstance(value, np.generic) and value.dtype.kind in "biuf":
            return Constant(value.dtype.name, value.item())
        return None

    def callee(name: str) -> str | None:
        value = namespace[name] if name in namespace else {"min": min, "max": max, "abs": abs}.get(name)
        if value is np:
            return "numpy"
        return _CALLEES.get(value) if value is not None else None

    return constant, callee


def nest(signature: str, vectorizer: str, fastmath: set[str]) -> Callable[[Callable[..., None]], Any]:
    """The decorator of an outlined nest: compiled for ``signature`` with ``vectorizer`` and the
    kernel's ``fastmath`` flags.

    The function's text is translated to LLVM IR (:func:`~autotune.codegen.nest_llvm.translate`)
    and becomes an intrinsic: where a kernel calls it, the call passes each array's data pointer
    (and an N-d array's dimensions), and the kernel links the nest's code, which LLVM optimises
    once per process with ``vectorizer`` set. numba's frontend never sees the nest, which is what
    its compile time was (``experiments/compile_time.py``). A function the translator does not
    take (a construct outside its subset, or text that cannot be read back: a function defined
    by ``exec``) is compiled by numba with :class:`NestCompiler`, as numba would compile it; the
    result's ``compiled_by`` says which (``llvm``, or ``numba: <why>``).
    """
    argtys, _ = sigutils.normalize_signature(signature)
    flags = tuple(sorted(fastmath))

    def decorate(fn: Callable[..., None]) -> Any:
        try:
            if not _reads_opaque_pointers():
                raise Unsupported(f"llvmlite {llvmlite.__version__} does not read LLVM IR with opaque pointers (ptr)")
            source = textwrap.dedent(inspect.getsource(fn))
            params = [_param(name, ty) for name, ty in zip(inspect.signature(fn).parameters, argtys, strict=True)]
            key = hashlib.sha256("\n".join((source, signature, vectorizer, *flags)).encode()).hexdigest()[:20]
            symbol = f"autotune_nest_{fn.__name__}_{key}"
            constant, callee = _resolver(fn.__globals__)
            text = translate(source, params, constant, callee, symbol, flags)
        except (OSError, TypeError, ValueError, Unsupported) as exc:
            cache = os.path.isfile(fn.__code__.co_filename)  # numba caches what it can find on disk
            with vectorizer_config(vectorizer):
                compiled: Any = njit(
                    signature, cache=cache, fastmath=set(flags), nogil=True, error_model="numpy",
                    pipeline_class=NestCompiler,
                )(fn)
            compiled.compiled_by = f"numba: {exc}"
            return compiled
        return _intrinsic(symbol, text, argtys, vectorizer)

    return decorate


def _library(context: Any, symbol: str, text: str, vectorizer: str) -> Any:
    """The nest's code library: parsed, optimised with ``vectorizer`` and finalised, once per process."""
    with global_compiler_lock, _LIBRARIES_LOCK:
        library = _LIBRARIES.get(symbol)
        if library is None:
            codegen = context.codegen()
            with vectorizer_config(vectorizer):
                library = codegen.create_library(symbol)
                module = ll.parse_assembly(text)
                module.triple = ll.get_process_triple()
                module.verify()
                library.add_llvm_module(module)
                library.finalize()
            _LIBRARIES[symbol] = library
        return library


def _intrinsic(symbol: str, text: str, argtys: tuple[Any, ...], vectorizer: str) -> Any:
    """A numba intrinsic that calls the translated nest ``symbol`` with the arguments of ``argtys``."""

    def typer(typingctx: Any, *args: Any) -> Any:
        if len(args) != len(argtys):
            return None

        def codegen(context: Any, builder: Any, sig: Any, values: Any) -> Any:
            context.active_code_library.add_linking_library(_library(context, symbol, text, vectorizer))
            flat: list[Any] = []
            for ty, value in zip(argtys, values):
                if isinstance(ty, types.Array):
                    array = context.make_array(ty)(context, builder, value)
                    flat.append(array.data)
                    flat += cgutils.unpack_tuple(builder, array.shape)[1:]
                elif isinstance(ty, types.UniTuple):
                    for k in range(ty.count):
                        bank = context.make_array(ty.dtype)(context, builder, builder.extract_value(value, k))
                        flat.append(bank.data)
                else:
                    flat.append(value)
            fnty = llvmir.FunctionType(llvmir.VoidType(), [v.type for v in flat])
            builder.call(cgutils.get_or_insert_function(builder.module, fnty, symbol), flat)
            return context.get_dummy_value()

        return types.void(*argtys), codegen

    # numba folds a variadic definition's arguments into one tuple: the signature it reads names each
    positional = inspect.Parameter.POSITIONAL_OR_KEYWORD
    typer.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [inspect.Parameter("typingctx", positional)] + [inspect.Parameter(f"a{k}", positional) for k in range(len(argtys))]
    )
    typer.__name__ = symbol
    compiled: Any = intrinsic(typer)
    compiled.compiled_by = "llvm"
    compiled.llvm_ir = text
    compiled.library = lambda: _library(cpu_target.target_context, symbol, text, vectorizer)
    return compiled
