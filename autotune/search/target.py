"""The machine a schedule is tuned for, in one place: what the schedule rules ask of the host.

A :class:`Target` holds the figures the space families use to offer their choices: the cores a
``parallel`` loop is split over, the accumulators a register tile may hold (the vector registers
times their lanes), the longest loop the code generator unrolls, and the cache sizes (recorded
for the reader of a run; no rule sizes its tiles by them yet). :meth:`Target.host` reads them
from this machine; a schedule tuned on one target can be slower on another (a register tile of
the AVX-512 register file spills on AVX2: ``results/reduction_tiles.md``), so a run records its
target and :meth:`Target.differences` names what changed.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from ..codegen import UNROLL_LIMIT
from ..codegen.target import VECTOR_WIDTH_ENV, host_has_avx512

__all__ = ["Target"]

_CACHE_DIR = Path("/sys/devices/system/cpu/cpu0/cache")


def _size(text: str) -> int:
    """``48K`` -> 49152 (sysfs cache sizes are in KiB or MiB)."""
    text = text.strip().upper()
    scale = {"K": 1024, "M": 1024**2, "G": 1024**3}.get(text[-1:], 1)
    return int(text.rstrip("KMG") or 0) * scale


def _caches() -> tuple[int, int, int]:
    """L1 data, L2 and L3 sizes in bytes of CPU 0 (0 where sysfs does not say)."""
    sizes = {1: 0, 2: 0, 3: 0}
    for index in sorted(_CACHE_DIR.glob("index*")) if _CACHE_DIR.exists() else ():
        try:
            level = int((index / "level").read_text())
            kind = (index / "type").read_text().strip()
            if kind in ("Data", "Unified") and level in sizes:
                sizes[level] = _size((index / "size").read_text())
        except (OSError, ValueError):
            continue
    return sizes[1], sizes[2], sizes[3]


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


@dataclass(frozen=True)
class Target:
    """What the space families know of the machine (see the module docstring)."""

    llvm_cpu: str
    cores: int
    vector_bits: int
    """The vector width numba compiles for (256, or 512 on an AVX-512 host unless told otherwise)."""
    vector_registers: int
    """16 ymm registers without AVX-512, 32 with it."""
    unroll_limit: int = UNROLL_LIMIT
    l1d_bytes: int = 0
    l2_bytes: int = 0
    l3_bytes: int = 0

    @property
    def register_floats(self) -> int:
        """How many float32 accumulators the vector registers hold: a register tile of more spills
        (a 1x1 convolution's 8x16 tile ran 2-3x slower than its 4x16 tile on the AVX2 host)."""
        return self.vector_registers * self.vector_bits // 32

    @property
    def parallel_parts(self) -> int:
        """The parts a ``parallel`` loop is split into: one per core."""
        return max(self.cores, 1)

    @classmethod
    def host(cls) -> Target:
        import llvmlite.binding as llvm

        avx512 = host_has_avx512()
        # what codegen.configure_numba_env asks numba for before it compiles
        bits = 512 if avx512 and os.environ.get(VECTOR_WIDTH_ENV) != "256" else 256
        l1, l2, l3 = _caches()
        return cls(str(llvm.get_host_cpu_name()), _cores(), bits, 32 if avx512 else 16, UNROLL_LIMIT, l1, l2, l3)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Target:
        """The target a run recorded; ValueError naming a missing or unknown field."""
        names = {f.name for f in fields(cls)}
        required = ("llvm_cpu", "cores", "vector_bits", "vector_registers")
        unknown, missing = sorted(set(data) - names), sorted(n for n in required if n not in data)
        if unknown or missing:
            raise ValueError(f"target: unknown fields {unknown}, missing fields {missing}")
        return cls(**data)

    def differences(self, other: Target) -> list[str]:
        """What ``other`` has that differs from this target, as ``field: this -> other``."""
        mine, theirs = self.to_json(), other.to_json()
        return [f"{k}: {mine[k]} -> {theirs[k]}" for k in mine if mine[k] != theirs[k]]
