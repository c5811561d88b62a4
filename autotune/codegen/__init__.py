"""Code generation: a lowered :class:`~autotune.ir.Func` -> Python source -> a numba kernel.

:func:`generate_source` is pure Python; :func:`build` imports numba on first use
(after :func:`~autotune.codegen.target.configure_numba_env`), writes the source
to the kernel cache and compiles it once per process.
"""

from __future__ import annotations

from .build import Kernel, build, clear_memory_cache
from .signature import KernelSource, ParamArg, StorageArg
from .source import UNROLL_LIMIT, generate_source
from .target import configure_numba_env

__all__ = [
    "Kernel",
    "KernelSource",
    "ParamArg",
    "StorageArg",
    "UNROLL_LIMIT",
    "build",
    "clear_memory_cache",
    "configure_numba_env",
    "generate_source",
]
