"""The planned peak of every built-in workload's default schedule, lowered end to end.

The bounds are exact figures of the lowered function's ``Allocate`` nodes: the
peak is at most their sum (nothing shared) and at least the largest one.
"""

from __future__ import annotations

from math import prod

import pytest

from autotune import ir, workloads
from autotune.lowering import lower
from autotune.memory import live_bytes_lower_bound
from autotune.memory.lowering import allocations_of, in_registers

SMALL = {
    "pool_chain": {"height": 12, "width": 12, "channels": 4},
    "bottleneck": {"height": 8, "width": 8, "cin": 4, "expand": 8},
    "resize_conv": {"channels": 4, "height": 16, "width": 16},
    "matmul": {"m": 16, "n": 16, "k": 16},
    "tiny_cnn": {"height": 16, "width": 16},
}


def allocate_bytes(func: ir.Func) -> list[int]:
    """Bytes of each ``Allocate`` of ``func`` (constant extents)."""
    sizes = []
    for node in ir.collect(func.body, ir.Allocate):
        if in_registers(node):
            continue  # scalar variables, in no pool
        extents = [ir.as_int(e) for e in node.extents]
        assert all(e is not None for e in extents), f"symbolic extent in {node.data.name}"
        sizes.append(prod(e for e in extents if e is not None) * ir.dtype_bytes(node.dtype))
    return sizes


@pytest.mark.parametrize("name", sorted(SMALL))
def test_default_schedule_peak_is_between_largest_and_sum(name: str) -> None:
    w = workloads.get(name, **SMALL[name])
    lowered = lower(w.func)
    sizes = allocate_bytes(lowered.func)
    plan = lowered.plan
    plan.verify()
    assert max(sizes, default=0) <= plan.total_peak <= sum(sizes)
    assert plan.total_peak >= live_bytes_lower_bound(allocations_of(lowered.func))
    assert sum(p.size for p in plan.placements) == sum(sizes)
    for node in ir.collect(lowered.func.body, ir.Allocate):
        if in_registers(node):  # a promoted accumulator: scalar variables, never placed
            assert ir.ann_get(node.annotations, "pool") is None, node.data.name
            assert ir.ann_get(node.annotations, "offset") is None, node.data.name
            assert all(p.name != node.data.name.removesuffix("_data") for p in plan.placements)
            continue
        assert ir.ann_get(node.annotations, "pool") is not None, node.data.name
        assert ir.ann_get(node.annotations, "offset") is not None, node.data.name
