"""The hill-climb planner's overflow error quotes the size it needs itself, not greedy_by_size's."""

from __future__ import annotations

import pytest

from autotune.errors import PoolOverflowError
from autotune.memory import Pool
from autotune.memory.plan import Allocation
from autotune.memory.planner import plan_memory

# largest first needs 832 bytes here; most conflicts first needs 704
ALLOCATIONS = (
    Allocation("a0", 64, 2, 5),
    Allocation("a1", 320, 0, 2),
    Allocation("a2", 256, 1, 4),
    Allocation("a3", 192, 4, 5),
    Allocation("a4", 192, 4, 7),
)


def suggestion(algorithm: str) -> PoolOverflowError:
    with pytest.raises(PoolOverflowError) as info:
        plan_memory(ALLOCATIONS, [Pool("dtcm", 64)], algorithm)
    return info.value


def test_hill_climb_suggests_the_size_of_its_best_start_order():
    assert suggestion("greedy_by_size").suggested == 832
    assert suggestion("greedy_by_conflicts").suggested == 704
    err = suggestion("hill_climb")
    # it quoted greedy_by_size's 832 before
    assert str(err) == (
        "allocation 'a2' (256 bytes) does not fit pool 'dtcm': needs 704 bytes at peak, pool has 64; "
        "a 'dtcm' of at least 704 bytes would fit"
    )
    assert plan_memory(ALLOCATIONS, [Pool("dtcm", 704)], "hill_climb").total_peak <= 704
    with pytest.raises(PoolOverflowError):
        plan_memory(ALLOCATIONS, [Pool("dtcm", 704)], "greedy_by_size")
