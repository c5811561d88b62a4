"""Property tests: every planner's plans are valid on random allocation sets.

Checked independently of the planner's own code: no two simultaneously live
allocations of one pool share a byte, every allocation lies inside its pool
and one of its candidate pools, offsets are aligned, the peaks are the
high-water marks and never below the live-bytes lower bound. When the
planner reports an overflow, the error's figures are consistent and its
suggestion fits.
"""

from __future__ import annotations

import re
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autotune.errors import PoolOverflowError
from autotune.memory import PLANNERS, Allocation, MemoryPlan, Pool, live_bytes_lower_bound, plan_memory

POOL_NAMES = ("dtcm", "sram", "dram")


@st.composite
def instances(draw: st.DrawFn) -> tuple[list[Allocation], list[Pool]]:
    npools = draw(st.integers(1, 3))
    # Mostly roomy pools, one in five tight, so overflows are exercised too.
    pools = [
        Pool(
            name,
            draw(st.integers(64, 20_000))
            if draw(st.integers(0, 4)) == 0
            else draw(st.integers(40_000, 300_000)),
        )
        for name in POOL_NAMES[:npools]
    ]
    allocations = []
    for i in range(draw(st.integers(0, 30))):
        start = draw(st.integers(0, 30))
        candidates = draw(st.permutations(POOL_NAMES[:npools]))
        allocations.append(
            Allocation(
                name=f"a{i}",
                size=draw(st.integers(1, 8_000)),
                start=start,
                end=start + draw(st.integers(0, 12)),
                candidates=tuple(candidates[: draw(st.integers(0, npools))]),
                alignment=draw(st.sampled_from([1, 4, 64, 256])),
            )
        )
    return allocations, pools


def check_plan(plan: MemoryPlan, allocations: list[Allocation], pools: list[Pool]) -> None:
    sizes = {pool.name: pool.size for pool in pools}
    assert plan.pools == tuple(pools)
    assert [p.name for p in plan.placements] == [a.name for a in allocations]
    for a, p in zip(allocations, plan.placements, strict=True):
        assert (p.size, p.start, p.end) == (a.size, a.start, a.end)
        assert p.pool in (a.candidates or tuple(sizes))
        assert p.offset >= 0 and p.offset + p.size <= sizes[p.pool]
        assert p.offset % a.alignment == 0
    for i, p in enumerate(plan.placements):
        for q in plan.placements[i + 1 :]:
            live_together = p.start <= q.end and q.start <= p.end
            if p.pool == q.pool and live_together:
                assert p.offset + p.size <= q.offset or q.offset + q.size <= p.offset
    for pool in pools:
        tops = [p.offset + p.size for p in plan.placements if p.pool == pool.name]
        assert plan.pool_peaks[pool.name] == max(tops, default=0)
    assert plan.total_peak == sum(plan.pool_peaks.values())
    assert plan.total_peak >= live_bytes_lower_bound(allocations)


def check_overflow(
    err: PoolOverflowError, allocations: list[Allocation], pools: list[Pool], algorithm: str
) -> None:
    by_name = {pool.name: pool for pool in pools}
    assert err.pool in by_name
    assert err.available == by_name[err.pool].size
    assert err.needed > err.available
    assert err.suggested >= err.available
    assert f"does not fit pool {err.pool!r}" in str(err)
    assert f"pool has {err.available:,}" in str(err)
    # The message names every pool that has to grow; grown so, the plan fits.
    wanted = dict(re.findall(r"a '(\w+)' of at least ([\d,]+) bytes", str(err)))
    assert int(wanted[err.pool].replace(",", "")) == err.suggested
    if len(wanted) == 1:
        assert err.suggested > err.available
    grown = [replace(p, size=int(wanted[p.name].replace(",", ""))) if p.name in wanted else p for p in pools]
    check_plan(plan_memory(allocations, grown, algorithm), allocations, grown)


@pytest.mark.parametrize("algorithm", sorted(PLANNERS))
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(instance=instances())
def test_plans_are_valid(algorithm: str, instance: tuple[list[Allocation], list[Pool]]) -> None:
    allocations, pools = instance
    try:
        plan = plan_memory(allocations, pools, algorithm, seed=0)
    except PoolOverflowError as err:
        check_overflow(err, allocations, pools, algorithm)
    else:
        check_plan(plan, allocations, pools)
