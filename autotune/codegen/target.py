"""The CPU target numba compiles for: 512-bit vectors where the host has AVX-512.

numba vectorises at 256 bits by default, even on an AVX-512 host (LLVM's
``prefer-256-bit``). Setting ``NUMBA_CPU_FEATURES`` to the host's features plus
``-prefer-256-bit`` gives 512-bit vectors: 1.4–1.8x on compute-bound kernels
(DESIGN.md, "Facts measured on this machine"). numba reads that variable when it
is imported, so :func:`configure_numba_env` must run before the first
``import numba`` of the process; :func:`autotune.codegen.build` calls it.

Environment:

- ``AUTOTUNE_VECTOR_WIDTH=256`` keeps numba's default (256-bit vectors);
  any other value, or none, asks for 512 bits when the host has ``avx512f``.
- ``NUMBA_CPU_FEATURES`` already set: left alone (the user decided).
- ``GOMP_SPINCOUNT`` (:data:`OMP_SPINCOUNT` unless set): how long the threads of numba's OpenMP
  pool spin after a parallel loop before they sleep. With libgomp's own count, a worker that had
  just timed a kernel kept two threads spinning while the next worker timed its own: 20% of such
  timings had their threads waiting for a CPU over a fifth of the time, 5% with 10,000
  (``experiments/omp_spin.py``, ``results/omp_spin.md``). libgomp reads it when numba first starts
  its thread pool.
"""

from __future__ import annotations

import os
import sys

__all__ = ["OMP_SPINCOUNT", "VECTOR_WIDTH_ENV", "configure_numba_env", "host_has_avx512", "vector_width"]

VECTOR_WIDTH_ENV = "AUTOTUNE_VECTOR_WIDTH"
OMP_SPINCOUNT = "10000"
"""``GOMP_SPINCOUNT`` for the processes that build kernels, unless already set (see the module docstring)."""


def _host_features() -> str:
    """llvmlite's feature string of the host (``+avx2,+avx512f,...``); does not initialise numba."""
    import llvmlite.binding as llvm

    return str(llvm.get_host_cpu_features().flatten())


def host_has_avx512(features: str | None = None) -> bool:
    """Whether the host CPU (or the feature string ``features``) has ``avx512f``; does not initialise numba."""
    return "+avx512f" in (_host_features() if features is None else features).split(",")


def configure_numba_env() -> str | None:
    """Ask numba for 512-bit vectors if allowed and possible; return the features set, or None.
    Sets ``GOMP_SPINCOUNT`` to :data:`OMP_SPINCOUNT` when it is not set (always, as a thread pool
    not started yet still reads it).

    Does nothing (returns None) when ``NUMBA_CPU_FEATURES`` is already set, when
    ``AUTOTUNE_VECTOR_WIDTH`` is ``"256"``, when the host lacks ``avx512f``, or
    when numba is already imported (too late: it has read its configuration).
    """
    os.environ.setdefault("GOMP_SPINCOUNT", OMP_SPINCOUNT)
    if os.environ.get("NUMBA_CPU_FEATURES") or os.environ.get(VECTOR_WIDTH_ENV) == "256":
        return None
    if "numba" in sys.modules:
        return None
    features = _host_features()
    if not host_has_avx512(features):
        return None
    features = ",".join(f for f in features.split(",") if f.lstrip("+-") != "prefer-256-bit")
    features += ",-prefer-256-bit"
    os.environ["NUMBA_CPU_FEATURES"] = features
    return features


def vector_width() -> int:
    """The vector width in bits numba compiles for in this process (256 or 512)."""
    features = os.environ.get("NUMBA_CPU_FEATURES", "")
    wide = "+avx512f" in features.split(",") and "-prefer-256-bit" in features.split(",")
    return 512 if wide else 256
