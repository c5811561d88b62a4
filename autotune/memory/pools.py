"""Memory pools and the sizes written in configs and on the command line.

A :class:`Pool` is one named region of memory (``dtcm``, ``sram``) with a
size in bytes, like a USMP workspace buffer (``--with-workspace-buffer
"name=dtcm;size=1000"`` in TVM). Sizes are written as plain integers or with
a unit::

    parse_size("64KiB")  -> 65536      binary units: KiB, MiB, GiB
    parse_size("100kB")  -> 100000     decimal units: kB, MB, GB (``32KB`` is refused as ambiguous)
    parse_pools("dtcm=64KiB,sram=2MiB")
        -> (Pool(name='dtcm', size=65536), Pool(name='sram', size=2097152))
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from autotune.errors import ConfigError

__all__ = ["Pool", "format_size", "parse_pools", "parse_size"]

_UNITS: dict[str, int] = {
    "": 1,
    "B": 1,
    "kB": 1000,
    "MB": 1000**2,
    "GB": 1000**3,
    "KiB": 1024,
    "MiB": 1024**2,
    "GiB": 1024**3,
}
"""Units as written: SI ``kB``/``MB``/``GB`` exactly; IEC ``KiB``/``MiB``/``GiB`` and ``B`` in any case
(their spelling is unambiguous). Any other case of an SI unit (``KB``, ``kb``, ``mb``...) is refused."""
_IEC_ANY_CASE = {unit.lower(): unit for unit in ("B", "KiB", "MiB", "GiB")}
_PREFIXES = {"k": ("KiB", "kB", 1000), "m": ("MiB", "MB", 1000**2), "g": ("GiB", "GB", 1000**3)}
_SIZE_RE = re.compile(r"(\d+)\s*([a-z]*)", re.IGNORECASE)
_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*")
_EXPECTED = "expected a positive size such as 65536, 64KiB or 2MiB"


@dataclass(frozen=True, slots=True)
class Pool:
    """A named memory pool of ``size`` bytes.

    ``read_cost`` and ``write_cost`` are relative costs per byte (1.0 for the
    fastest memory) that a cost model may use; the planner ignores them.
    """

    name: str
    size: int
    read_cost: float = 1.0
    write_cost: float = 1.0

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME_RE.fullmatch(self.name):
            raise ConfigError(
                f"pool name: expected an identifier such as 'dtcm' or 'sram', got {self.name!r}"
            )
        if isinstance(self.size, bool) or not isinstance(self.size, int) or self.size <= 0:
            raise ConfigError(
                f"pool {self.name!r}: size: expected a positive number of bytes, got {self.size!r}"
            )
        for field in ("read_cost", "write_cost"):
            cost = getattr(self, field)
            ok = isinstance(cost, (int, float)) and not isinstance(cost, bool)
            if not ok or not math.isfinite(cost) or cost < 0:
                raise ConfigError(
                    f"pool {self.name!r}: {field}: expected a non-negative number, got {cost!r}"
                )


def parse_size(value: str | int, field: str = "size") -> int:
    """Return the number of bytes that ``value`` denotes.

    ``value`` is a positive ``int`` or a string made of digits and an optional
    unit (``kB``/``MB``/``GB`` in powers of 1000, written exactly so; ``B`` and
    ``KiB``/``MiB``/``GiB`` in powers of 1024, in any case; optional space).
    Anything else raises :class:`ConfigError` naming ``field``, the expectation
    and the value; ``KB`` (or ``kb``, ``mb``...), read as 1000 by some and 1024
    by others, is refused with both spellings::

        size: expected a positive size such as 65536, 64KiB or 2MiB, got '-3KiB'
        size: '32KB' is ambiguous (KB means 1000 or 1024 to different readers); write 32KiB (32,768 bytes) or 32kB (32,000 bytes)
    """
    if isinstance(value, int) and not isinstance(value, bool):
        if value > 0:
            return value
    elif isinstance(value, str):
        match = _SIZE_RE.fullmatch(value.strip())
        if match is not None:
            count, unit = int(match.group(1)), match.group(2)
            unit = unit if unit in _UNITS else _IEC_ANY_CASE.get(unit.lower(), unit)
            if unit in _UNITS:
                if count * _UNITS[unit] > 0:
                    return count * _UNITS[unit]
            elif unit.lower() in ("kb", "mb", "gb") and count > 0:
                iec, si, scale = _PREFIXES[unit[0].lower()]
                raise ConfigError(
                    f"{field}: {value.strip()!r} is ambiguous ({unit} means 1000 or 1024 to different "
                    f"readers); write {count}{iec} ({count * _UNITS[iec]:,} bytes) or {count}{si} "
                    f"({count * scale:,} bytes)"
                )
    raise ConfigError(f"{field}: {_EXPECTED}, got {value!r}")


def parse_pools(spec: str) -> tuple[Pool, ...]:
    """Parse the command-line form ``"dtcm=64KiB,sram=2MiB"`` into pools, in order.

    Raises :class:`ConfigError` on an empty spec, an entry that is not
    ``NAME=SIZE``, a bad size or a repeated name; entries are named
    ``pools[i]`` as in a config file.
    """
    if not isinstance(spec, str) or not spec.strip():
        raise ConfigError(f"pools: expected NAME=SIZE[,NAME=SIZE...] such as dtcm=64KiB, got {spec!r}")
    pools: list[Pool] = []
    for index, entry in enumerate(spec.split(",")):
        name, sep, size = (part.strip() for part in entry.partition("="))
        if not sep or not _NAME_RE.fullmatch(name):
            raise ConfigError(f"pools[{index}]: expected NAME=SIZE such as dtcm=64KiB, got {entry.strip()!r}")
        if any(pool.name == name for pool in pools):
            raise ConfigError(f"pools[{index}]: duplicate pool name {name!r}")
        pools.append(Pool(name, parse_size(size, f"pools[{index}].size")))
    return tuple(pools)


def format_size(n: int) -> str:
    """Format a byte count for people: ``"512 B"``, ``"99,840 B (97.5 KiB)"``."""
    text = f"{n:,} B"
    for unit, scale in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if abs(n) >= scale:
            return f"{text} ({n / scale:.1f} {unit})"
    return text
