"""IR inspection shared by the tests of more than one layer.

``tests/`` is on ``sys.path`` (pytest puts the directory of the top
``conftest.py`` there), so any test module can ``from ir_helpers import ...``.
"""

from __future__ import annotations

from autotune import ir
from autotune.memory.lowering import in_registers


def allocations(func: ir.Func) -> dict[str, tuple[int, ...]]:
    """Physical extents of every allocation of a lowered function, by buffer name."""
    return {
        a.data.name.removesuffix("_data"): tuple(ir.as_int(e) for e in a.extents)
        for a in ir.collect(func.body, ir.Allocate)
        if not in_registers(a)
    }
