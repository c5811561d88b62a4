"""Allocation and Placement validation, MemoryPlan figures, serialisation and text."""

from __future__ import annotations

import json

import pytest

from autotune.errors import LoweringError
from autotune.memory import Allocation, MemoryPlan, Placement, Pool

POOLS = (Pool("dtcm", 4096), Pool("sram", 65536))


def small_plan() -> MemoryPlan:
    return MemoryPlan(
        placements=(
            Placement("A", "dtcm", 0, 1000, 0, 3),
            Placement("B", "dtcm", 1024, 600, 1, 2),
            Placement("C", "sram", 0, 2048, 2, 5),
        ),
        pools=POOLS,
        algorithm="greedy_by_size",
    )


def test_figures() -> None:
    plan = small_plan()
    assert plan.pool_peaks == {"dtcm": 1624, "sram": 2048}
    assert list(plan.pool_peaks) == ["dtcm", "sram"]
    assert plan.total_peak == 1624 + 2048
    assert plan.placement("B") == Placement("B", "dtcm", 1024, 600, 1, 2)
    with pytest.raises(KeyError, match="no allocation 'Z'"):
        plan.placement("Z")


def test_empty_pool_peak_is_zero() -> None:
    plan = MemoryPlan((), POOLS, "greedy_by_size")
    assert plan.pool_peaks == {"dtcm": 0, "sram": 0}
    assert plan.total_peak == 0


def test_dict_round_trip_through_json() -> None:
    plan = small_plan()
    data = json.loads(json.dumps(plan.to_dict()))
    assert data["total_peak"] == plan.total_peak
    assert data["pool_peaks"] == plan.pool_peaks
    assert MemoryPlan.from_dict(data) == plan


def test_from_dict_rejects_malformed() -> None:
    data = small_plan().to_dict()
    del data["placements"][0]["offset"]
    with pytest.raises(ValueError, match="malformed"):
        MemoryPlan.from_dict(data)


def test_summary_text() -> None:
    assert small_plan().summary() == "\n".join(
        [
            "memory plan (greedy_by_size): total peak 3,672 B (3.6 KiB)",
            "pool 'dtcm': size 4,096 B (4.0 KiB), peak 1,624 B (1.6 KiB), 39.6% used, 2 allocations",
            "        offset          size  lifetime      name",
            "             0         1,000  [0, 3]        A",
            "         1,024           600  [1, 2]        B",
            "pool 'sram': size 65,536 B (64.0 KiB), peak 2,048 B (2.0 KiB), 3.1% used, 1 allocation",
            "        offset          size  lifetime      name",
            "             0         2,048  [2, 5]        C",
        ]
    )


def test_summary_of_empty_pool() -> None:
    text = MemoryPlan((), (Pool("dtcm", 512),), "hill_climb").summary()
    assert text == (
        "memory plan (hill_climb): total peak 0 B\n"
        "pool 'dtcm': size 512 B, peak 0 B, 0.0% used, 0 allocations"
    )


def test_verify_accepts_a_valid_plan() -> None:
    small_plan().verify()


def test_verify_rejects_overlap_of_live_allocations() -> None:
    plan = MemoryPlan(
        (Placement("A", "dtcm", 0, 1000, 0, 3), Placement("B", "dtcm", 512, 600, 3, 4)),
        POOLS,
        "manual",
    )
    with pytest.raises(LoweringError, match="'A' and 'B' are live together"):
        plan.verify()


def test_verify_allows_overlap_of_dead_allocations() -> None:
    MemoryPlan(
        (Placement("A", "dtcm", 0, 1000, 0, 3), Placement("B", "dtcm", 512, 600, 4, 4)),
        POOLS,
        "manual",
    ).verify()


def test_verify_rejects_placement_past_pool() -> None:
    plan = MemoryPlan((Placement("A", "dtcm", 4000, 100, 0, 0),), POOLS, "manual")
    with pytest.raises(LoweringError, match="ends at byte 4,100, past pool 'dtcm'"):
        plan.verify()


@pytest.mark.parametrize(
    ("placements", "pools", "match"),
    [
        ((Placement("A", "l2", 0, 8, 0, 0),), POOLS, "unknown pool 'l2'"),
        ((Placement("A", "dtcm", 0, 8, 0, 0),) * 2, POOLS, "names repeat"),
        ((), (), "at least one pool"),
        ((), (Pool("dtcm", 1), Pool("dtcm", 2)), "pool names repeat"),
    ],
)
def test_plan_validation(placements: tuple[Placement, ...], pools: tuple[Pool, ...], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        MemoryPlan(placements, pools, "manual")


def test_allocation_defaults_and_candidates_become_a_tuple() -> None:
    a = Allocation("A", 100, 2, 4, ["sram", "dtcm"])  # type: ignore[arg-type]
    assert a.candidates == ("sram", "dtcm")
    assert a.alignment == 64
    assert a.overlaps(Allocation("B", 1, 4, 9))
    assert not a.overlaps(Allocation("B", 1, 5, 9))


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (("A", 0, 0, 1), "size must be >= 1"),
        (("A", 1.5, 0, 1), "size must be an int"),
        (("A", 8, 3, 2), "end must be >= 3"),
        (("A", 8, 0, 1, (), 0), "alignment must be >= 1"),
        (("A", 8, 0, 1, "sram"), "candidates must be a tuple of pool names"),
        (("A", 8, 0, 1, ("sram", "sram")), "candidates repeat a pool"),
        (("", 8, 0, 1), "non-empty str"),
    ],
)
def test_allocation_validation(args: tuple[object, ...], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        Allocation(*args)  # type: ignore[arg-type]


def test_placement_validation() -> None:
    with pytest.raises(ValueError, match="offset must be >= 0"):
        Placement("A", "dtcm", -64, 8, 0, 0)
