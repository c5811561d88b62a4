"""The planners: a contract suite over every registered planner, exact small
cases, candidate pools, overflow errors and hill climbing."""

from __future__ import annotations

import random

import pytest

import autotune.memory.planner as planner_module
from autotune.errors import ConfigError, PoolOverflowError
from autotune.memory import (
    PLANNERS,
    Allocation,
    MemoryPlan,
    Planner,
    Pool,
    get_planner,
    live_bytes_lower_bound,
    parse_pools,
    plan_memory,
    register_planner,
)

ALGORITHMS = sorted(PLANNERS)

# Hand-computed with greedy_by_size (order A, C, B, D; C before B: same size, longer life):
# A -> 0; C (live with A) -> 1000 aligned to 1024; B (live with A only) -> 1024;
# D (live with A and C, alignment 256) skips [0, 1000) and [1024, 1624) -> 1792.
EXAMPLE = (
    Allocation("A", 1000, 0, 3),
    Allocation("B", 600, 1, 2),
    Allocation("C", 600, 3, 5),
    Allocation("D", 300, 3, 6, alignment=256),
)


def random_instance(rng: random.Random, n: int = 30) -> list[Allocation]:
    allocations = []
    for i in range(n):
        start = rng.randrange(40)
        allocations.append(
            Allocation(
                f"t{i}",
                rng.randrange(64, 20_000),
                start,
                start + rng.randrange(10),
                alignment=rng.choice([1, 16, 64]),
            )
        )
    return allocations


def test_registry_holds_the_three_planners() -> None:
    assert ALGORITHMS == ["greedy_by_conflicts", "greedy_by_size", "hill_climb"]
    for name in ALGORITHMS:
        assert isinstance(get_planner(name), Planner)
        assert get_planner(name).name == name


def test_unknown_planner_lists_known_names() -> None:
    with pytest.raises(ConfigError) as info:
        get_planner("best_fit")
    assert str(info.value) == (
        "planner: unknown algorithm 'best_fit'; expected one of "
        "'greedy_by_conflicts', 'greedy_by_size', 'hill_climb'"
    )


def test_register_planner() -> None:
    @register_planner
    class Everything(Planner):
        name = "test_everything_at_zero"

        def plan(self, allocations, pools, seed=0):  # type: ignore[no-untyped-def]
            return MemoryPlan((), tuple(pools), self.name)

    try:
        assert PLANNERS["test_everything_at_zero"] is Everything
        assert plan_memory([], [Pool("dtcm", 8)], "test_everything_at_zero").algorithm == (
            "test_everything_at_zero"
        )
        with pytest.raises(ValueError, match="already registered"):
            register_planner(type("Other", (Everything,), {}))
    finally:
        planner_module._REGISTRY.pop("test_everything_at_zero")


# --- contract: every planner ---------------------------------------------------------


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_contract_plans_and_names_itself(algorithm: str) -> None:
    plan = plan_memory(EXAMPLE, [Pool("dtcm", 4096)], algorithm)
    plan.verify()
    assert plan.algorithm == algorithm
    assert [p.name for p in plan.placements] == ["A", "B", "C", "D"]
    assert plan.total_peak >= live_bytes_lower_bound(EXAMPLE)


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_contract_no_allocations(algorithm: str) -> None:
    plan = plan_memory([], parse_pools("dtcm=1KiB,sram=2KiB"), algorithm)
    assert plan.placements == ()
    assert plan.pool_peaks == {"dtcm": 0, "sram": 0}


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_contract_unknown_candidate_pool(algorithm: str) -> None:
    with pytest.raises(ConfigError) as info:
        plan_memory([Allocation("A", 8, 0, 0, ("l2",))], parse_pools("dtcm=1KiB,sram=2KiB"), algorithm)
    assert str(info.value) == ("allocation 'A': candidate pool 'l2' is not one of the pools 'dtcm', 'sram'")


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_contract_bad_pools(algorithm: str) -> None:
    with pytest.raises(ConfigError, match="at least one pool"):
        plan_memory(EXAMPLE, [], algorithm)
    with pytest.raises(ConfigError, match="duplicate pool name 'dtcm'"):
        plan_memory(EXAMPLE, [Pool("dtcm", 8), Pool("dtcm", 16)], algorithm)
    with pytest.raises(ValueError, match="unique"):
        plan_memory([EXAMPLE[0], EXAMPLE[0]], [Pool("dtcm", 4096)], algorithm)


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_contract_candidates_are_respected(algorithm: str) -> None:
    pools = parse_pools("dtcm=1KiB,sram=64KiB")
    allocations = [
        Allocation("only_sram", 512, 0, 4, ("sram",)),
        Allocation("too_big_for_dtcm", 2048, 0, 4, ("dtcm", "sram")),
        Allocation("anywhere", 256, 0, 4),
        Allocation("prefers_sram", 64, 0, 4, ("sram", "dtcm")),
    ]
    plan = plan_memory(allocations, pools, algorithm)
    plan.verify()
    assert plan.placement("only_sram").pool == "sram"
    assert plan.placement("too_big_for_dtcm").pool == "sram"
    assert plan.placement("anywhere").pool == "dtcm"
    assert plan.placement("prefers_sram").pool == "sram"


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_contract_spills_to_second_candidate_when_first_is_full(algorithm: str) -> None:
    pools = parse_pools("dtcm=1KiB,sram=64KiB")
    allocations = [Allocation(f"x{i}", 512, 0, 1, ("dtcm", "sram")) for i in range(3)]
    plan = plan_memory(allocations, pools, algorithm)
    assert sorted(p.pool for p in plan.placements) == ["dtcm", "dtcm", "sram"]


# --- exact cases ---------------------------------------------------------------------


def test_greedy_by_size_exact_offsets() -> None:
    plan = plan_memory(EXAMPLE, [Pool("dtcm", 4096)], "greedy_by_size")
    assert {p.name: p.offset for p in plan.placements} == {"A": 0, "B": 1024, "C": 1024, "D": 1792}
    assert plan.pool_peaks == {"dtcm": 1792 + 300}


def test_greedy_by_conflicts_order() -> None:
    # X is small but live with everyone, so it goes first, at offset 0.
    allocations = [
        Allocation("X", 64, 0, 9),
        Allocation("big1", 1024, 0, 1),
        Allocation("big2", 1024, 5, 6),
    ]
    plan = plan_memory(allocations, [Pool("dtcm", 4096)], "greedy_by_conflicts")
    assert {p.name: p.offset for p in plan.placements} == {"X": 0, "big1": 64, "big2": 64}
    by_size = plan_memory(allocations, [Pool("dtcm", 4096)], "greedy_by_size")
    assert {p.name: p.offset for p in by_size.placements} == {"X": 1024, "big1": 0, "big2": 0}


# --- overflow ------------------------------------------------------------------------

OVERFLOWING = (Allocation("A", 40_960, 0, 2), Allocation("B", 99_840, 1, 3))


def test_overflow_message_and_fields() -> None:
    with pytest.raises(PoolOverflowError) as info:
        plan_memory(OVERFLOWING, parse_pools("dtcm=64KiB"), "greedy_by_size")
    err = info.value
    assert str(err) == (
        "allocation 'B' (99,840 bytes) does not fit pool 'dtcm': needs 140,800 bytes at peak, "
        "pool has 65,536; a 'dtcm' of at least 140,800 bytes would fit"
    )
    assert (err.pool, err.needed, err.available, err.suggested) == ("dtcm", 140_800, 65_536, 140_800)


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_overflow_suggestion_is_the_smallest_size_that_fits(algorithm: str) -> None:
    rng = random.Random(7)
    allocations = random_instance(rng, 20)
    with pytest.raises(PoolOverflowError) as info:
        plan_memory(allocations, [Pool("dtcm", 1024)], algorithm)
    suggested = info.value.suggested
    plan = plan_memory(allocations, [Pool("dtcm", suggested)], algorithm)
    plan.verify()
    if algorithm != "hill_climb":  # a single candidate pool: one byte less must fail
        assert plan.total_peak == suggested
        with pytest.raises(PoolOverflowError):
            plan_memory(allocations, [Pool("dtcm", suggested - 1)], algorithm)


def test_overflow_in_the_last_candidate() -> None:
    pools = parse_pools("dtcm=1KiB,sram=4KiB")
    allocations = [Allocation(f"x{i}", 1024, 0, 0, ("dtcm", "sram")) for i in range(6)]
    with pytest.raises(PoolOverflowError) as info:
        plan_memory(allocations, pools, "greedy_by_size")
    err = info.value
    assert (err.pool, err.available, err.suggested) == ("sram", 4096, 5 * 1024)
    sram = 5 * 1024
    plan_memory(allocations, parse_pools(f"dtcm=1KiB,sram={sram}"), "greedy_by_size").verify()


# --- hill climbing -------------------------------------------------------------------


def test_hill_climb_never_worse_than_greedy() -> None:
    rng = random.Random(2024)
    improved = 0
    for _ in range(50):
        allocations = random_instance(rng)
        pools = [Pool("ram", 10**7)]
        climbed = plan_memory(allocations, pools, "hill_climb", seed=1)
        by_size = plan_memory(allocations, pools, "greedy_by_size")
        by_conflicts = plan_memory(allocations, pools, "greedy_by_conflicts")
        best_greedy = min(by_size.total_peak, by_conflicts.total_peak)
        assert climbed.total_peak <= best_greedy
        assert climbed.total_peak >= live_bytes_lower_bound(allocations)
        improved += climbed.total_peak < best_greedy
    assert improved > 0  # the climb does something


def test_hill_climb_is_deterministic() -> None:
    allocations = random_instance(random.Random(3))
    pools = parse_pools("dtcm=64KiB,sram=2MiB")
    first = plan_memory(allocations, pools, "hill_climb", seed=11)
    second = plan_memory(allocations, pools, "hill_climb", seed=11)
    assert first == second
    assert first.to_dict() == second.to_dict()


def test_hill_climb_without_iterations_is_the_better_greedy() -> None:
    allocations = random_instance(random.Random(5))
    pools = [Pool("ram", 10**7)]
    plan = planner_module.HillClimb(iterations=0).plan(allocations, pools)
    greedy = min(
        (plan_memory(allocations, pools, name) for name in ("greedy_by_size", "greedy_by_conflicts")),
        key=lambda p: p.total_peak,
    )
    assert plan.total_peak == greedy.total_peak


def test_hill_climb_rejects_negative_iterations() -> None:
    with pytest.raises(ConfigError, match=r"hill_climb\.iterations"):
        planner_module.HillClimb(iterations=-1)


def test_live_bytes_lower_bound() -> None:
    assert live_bytes_lower_bound([]) == 0
    # A [0,3] + B [1,2] live at 1..2; A + C + D live at 3.
    assert live_bytes_lower_bound(EXAMPLE) == max(1000 + 600, 1000 + 600 + 300)
    # Inclusive ends: [0, 1] and [2, 3] never meet.
    assert live_bytes_lower_bound([Allocation("a", 5, 0, 1), Allocation("b", 7, 2, 3)]) == 7
