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
import pickle
import tempfile
import textwrap
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import llvmlite
import llvmlite.binding as ll
import numba
import numpy as np
from llvmlite import ir as llvmir
from numba import njit, types
from numba.core import cgutils, sigutils
from numba.core import config as _config
from numba.core.caching import FunctionCache
from numba.core.compiler import CompilerBase, DefaultPassBuilder
from numba.core.compiler_lock import global_compiler_lock
from numba.core.compiler_machinery import PassManager
from numba.core.registry import cpu_target
from numba.extending import intrinsic

from .nest_llvm import Callee, Constant, Param, Unsupported, translate


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
_LIBRARIES_LOCK = threading.RLock()
_REGISTERED: set[str] = set()
"""The symbols of nests whose address LLVM's linker knows (:meth:`_Translated.register`)."""

_CALLEES = {min: "min", max: "max", abs: "abs", select: "select"}


@dataclass(frozen=True)
class _Translated:
    """A nest translated to LLVM IR: its symbol, its text, its vectoriser, its arguments and the
    translated nests it calls (whose code its library links)."""

    symbol: str
    text: str
    vectorizer: str
    params: tuple[Param, ...]
    callees: tuple[_Translated, ...]

    def library(self) -> Any:
        """The nest's code library: parsed, linked with its callees', optimised with its
        vectoriser and finalised, once per process."""
        with global_compiler_lock, _LIBRARIES_LOCK:
            library = _LIBRARIES.get(self.symbol)
            if library is None:
                library = _LIBRARIES[self.symbol] = self._build(lambda lib: None)
            return library

    def _build(self, before_finalize: Callable[[Any], None]) -> Any:
        codegen = cpu_target.target_context.codegen()
        linked = [callee.library() for callee in self.callees]
        with vectorizer_config(self.vectorizer):
            library = codegen.create_library(self.symbol)
            module = ll.parse_assembly(self.text)
            module.triple = ll.get_process_triple()
            module.verify()
            library.add_llvm_module(module)
            for callee in linked:
                library.add_linking_library(callee)
            before_finalize(library)
            library.finalize()
        return library

    def assembly(self) -> str:
        """The nest's code as assembly, compiled anew (a library loaded from disk has no module to print)."""
        with global_compiler_lock:
            return str(self._build(lambda lib: None).get_asm_str())

    def digest(self) -> str:
        """sha256 of everything its machine code depends on: its text and its callees' (recursively),
        its vectoriser, the LLVM target (triple, CPU, features) and the numba and llvmlite versions."""
        codegen = cpu_target.target_context.codegen()
        parts = [self.text, self.vectorizer, repr(codegen.magic_tuple()), numba.__version__, llvmlite.__version__]
        parts += [callee.digest() for callee in self.callees]
        return hashlib.sha256("\0".join(parts).encode()).hexdigest()

    def register(self, cache_dir: str | None) -> None:
        """Compile the nest (or load its machine code from ``cache_dir``, where it is then written)
        and make its symbol known to LLVM's linker, once per process: a caller that declares it is
        linked against that code, in this process or from numba's disk cache in another."""
        with global_compiler_lock, _LIBRARIES_LOCK:
            if self.symbol in _REGISTERED:
                return
            codegen = cpu_target.target_context.codegen()
            path = None if cache_dir is None else os.path.join(cache_dir, f"{self.symbol}-{self.digest()[:20]}.nest")
            library = _LIBRARIES.get(self.symbol)  # compiled in this process for a caller that links it
            if library is None and path is not None and os.path.isfile(path):
                try:
                    with open(path, "rb") as f:
                        library = codegen.unserialize_library(pickle.load(f))
                except (OSError, EOFError, pickle.UnpicklingError, ValueError, RuntimeError):
                    library = None  # a torn or foreign file: compiled again below
            if library is None:
                library = self._build(lambda lib: lib.enable_object_caching())
                if path is not None:
                    _write_cache(path, pickle.dumps(library.serialize_using_object_code(), protocol=-1))
            address = library.get_pointer_to_function(self.symbol)
            if not address:
                raise RuntimeError(f"nest {self.symbol} has no code after it was compiled")
            ll.add_symbol(self.symbol, address)
            _LIBRARIES[self.symbol] = library
            _REGISTERED.add(self.symbol)


def _write_cache(path: str, data: bytes) -> None:
    """``data`` written to ``path`` whole or not at all; a cache that cannot be written is no error."""
    tmp = None
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except OSError:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)


def _cache_dir(fn: Callable[..., None]) -> str | None:
    """Where numba caches what ``fn``'s file defines (None for a function numba cannot cache)."""
    try:
        return str(FunctionCache(fn).cache_path)
    except (RuntimeError, OSError, TypeError):
        return None


def _param(name: str, ty: Any) -> Param:
    if isinstance(ty, types.Array) and ty.layout == "C":
        return Param(name, "array", str(ty.dtype), ty.ndim)
    if isinstance(ty, types.UniTuple) and isinstance(ty.dtype, types.Array) and ty.dtype.ndim == 1 and ty.dtype.layout == "C":
        return Param(name, "banks", str(ty.dtype.dtype), 1, ty.count)
    if isinstance(ty, types.Integer):
        return Param(name, "int", str(ty))
    raise Unsupported(f"argument {name!r} of type {ty}")


def _bound_globals(fn: Callable[..., None]) -> list[str]:
    """What the global names ``fn`` reads are bound to, where that is compiled into its code: the
    value of each numpy scalar constant, and the symbol of each translated nest it calls. Part of
    its symbol: two nests of one text (``_c0`` renumbered in each nest's module; ``<kernel>_x_0``
    another nest in another kernel) are two functions."""
    bound: list[str] = []
    for name in sorted(set(fn.__code__.co_names)):
        value = fn.__globals__.get(name)
        if isinstance(value, np.generic):
            bound.append(f"{name}={value.dtype.name}:{value!r}")
        elif isinstance(getattr(value, "translated", None), _Translated):
            bound.append(f"{name}={value.translated.symbol}")  # type: ignore[union-attr]
    return bound


class _Resolver:
    """What a nest's global names are: numpy scalar constants, the functions it calls, and the
    translated nests it calls (kept in ``called``, in order of first call)."""

    def __init__(self, namespace: dict[str, Any]) -> None:
        self.namespace = namespace
        self.called: dict[str, _Translated] = {}

    def constant(self, name: str) -> Constant | None:
        value = self.namespace.get(name)
        if isinstance(value, np.generic) and value.dtype.kind in "biuf":
            return Constant(value.dtype.name, value.item())
        return None

    def callee(self, name: str) -> str | Callee | None:
        value = self.namespace[name] if name in self.namespace else {"min": min, "max": max, "abs": abs}.get(name)
        if value is np:
            return "numpy"
        translated = getattr(value, "translated", None)
        if isinstance(translated, _Translated):
            self.called.setdefault(translated.symbol, translated)
            return Callee(translated.symbol, translated.params)
        return _CALLEES.get(value) if value is not None else None


def nest(
    signature: str,
    vectorizer: str,
    fastmath: set[str],
    noalias: bool | tuple[str, ...] = False,
    linked: bool = True,
) -> Callable[[Callable[..., None]], Any]:
    """The decorator of an outlined nest: compiled for ``signature`` with ``vectorizer`` and the
    kernel's ``fastmath`` flags.

    The function's text is translated to LLVM IR (:func:`~autotune.codegen.nest_llvm.translate`;
    ``noalias``: the arrays, True for all, that the caller promises share no memory with another
    of its arrays) and becomes an
    intrinsic: where a kernel calls it, the call passes each array's data pointer (and an N-d
    array's dimensions). numba's frontend never sees the nest, which is what its compile time was
    (``experiments/compile_time.py``). A nest may call other translated nests: its code library
    links theirs, so LLVM inlines them into it.

    ``linked``: the caller's code library links the nest's code (LLVM may inline it; numba
    optimises it again with the caller, and again with each library that links the caller: a
    parallel loop's body is linked into three more). Not ``linked``: the nest is compiled when it
    is defined, or its machine code loaded from beside numba's cache of the function's file (where
    it is written when compiled), and callers call its symbol; that is how a kernel calls its
    parallel loop's body, optimised once (``experiments/compile_time.py``).

    A function the translator does not take (a construct outside its subset, or text that cannot
    be read back: a function defined by ``exec``) is compiled by numba with
    :class:`NestCompiler`, as numba would compile it (for its signature at once; a body where the
    kernel calls it, by numba's own pipeline, as it was in the kernel); the result's ``compiled_by`` says which
    (``llvm``, or ``numba: <why>``).
    """
    argtys, _ = sigutils.normalize_signature(signature)
    flags = tuple(sorted(fastmath))

    def decorate(fn: Callable[..., None]) -> Any:
        try:
            if not _reads_opaque_pointers():
                raise Unsupported(f"llvmlite {llvmlite.__version__} does not read LLVM IR with opaque pointers (ptr)")
            source = textwrap.dedent(inspect.getsource(fn))
            params = [_param(name, ty) for name, ty in zip(inspect.signature(fn).parameters, argtys, strict=True)]
            parts = (source, signature, vectorizer, *flags, str(noalias), *_bound_globals(fn))
            symbol = f"autotune_nest_{fn.__name__}_{hashlib.sha256(chr(0).join(parts).encode()).hexdigest()[:20]}"
            resolver = _Resolver(fn.__globals__)
            text = translate(source, params, resolver.constant, resolver.callee, symbol, flags, noalias)
        except (OSError, TypeError, ValueError, Unsupported) as exc:
            cache = os.path.isfile(fn.__code__.co_filename)  # numba caches what it can find on disk
            options: dict[str, Any] = {"cache": cache, "fastmath": set(flags), "nogil": True, "error_model": "numpy"}
            if linked:
                with vectorizer_config(vectorizer):
                    compiled: Any = njit(signature, pipeline_class=NestCompiler, **options)(fn)
            else:  # a parallel loop's body, compiled with the kernel (whose compile error it is), as numba
                compiled = njit(**options)(fn)  # compiled it in the kernel (with SSA: a name may change type)
            compiled.compiled_by = f"numba: {exc}"
            return compiled
        translated = _Translated(symbol, text, vectorizer, tuple(params), tuple(resolver.called.values()))
        if not linked:
            translated.register(_cache_dir(fn))
        return _intrinsic(translated, argtys, linked)

    return decorate


def _intrinsic(translated: _Translated, argtys: tuple[Any, ...], linked: bool) -> Any:
    """A numba intrinsic that calls the translated nest with the arguments of ``argtys``: its code
    linked into the caller's, or (not ``linked``) called by its symbol, registered already."""
    symbol = translated.symbol

    def typer(typingctx: Any, *args: Any) -> Any:
        if len(args) != len(argtys):
            return None

        def codegen(context: Any, builder: Any, sig: Any, values: Any) -> Any:
            if linked:
                context.active_code_library.add_linking_library(translated.library())
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
    compiled.llvm_ir = translated.text
    compiled.translated = translated
    compiled.library = translated.library
    compiled.assembly = translated.assembly
    return compiled
