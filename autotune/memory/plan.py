"""Allocations to place and the plan that places them.

An :class:`Allocation` is an abstract workspace buffer: a size in bytes, a
lifetime ``[start, end]`` (inclusive, in program order), the pools it may go
to (the USMP ``candidate_memory_pools`` annotation of a TIR ``Allocate``) and
an alignment. A planner turns allocations into a :class:`MemoryPlan`: one
:class:`Placement` (pool and byte offset) per allocation.

Invalid allocations and placements are bugs of the code that builds them
(lowering), so they raise ``ValueError``; a plan that breaks its invariants
raises :class:`LoweringError` from :meth:`MemoryPlan.verify`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from autotune.errors import LoweringError
from autotune.memory.pools import Pool, format_size

__all__ = ["Allocation", "MemoryPlan", "Placement", "lifetimes_overlap"]


def _check_int(owner: str, field: str, value: object, minimum: int | None) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{owner}: {field} must be an int, got {value!r}")
    if minimum is not None and value < minimum:
        raise ValueError(f"{owner}: {field} must be >= {minimum}, got {value!r}")


@dataclass(frozen=True, slots=True)
class Allocation:
    """A buffer of ``size`` bytes live from ``start`` to ``end`` inclusive.

    ``candidates`` lists the pools it may be placed in, in order of
    preference; empty means every pool, in the memory system's order. Its
    offset in the chosen pool is a multiple of ``alignment``.
    """

    name: str
    size: int
    start: int
    end: int
    candidates: tuple[str, ...] = ()
    alignment: int = 64

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"allocation name must be a non-empty str, got {self.name!r}")
        owner = f"allocation {self.name!r}"
        _check_int(owner, "size", self.size, 1)
        _check_int(owner, "start", self.start, None)
        _check_int(owner, "end", self.end, self.start)
        _check_int(owner, "alignment", self.alignment, 1)
        if isinstance(self.candidates, str):
            raise ValueError(f"{owner}: candidates must be a tuple of pool names, not a str")
        candidates = tuple(self.candidates)
        if not all(isinstance(c, str) and c for c in candidates):
            raise ValueError(f"{owner}: candidates must be pool names, got {candidates!r}")
        if len(set(candidates)) != len(candidates):
            raise ValueError(f"{owner}: candidates repeat a pool: {candidates!r}")
        object.__setattr__(self, "candidates", candidates)

    def overlaps(self, other: Allocation) -> bool:
        """Whether the two lifetimes share at least one program point."""
        return lifetimes_overlap(self.start, self.end, other.start, other.end)


@dataclass(frozen=True, slots=True)
class Placement:
    """Where one allocation lives: ``[offset, offset + size)`` of ``pool``."""

    name: str
    pool: str
    offset: int
    size: int
    start: int
    end: int

    def __post_init__(self) -> None:
        owner = f"placement {self.name!r}"
        _check_int(owner, "offset", self.offset, 0)
        _check_int(owner, "size", self.size, 1)
        _check_int(owner, "start", self.start, None)
        _check_int(owner, "end", self.end, self.start)

    @property
    def top(self) -> int:
        """One past the last byte: ``offset + size``."""
        return self.offset + self.size


def lifetimes_overlap(start_a: int, end_a: int, start_b: int, end_b: int) -> bool:
    """Whether inclusive lifetimes ``[start_a, end_a]`` and ``[start_b, end_b]`` meet."""
    return start_a <= end_b and start_b <= end_a


@dataclass(frozen=True, slots=True)
class MemoryPlan:
    """The pool and offset of every allocation, as chosen by ``algorithm``."""

    placements: tuple[Placement, ...]
    pools: tuple[Pool, ...]
    algorithm: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "placements", tuple(self.placements))
        object.__setattr__(self, "pools", tuple(self.pools))
        if not self.pools:
            raise ValueError("memory plan: needs at least one pool")
        names = [p.name for p in self.placements]
        if len(set(names)) != len(names):
            raise ValueError(f"memory plan: placement names repeat: {names!r}")
        known = {pool.name for pool in self.pools}
        if len(known) != len(self.pools):
            raise ValueError("memory plan: pool names repeat")
        for placement in self.placements:
            if placement.pool not in known:
                raise ValueError(
                    f"memory plan: placement {placement.name!r} is in unknown pool {placement.pool!r}"
                )

    @property
    def pool_peaks(self) -> dict[str, int]:
        """High-water mark of each pool (``max(offset + size)``, 0 if empty), in pool order."""
        peaks = {pool.name: 0 for pool in self.pools}
        for placement in self.placements:
            peaks[placement.pool] = max(peaks[placement.pool], placement.top)
        return peaks

    @property
    def total_peak(self) -> int:
        """Sum of the pools' high-water marks: the workspace this plan reserves."""
        return sum(self.pool_peaks.values())

    def placement(self, name: str) -> Placement:
        """The placement of allocation ``name`` (``KeyError`` if there is none)."""
        for placement in self.placements:
            if placement.name == name:
                return placement
        raise KeyError(f"memory plan has no allocation {name!r}")

    def verify(self) -> None:
        """Raise :class:`LoweringError` unless every placement fits its pool and
        no two allocations live at the same time share a byte of one pool."""
        sizes = {pool.name: pool.size for pool in self.pools}
        for i, a in enumerate(self.placements):
            if a.top > sizes[a.pool]:
                raise LoweringError(
                    f"memory plan: {a.name!r} ends at byte {a.top:,}, past pool "
                    f"{a.pool!r} of {sizes[a.pool]:,} bytes"
                )
            for b in self.placements[i + 1 :]:
                if (
                    a.pool == b.pool
                    and lifetimes_overlap(a.start, a.end, b.start, b.end)
                    and a.offset < b.top
                    and b.offset < a.top
                ):
                    raise LoweringError(
                        f"memory plan: {a.name!r} and {b.name!r} are live together "
                        f"and overlap in pool {a.pool!r}"
                    )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-friendly dict; :meth:`from_dict` reads it back.

        ``pool_peaks`` and ``total_peak`` are included for readers and ignored
        when reading.
        """
        return {
            "algorithm": self.algorithm,
            "pools": [
                {
                    "name": p.name,
                    "size": p.size,
                    "read_cost": p.read_cost,
                    "write_cost": p.write_cost,
                }
                for p in self.pools
            ],
            "placements": [
                {
                    "name": p.name,
                    "pool": p.pool,
                    "offset": p.offset,
                    "size": p.size,
                    "start": p.start,
                    "end": p.end,
                }
                for p in self.placements
            ],
            "pool_peaks": self.pool_peaks,
            "total_peak": self.total_peak,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> MemoryPlan:
        """Rebuild a plan written by :meth:`to_dict` (``ValueError`` if malformed)."""
        try:
            pools = tuple(Pool(**pool) for pool in data["pools"])
            placements = tuple(Placement(**p) for p in data["placements"])
            algorithm = data["algorithm"]
        except (KeyError, TypeError) as exc:
            raise ValueError(f"memory plan: malformed dict: {exc}") from exc
        return cls(placements=placements, pools=pools, algorithm=str(algorithm))

    def summary(self) -> str:
        """A deterministic text table: each pool with its size and peak, then its
        allocations by offset."""
        peaks = self.pool_peaks
        lines = [f"memory plan ({self.algorithm}): total peak {format_size(self.total_peak)}"]
        for pool in self.pools:
            mine = sorted(
                (p for p in self.placements if p.pool == pool.name),
                key=lambda p: (p.offset, p.start, p.name),
            )
            used = 100.0 * peaks[pool.name] / pool.size
            lines.append(
                f"pool {pool.name!r}: size {format_size(pool.size)}, "
                f"peak {format_size(peaks[pool.name])}, {used:.1f}% used, "
                f"{len(mine)} allocation{'' if len(mine) == 1 else 's'}"
            )
            if mine:
                lines.append(f"  {'offset':>12}  {'size':>12}  {'lifetime':<12}  name")
            for p in mine:
                lifetime = f"[{p.start}, {p.end}]"
                lines.append(f"  {p.offset:>12,}  {p.size:>12,}  {lifetime:<12}  {p.name}")
        return "\n".join(lines)
