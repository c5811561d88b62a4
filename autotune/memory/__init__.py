"""Static memory planning: pools, allocations, planners and the plan's picture.

Phase 1 works on abstract :class:`Allocation` records (size, lifetime,
candidate pools, alignment); lowering builds them from the IR's ``Allocate``
nodes and applies the :class:`MemoryPlan` it gets back.

>>> pools = parse_pools("dtcm=64KiB,sram=2MiB")
>>> plan = plan_memory([Allocation("A", 40_000, 0, 2, ("dtcm", "sram"))], pools)
>>> plan.placement("A").pool
'dtcm'
"""

from __future__ import annotations

from autotune.memory.draw import draw
from autotune.memory.plan import Allocation, MemoryPlan, Placement
from autotune.memory.planner import (
    PLANNERS,
    GreedyByConflicts,
    GreedyBySize,
    HillClimb,
    Planner,
    get_planner,
    live_bytes_lower_bound,
    plan_memory,
    register_planner,
)
from autotune.memory.pools import Pool, format_size, parse_pools, parse_size

__all__ = [
    "PLANNERS",
    "Allocation",
    "GreedyByConflicts",
    "GreedyBySize",
    "HillClimb",
    "MemoryPlan",
    "Placement",
    "Planner",
    "Pool",
    "draw",
    "format_size",
    "get_planner",
    "live_bytes_lower_bound",
    "parse_pools",
    "parse_size",
    "plan_memory",
    "register_planner",
]
