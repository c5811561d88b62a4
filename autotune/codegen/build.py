"""Build a lowered function into a callable numba kernel, compiled once per process.

Each outlined nest of :func:`~autotune.codegen.source.generate_source`
(:class:`~autotune.codegen.signature.NestModule`) is written to
``<cache_dir>/kernels/n_<key16>.py`` and imported as the module
``autotune_nest_<key16>``, where its decorator (:func:`autotune.codegen.runtime.nest`)
translates it to LLVM IR, optimised with its vectoriser once per process. ``key`` =
:func:`kernel_key` of the module's text, which holds the nest's code only: kernels that
share a nest (search candidates that differ in another stage) share its module and its
optimised code, linked into each. The kernel's module is its text with each
nest's definition replaced by ``from autotune_nest_<key16> import nest as <name>``
(:meth:`~autotune.codegen.signature.KernelSource.module_text`), written to
``<cache_dir>/kernels/k_<key16>.py`` (``key`` of that text), imported as the real
module ``autotune_kernel_<key16>`` (numba's disk cache needs a module registered
in ``sys.modules``; ``cache=True`` fails on ``exec``'d functions) and compiled
with ``numba.njit(cache=True, ...)`` (the decorator is part of the source). An
in-process dict keeps each compiled dispatcher, so one source is never compiled
twice in a process; the disk cache makes a fresh process pay about 0.3 s instead
of a full compile. ``Kernel.source`` is the kernel's complete text, which defines
the nests itself (what a report shows; it runs standalone).

``cache_dir`` defaults to ``$AUTOTUNE_CACHE_DIR``, else ``~/.cache/autotune``.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import importlib.util
import os
import sys
import threading
import time
from contextlib import AbstractContextManager
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from .. import ir
from ..errors import CodegenError
from ..files import write_atomic
from ..memory import MemoryPlan
from .signature import NestModule
from .source import KernelSource, generate_source
from .storage import Storage, StorageArray, allocate_storage, describe
from .target import configure_numba_env

__all__ = ["Kernel", "build", "clear_memory_cache", "default_cache_dir", "kernel_key"]

_LOCK = threading.RLock()
_DISPATCHERS: dict[str, Any] = {}
"""key -> numba dispatcher of every kernel module imported in this process."""
_NESTS: dict[str, ModuleType] = {}
"""key -> every nest module imported in this process."""


def default_cache_dir() -> Path:
    """``$AUTOTUNE_CACHE_DIR``, else ``~/.cache/autotune``."""
    env = os.environ.get("AUTOTUNE_CACHE_DIR")
    return Path(env) if env else Path.home() / ".cache" / "autotune"


_COMPILERS = ("runtime.py", "nest_llvm.py", "nest_llvm_exprs.py", "nest_llvm_types.py")
"""The modules that compile a kernel's outlined nests (numba's disk cache holds the kernel with its
nests' code in it, and would not see a change to them)."""


@functools.cache
def _compilers_digest() -> str:
    here = Path(__file__).parent
    return hashlib.sha256(b"".join((here / name).read_bytes() for name in _COMPILERS)).hexdigest()


def kernel_key(text: str) -> str:
    """sha256 (hex) of a kernel's source text, the numba version that compiles it and the code that
    compiles its outlined nests."""
    version = importlib.metadata.version("numba")
    return hashlib.sha256(f"{text}\0numba={version}\0nests={_compilers_digest()}".encode()).hexdigest()


def clear_memory_cache() -> None:
    """Forget the dispatchers compiled in this process (for tests; modules stay imported)."""
    with _LOCK:
        _DISPATCHERS.clear()
        _NESTS.clear()


def _numba() -> ModuleType:
    configure_numba_env()
    import numba

    return numba


def _import(modname: str, path: Path, vectorizer: str) -> ModuleType:
    """The module ``modname`` of ``path``, imported (with ``vectorizer`` set) unless it was already."""
    module = sys.modules.get(modname)
    if module is not None:
        return module
    _numba()
    spec = importlib.util.spec_from_file_location(modname, path)
    if spec is None or spec.loader is None:
        raise CodegenError(f"codegen: cannot import module {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[modname] = module  # before exec: numba's cache locates the module by name
    try:
        with _vectorizer(vectorizer):
            spec.loader.exec_module(module)
    except Exception as exc:
        del sys.modules[modname]
        raise CodegenError(f"codegen: module {path} failed to import: {exc}") from exc
    return module


def _load_nest(nest: NestModule, kernels: Path) -> tuple[str, Path, float]:
    """Write and import ``nest``'s module (once per process): its name, its path and the seconds
    the import took (its text translated to LLVM IR then, or compiled by numba when the translator
    does not take it; 0 when this process imported it before)."""
    key = kernel_key(nest.text)
    modname, path = f"autotune_nest_{key[:16]}", kernels / f"n_{key[:16]}.py"
    with _LOCK:
        write_atomic(path, nest.text, skip_unchanged=True)  # an unchanged mtime keeps numba's cache valid
        if key in _NESTS:
            return modname, path, 0.0
        start = time.perf_counter()
        _NESTS[key] = _import(modname, path, nest.vectorizer)
        return modname, path, time.perf_counter() - start


def _load_dispatcher(source: KernelSource, key: str, path: Path) -> tuple[Any, float]:
    """Import the kernel module from ``path`` (once per process; its nests' modules imported
    before) and return its dispatcher and the seconds the import took."""
    with _LOCK:
        if key in _DISPATCHERS:
            return _DISPATCHERS[key], 0.0
        start = time.perf_counter()
        module = _import(f"autotune_kernel_{key[:16]}", path, "loop")
        dispatcher = getattr(module, source.name)
        _DISPATCHERS[key] = dispatcher
        return dispatcher, time.perf_counter() - start


def _vectorizer(mode: str) -> AbstractContextManager[None]:
    """:func:`autotune.codegen.runtime.vectorizer_config` (imported with numba, on first use)."""
    _numba()
    from .runtime import vectorizer_config

    return vectorizer_config(mode)


class Kernel:
    """A compiled function: call it with the function's parameter arrays.

    ``storage`` holds the preallocated arrays of every allocation (views into
    ``pools`` when built with a memory plan); the kernel itself never allocates.
    ``path`` is the imported kernel module, ``nest_paths`` the modules of its outlined nests.
    ``compile_seconds`` is None until the first call or :meth:`compile`; it counts
    ``import_seconds`` too: the seconds this process spent importing the kernel's module and the
    modules of its nests that it had not imported before (a nest's text is translated to LLVM IR
    then, and LLVM compiles it with the kernel; 0 when every one was imported already).
    """

    def __init__(
        self,
        source: KernelSource,
        path: Path,
        key: str,
        dispatcher: Any,
        storage: Storage,
        import_seconds: float = 0.0,
        nest_paths: tuple[Path, ...] = (),
    ) -> None:
        self.kernel_source = source
        self.path = path
        self.key = key
        self.dispatcher = dispatcher
        self._storage = storage
        self.import_seconds = import_seconds
        self.nest_paths = nest_paths
        self.compile_seconds: float | None = None

    @property
    def source(self) -> str:
        """The kernel's complete Python text, its outlined nests defined in it (the imported module,
        at ``path``, imports them from their own modules instead)."""
        return self.kernel_source.text

    @property
    def name(self) -> str:
        return self.kernel_source.name

    @property
    def parallel(self) -> bool:
        """Whether the kernel has a parallel loop (``numba.prange``), run on numba's threads (one per core)."""
        return self.kernel_source.parallel

    @property
    def storage(self) -> tuple[StorageArray, ...]:
        """The arrays handed to the kernel after the parameters, one per allocation."""
        return self._storage.arrays

    @property
    def pools(self) -> dict[str, np.ndarray]:
        """Pool name -> its ``uint8`` backing array (empty when built without a plan)."""
        return self._storage.pools

    @property
    def workspace_bytes(self) -> int:
        """Bytes reserved for the allocations (the pools' peaks with a plan)."""
        return self._storage.workspace_bytes

    def check_args(self, arrays: tuple[Any, ...]) -> None:
        """Raise :class:`CodegenError` unless ``arrays`` match the parameters one to one."""
        params = self.kernel_source.params
        if len(arrays) != len(params):
            names = ", ".join(p.buffer for p in params)
            raise CodegenError(
                f"kernel {self.name}: expected {len(params)} arrays ({names}), got {len(arrays)}"
            )
        for k, (p, a) in enumerate(zip(params, arrays)):
            want = f"{p.dtype}{list(p.shape)}"
            if not isinstance(a, np.ndarray):
                raise CodegenError(
                    f"kernel {self.name}: argument {k} ({p.buffer}) must be a numpy array {want}, got {type(a).__name__}"
                )
            if a.dtype != np.dtype(p.dtype) or a.shape != p.shape:
                raise CodegenError(
                    f"kernel {self.name}: argument {k} ({p.buffer}) must be {want}, got {describe(a)}"
                )
            if not a.flags.c_contiguous or not a.flags.writeable:
                raise CodegenError(
                    f"kernel {self.name}: argument {k} ({p.buffer}) must be C-contiguous and writeable"
                )

    def compile(self, *arrays: np.ndarray) -> float:
        """Compile for the types of ``arrays`` (default: the parameters' own) without running.

        Returns and records the seconds taken, ``import_seconds`` included (the kernel's module and
        the nest modules this build imported first: about 0 when this process already compiled the
        same source and nests; about 0.3 s on a disk-cache hit).
        """
        if not arrays:
            arrays = tuple(np.empty(p.shape, p.dtype) for p in self.kernel_source.params)
        self.check_args(arrays)
        numba = _numba()
        start = time.perf_counter()
        try:
            with _LOCK, _vectorizer(self.kernel_source.vectorizer):
                sig = tuple(numba.typeof(a) for a in (*arrays, *self.storage))
                self.dispatcher.compile(sig)
        except Exception as exc:  # numba raises many types (TypingError, LoweringError, ...)
            raise CodegenError(f"kernel {self.name}: numba failed to compile {self.path}:\n{exc}") from exc
        self.compile_seconds = self.import_seconds + time.perf_counter() - start
        return self.compile_seconds

    def __call__(self, *arrays: np.ndarray) -> None:
        """Run the kernel on the parameter arrays (inputs, then outputs written in place)."""
        self.check_args(arrays)
        if self.compile_seconds is None:
            self.compile(*arrays)
        self.dispatcher(*arrays, *self.storage)

    def __repr__(self) -> str:
        return f"Kernel({self.name!r}, {self.path.name})"


def build(
    func: ir.Func, plan: MemoryPlan | None = None, cache_dir: str | os.PathLike[str] | None = None
) -> Kernel:
    """Generate, write and import the kernel of a lowered ``func`` and allocate its storage.

    With ``plan``, every allocation is a view at its planned offset into one
    preallocated array per pool. Compilation happens on the first call or on
    :meth:`Kernel.compile`. Raises :class:`CodegenError` if the source cannot
    be generated or imported, or the plan does not place an allocation.
    """
    source = generate_source(func)
    kernels = (Path(cache_dir) if cache_dir is not None else default_cache_dir()) / "kernels"
    kernels.mkdir(parents=True, exist_ok=True)
    loaded = [_load_nest(nest, kernels) for nest in source.nests]
    text = source.module_text({nest.name: modname for nest, (modname, _, _) in zip(source.nests, loaded)})
    key = kernel_key(text)
    path = kernels / f"k_{key[:16]}.py"
    # content-addressed: rewriting the same text would only change the mtime and void numba's cache
    write_atomic(path, text, skip_unchanged=True)
    storage = allocate_storage(source.storage, plan)
    dispatcher, import_seconds = _load_dispatcher(source, key, path)
    import_seconds += sum(seconds for _, _, seconds in loaded)
    return Kernel(source, path, key, dispatcher, storage, import_seconds, tuple(p for _, p, _ in loaded))
