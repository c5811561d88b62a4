"""Fresh names: the one rule used by TE lowering and the schedule primitives."""

from __future__ import annotations


def fresh_name(taken: set[str], base: str) -> str:
    """``base`` or ``base_1``, ``base_2``... whichever is not taken; the result is added to ``taken``."""
    name, n = base, 0
    while name in taken:
        n += 1
        name = f"{base}_{n}"
    taken.add(name)
    return name
