"""The arrays a kernel's allocations live in: views at planned offsets into pool arrays.

With a :class:`~autotune.memory.MemoryPlan`, each pool is ONE preallocated
``uint8`` array with a 64-byte aligned base, and each allocation is a view
``pool[offset:offset + nbytes].view(dtype)`` at its planned offset, so the
kernel reads and writes the very bytes the planner placed. Without a plan,
each allocation gets its own 64-byte aligned array. A banked (N-d) allocation
is a tuple of 1-d arrays, one per bank.

Fresh storage is filled with ``0xFF`` bytes (a NaN in every float type), so a
kernel that reads an intermediate element it never wrote produces NaN and
fails the reference check.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Union

import numpy as np

from .. import ir
from ..errors import CodegenError
from ..memory import MemoryPlan, Placement
from ..workloads.arrays import aligned_empty
from .signature import StorageArg

__all__ = ["Storage", "StorageArray", "allocate_storage", "placements_of"]

StorageArray = Union[np.ndarray, tuple[np.ndarray, ...]]  # noqa: UP007 (runtime alias on 3.10)


@dataclass(frozen=True)
class Storage:
    """The storage of every allocation of a kernel, in kernel argument order.

    ``arrays[k]`` is handed to the kernel for ``args[k]``; ``pools`` maps pool
    names to their backing arrays (empty without a plan); ``workspace_bytes`` is
    the bytes reserved for all of them.
    """

    args: tuple[StorageArg, ...]
    arrays: tuple[StorageArray, ...]
    pools: dict[str, np.ndarray]
    workspace_bytes: int


def placements_of(st: StorageArg, plan: MemoryPlan) -> list[tuple[str, int, int | None]]:
    """``(pool, offset, planned size or None)`` of each bank of ``st``.

    Read from the ``Allocate`` annotations ``pool``/``offset`` (tuples with one
    entry per bank for a banked allocation), else from ``plan.placements`` by
    allocation name (``name``, or ``name.bank{k}`` for bank ``k``).
    """
    placed = st.placed()
    if placed is not None:
        return [(pool, offset, None) for pool, offset in placed]
    names = [st.name] if not st.banked else [f"{st.name}.bank{k}" for k in range(st.banks)]
    found: list[Placement] = []
    for name in names:
        try:
            found.append(plan.placement(name))
        except KeyError:
            raise CodegenError(
                f"codegen: the memory plan places no allocation {name!r} (known: "
                f"{', '.join(p.name for p in plan.placements) or 'none'})"
            ) from None
    return [(p.pool, p.offset, p.size) for p in found]


def _view(pool: np.ndarray, pool_name: str, offset: int, st: StorageArg, size: int | None) -> np.ndarray:
    nbytes = st.bank_elems * ir.dtype_bytes(st.dtype)
    if size is not None and size < nbytes:
        raise CodegenError(f"codegen: allocation {st.name} needs {nbytes} bytes, the plan gives {size}")
    if offset % ir.dtype_bytes(st.dtype) or offset + nbytes > pool.size:
        raise CodegenError(
            f"codegen: allocation {st.name} at offset {offset} ({nbytes} bytes) does not fit "
            f"pool {pool_name!r} of {pool.size} bytes or is misaligned for {st.dtype}"
        )
    return pool[offset : offset + nbytes].view(np.dtype(st.dtype))


def _pack(st: StorageArg, banks: Sequence[np.ndarray]) -> StorageArray:
    return tuple(banks) if st.banked else banks[0]


def allocate_storage(args: Sequence[StorageArg], plan: MemoryPlan | None = None) -> Storage:
    """Preallocate the storage of ``args``, inside the pools of ``plan`` if given."""
    if plan is None:
        arrays = tuple(
            _pack(
                st,
                [
                    aligned_empty(st.bank_elems * ir.dtype_bytes(st.dtype)).view(st.dtype)
                    for _ in range(st.banks)
                ],
            )
            for st in args
        )
        return Storage(tuple(args), arrays, {}, sum(st.nbytes for st in args))
    where = {st.arg: placements_of(st, plan) for st in args}
    needed: dict[str, int] = dict(plan.pool_peaks)
    for st in args:
        for pool, offset, _ in where[st.arg]:
            if pool not in needed:
                raise CodegenError(f"codegen: allocation {st.name} is placed in unknown pool {pool!r}")
            needed[pool] = max(needed[pool], offset + st.bank_elems * ir.dtype_bytes(st.dtype))
    pools = {name: aligned_empty(size) for name, size in needed.items() if size > 0}
    arrays = tuple(
        _pack(st, [_view(pools[p], p, o, st, size) for p, o, size in where[st.arg]]) for st in args
    )
    return Storage(tuple(args), arrays, pools, sum(needed.values()))


def describe(array: Any) -> str:
    """``float32[4096]`` or ``2 x float32[4096]`` for error messages."""
    if isinstance(array, tuple):
        return f"{len(array)} x {describe(array[0])}" if array else "()"
    return f"{array.dtype}{list(array.shape)}"
