"""Build a lowered function into a callable numba kernel, compiled once per process.

The source of :func:`~autotune.codegen.source.generate_source` is written to
``<cache_dir>/kernels/k_<key16>.py`` (``key`` = sha256 of the text and the numba
version), imported as the real module ``autotune_kernel_<key16>`` (numba's disk
cache needs a module registered in ``sys.modules``; ``cache=True`` fails on
``exec``'d functions) and compiled with ``numba.njit(cache=True, ...)`` (the
decorator is part of the source). An in-process dict keeps each compiled
dispatcher, so one source is never compiled twice in a process; the disk
cache makes a fresh process pay about 0.3 s instead of a full compile.

``cache_dir`` defaults to ``$AUTOTUNE_CACHE_DIR``, else ``~/.cache/autotune``.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import os
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from .. import ir
from ..errors import CodegenError
from ..files import write_atomic
from ..memory import MemoryPlan
from .source import KernelSource, generate_source
from .storage import Storage, StorageArray, allocate_storage, describe
from .target import configure_numba_env

__all__ = ["Kernel", "build", "clear_memory_cache", "default_cache_dir", "kernel_key"]

_LOCK = threading.RLock()
_DISPATCHERS: dict[str, Any] = {}
"""key -> numba dispatcher of every kernel module imported in this process."""


def default_cache_dir() -> Path:
    """``$AUTOTUNE_CACHE_DIR``, else ``~/.cache/autotune``."""
    env = os.environ.get("AUTOTUNE_CACHE_DIR")
    return Path(env) if env else Path.home() / ".cache" / "autotune"


def kernel_key(text: str) -> str:
    """sha256 (hex) of a kernel's source text and the numba version that compiles it."""
    version = importlib.metadata.version("numba")
    return hashlib.sha256(f"{text}\0numba={version}".encode()).hexdigest()


def clear_memory_cache() -> None:
    """Forget the dispatchers compiled in this process (for tests; modules stay imported)."""
    with _LOCK:
        _DISPATCHERS.clear()


def _numba() -> ModuleType:
    configure_numba_env()
    import numba

    return numba


def _load_dispatcher(source: KernelSource, key: str, path: Path) -> tuple[Any, float]:
    """Import the kernel module from ``path`` (once per process) and return its dispatcher and the
    seconds the import took: it compiles the outlined nests, whose signatures are explicit (0 when
    the module was imported before)."""
    with _LOCK:
        if key in _DISPATCHERS:
            return _DISPATCHERS[key], 0.0
        numba = _numba()
        start = time.perf_counter()
        modname = f"autotune_kernel_{key[:16]}"
        module = sys.modules.get(modname)
        if module is None:
            spec = importlib.util.spec_from_file_location(modname, path)
            if spec is None or spec.loader is None:
                raise CodegenError(f"codegen: cannot import kernel module {path}")
            module = importlib.util.module_from_spec(spec)
            sys.modules[modname] = module  # before exec: numba's cache locates the module by name
            try:
                with _vectorizer(numba, source.outlined_vectorizer or "loop"):
                    spec.loader.exec_module(module)
            except Exception as exc:
                del sys.modules[modname]
                raise CodegenError(f"codegen: kernel module {path} failed to import: {exc}") from exc
        dispatcher = getattr(module, source.name)
        _DISPATCHERS[key] = dispatcher
        return dispatcher, time.perf_counter() - start


@contextmanager
def _vectorizer(numba: ModuleType, mode: str) -> Iterator[None]:
    """Compile with LLVM's loop vectoriser off and SLP on when ``mode`` is ``slp``.

    numba reads ``config.LOOP_VECTORIZE``/``SLP_VECTORIZE`` each time it builds a
    module pass manager, and its cheap pre-pass reads the codegen's ``_loopvect``;
    both are set for the duration of one compile (under ``_LOCK``) and restored.
    A cached kernel needs neither: the mode is part of its source, hence its key.
    """
    if mode != "slp":
        yield
        return
    config = numba.core.config
    codegen = numba.core.registry.cpu_target.target_context.codegen()
    saved = (config.LOOP_VECTORIZE, config.SLP_VECTORIZE, codegen._loopvect)
    config.LOOP_VECTORIZE, config.SLP_VECTORIZE, codegen._loopvect = False, True, False
    try:
        yield
    finally:
        config.LOOP_VECTORIZE, config.SLP_VECTORIZE, codegen._loopvect = saved


class Kernel:
    """A compiled function: call it with the function's parameter arrays.

    ``storage`` holds the preallocated arrays of every allocation (views into
    ``pools`` when built with a memory plan); the kernel itself never allocates.
    ``compile_seconds`` is None until the first call or :meth:`compile`; it counts the import of
    the kernel's module too (``import_seconds``: numba compiles the outlined nests, whose signatures
    are explicit, when the module is imported; 0 when this process had imported it already).
    """

    def __init__(
        self, source: KernelSource, path: Path, key: str, dispatcher: Any, storage: Storage, import_seconds: float = 0.0
    ) -> None:
        self.kernel_source = source
        self.path = path
        self.key = key
        self.dispatcher = dispatcher
        self._storage = storage
        self.import_seconds = import_seconds
        self.compile_seconds: float | None = None

    @property
    def source(self) -> str:
        """The kernel module's Python text."""
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

        Returns and records the seconds taken, the module's import included (about 0 when this
        process already compiled the same source; about 0.3 s on a disk-cache hit).
        """
        if not arrays:
            arrays = tuple(np.empty(p.shape, p.dtype) for p in self.kernel_source.params)
        self.check_args(arrays)
        numba = _numba()
        start = time.perf_counter()
        try:
            with _LOCK, _vectorizer(numba, self.kernel_source.vectorizer):
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
    key = kernel_key(source.text)
    path = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    path = path / "kernels" / f"k_{key[:16]}.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    # content-addressed: rewriting the same text would only change the mtime and void numba's cache
    write_atomic(path, source.text, skip_unchanged=True)
    storage = allocate_storage(source.storage, plan)
    dispatcher, import_seconds = _load_dispatcher(source, key, path)
    return Kernel(source, path, key, dispatcher, storage, import_seconds)
