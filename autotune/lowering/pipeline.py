"""The lowering pipeline: ``PASSES``, an ordered tuple of named passes, and ``lower``.

Each pass is a function ``(func, options) -> func``. ``lower(func, verify=True)``
runs the IR verifier after every pass and names the pass that broke the IR.
The last pass plans memory; its plan is returned with the lowered function.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .. import ir
from ..memory import MemoryPlan, Pool

DEFAULT_POOLS = (Pool("workspace", 1 << 40),)


@dataclass
class LowerOptions:
    """What passes may need besides the function; the planner's result lands in ``plan``."""

    pools: tuple[Pool, ...] = DEFAULT_POOLS
    planner: str = "greedy_by_size"
    seed: int = 0
    plan: MemoryPlan | None = None
    notes: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Pass:
    name: str
    run: Callable[[ir.Func, LowerOptions], ir.Func]


@dataclass(frozen=True)
class Lowered:
    func: ir.Func
    plan: MemoryPlan

    def __str__(self) -> str:
        return str(self.func)


def run_passes(func: ir.Func, passes: tuple[Pass, ...], options: LowerOptions, verify: bool = False) -> ir.Func:
    if verify:
        ir.verify(func, where="scheduling")
    for p in passes:
        func = p.run(func, options)
        if verify:
            ir.verify(func, where=f"pass '{p.name}'")
    return func
