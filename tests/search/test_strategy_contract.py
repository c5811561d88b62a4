"""The contract of every search strategy, on a small space with a made-up latency (no compile).

Each registered strategy (and Optuna with each of its samplers) is run through the same loop the
tuner runs: propose, score, learn. The latency of an assignment is a fixed function of its knobs,
so the tests assert what was proposed, never a time.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from autotune.config import STRATEGIES as CONFIG_STRATEGIES
from autotune.config import SearchConfig
from autotune.errors import ConfigError
from autotune.search.records import TrialRecord
from autotune.search.space import Knob, SearchSpace
from autotune.search.strategies import (
    STRATEGIES,
    Outcome,
    Proposal,
    SearchStrategy,
    complete,
    evolutionary,
    make_strategy,
)
from autotune.search.strategies.evolutionary import (
    GENERATIONS,
    MIN_PARENTS,
    POPULATION,
    RANDOM_SHARE,
    SCORED_RANDOM,
)

SPACE = SearchSpace(
    "small",
    (
        Knob("tile", (1, 2, 4, 8, 16)),
        Knob("order", ("xy", "yx", "zx")),
        Knob("unroll", (False, True)),
        Knob("jam", (1, 2, 4), requires=(("unroll", (True,)),)),
        Knob("vector", (0, 4, 8, 16)),
    ),
    (),
)
KINDS = [
    ("optuna", "tpe"),
    ("optuna", "nsga2"),
    ("optuna", "random"),
    ("evolutionary", "tpe"),
    ("random", "tpe"),
]


def settings(strategy: str, sampler: str = "tpe", seed: int = 0, mutation: float = 0.0) -> SearchConfig:
    return SearchConfig(
        space=Path("small.yaml"), trials=64, sampler=sampler, cost_model="none", seed=seed,
        mutation=mutation, strategy=strategy,
    )  # fmt: skip


def latency(knobs: dict[str, Any]) -> float:
    """A made-up latency: fastest at tile 4, order yx, unroll with jam 2, vector 8."""
    ms = 1.0 + abs(knobs["tile"] - 4) / 4 + (knobs["order"] != "yx") * 0.5 + abs(knobs["vector"] - 8) / 8
    return ms - (0.3 if knobs["unroll"] and knobs["jam"] == 2 else 0.0)


def record(number: int, rnd: int, proposal: Proposal) -> TrialRecord:
    knobs = proposal.values()
    if knobs["tile"] == 16 and knobs["vector"] == 16:  # a corner that does not fit
        return TrialRecord(number, rnd, proposal.knobs, "infeasible", reason="peak", peak_bytes=1 << 20)
    ms = latency(knobs)
    return TrialRecord(number, rnd, proposal.knobs, "ok", median_ms=ms, min_ms=ms, iqr_ms=0.0,
                       peak_bytes=knobs["tile"] * 1024)  # fmt: skip


def run(strategy: SearchStrategy, rounds: int, batch: int = 8, measure: int = 4) -> list[TrialRecord]:
    """The tuner's loop in miniature: the first ``measure`` proposals of each round are measured
    (the others are ranked out), a repeated assignment is told its earlier record."""
    logged: dict[tuple[Any, ...], TrialRecord] = {}
    out: list[TrialRecord] = []
    for rnd in range(rounds):
        outcomes = []
        for i, p in enumerate(strategy.propose(batch)):
            if p.knobs in logged:
                outcomes.append(Outcome(logged[p.knobs], p))
            elif i < measure:
                r = logged[p.knobs] = record(len(out), rnd, p)
                out.append(r)
                outcomes.append(Outcome(r, p, 0.5 if r.status == "infeasible" else 0.0))
            else:
                outcomes.append(Outcome(None, p))
        strategy.learn(outcomes)
    return out


@pytest.fixture(params=KINDS, ids=[f"{s}-{p}" if s == "optuna" else s for s, p in KINDS])
def kind(request: pytest.FixtureRequest) -> tuple[str, str]:
    return request.param


def test_the_config_names_every_registered_strategy() -> None:
    assert set(STRATEGIES) == set(CONFIG_STRATEGIES)
    assert settings("optuna").strategy == SearchConfig(Path("x"), 1, "tpe", "none", 0).strategy == "optuna"


def test_an_unknown_strategy_names_the_known_ones() -> None:
    with pytest.raises(ConfigError, match=r"search\.strategy: unknown strategy 'annealing'; expected one of"):
        make_strategy(settings("annealing"), SPACE)


def test_proposals_are_full_assignments_of_the_space(kind: tuple[str, str]) -> None:
    strategy = make_strategy(settings(*kind), SPACE)
    for rnd in range(4):
        proposals = strategy.propose(8)
        assert 0 < len(proposals) <= 8
        assert len({p.ticket for p in proposals}) == len(proposals)
        for p in proposals:
            assert [name for name, _ in p.knobs] == [k.name for k in SPACE.knobs]
            assert all(value in knob for (_, value), knob in zip(p.knobs, SPACE.knobs))
            assert p.knobs == complete(SPACE, p.values())  # an inactive knob at its default
            if not p.values()["unroll"]:
                assert p.values()["jam"] == 1
        strategy.learn([Outcome(record(rnd * 8 + i, rnd, p), p) for i, p in enumerate(proposals)])


def test_the_same_seed_proposes_the_same(kind: tuple[str, str]) -> None:
    first = run(make_strategy(settings(*kind, seed=5), SPACE), rounds=5)
    again = run(make_strategy(settings(*kind, seed=5), SPACE), rounds=5)
    other = run(make_strategy(settings(*kind, seed=6), SPACE), rounds=5)
    assert [r.knobs for r in first] == [r.knobs for r in again]
    assert [r.knobs for r in first] != [r.knobs for r in other]


def test_queued_assignments_come_first(kind: tuple[str, str]) -> None:
    strategy = make_strategy(settings(*kind), SPACE)
    strategy.enqueue([{"tile": 4, "order": "yx", "unroll": True, "jam": 2}])
    first = strategy.propose(3)[0]
    assert first.values() == {"tile": 4, "order": "yx", "unroll": True, "jam": 2, "vector": 0}


def test_a_resumed_strategy_learns_the_logged_trials(kind: tuple[str, str]) -> None:
    logged = run(make_strategy(settings(*kind), SPACE), rounds=3)
    resumed = make_strategy(settings(*kind), SPACE)
    resumed.learn([Outcome(r) for r in logged])
    assert resumed.calls == 3  # its draws continue from the next round
    assert resumed.seen == {r.knobs for r in logged}
    if kind[0] == "optuna":
        assert len(resumed.study.trials) == len(logged)  # type: ignore[attr-defined]
    else:  # a strategy that skips what has a trial does not propose a logged assignment again
        assert not {p.knobs for p in resumed.propose(16)} & resumed.seen
    # a record of another space (a knob renamed since) is kept in the log but not learned
    stale = dataclasses.replace(logged[0], knobs=(("tiles", 4),))
    make_strategy(settings(*kind), SPACE).learn([Outcome(stale)])


def test_nsga2_minimises_latency_and_peak_memory() -> None:
    strategy = make_strategy(settings("optuna", "nsga2"), SPACE)
    run(strategy, rounds=2)
    study = strategy.study  # type: ignore[attr-defined]
    assert len(study.directions) == 2
    done = [t for t in study.trials if t.values is not None]
    assert done and all(len(t.values) == 2 for t in done)


def test_optuna_mutation_enqueues_neighbours_of_the_best() -> None:
    strategy = make_strategy(settings("optuna", "random", mutation=1.0), SPACE)
    logged = run(strategy, rounds=1)
    best = min((r for r in logged if r.ok), key=lambda r: r.median_ms or 0)
    proposals = strategy.propose(4)
    diffs = [sum(a != b for a, b in zip(p.knobs, best.knobs)) for p in proposals]
    assert min(diffs) <= 2 + 1  # one or two knobs, and a dependant knob may follow its control


def test_evolutionary_breeds_from_the_fastest_measured() -> None:
    strategy = make_strategy(settings("evolutionary"), SPACE)
    first = strategy.propose(8)
    assert {p.origin for p in first} == {"random"}  # nothing to breed from yet
    run(strategy, rounds=3)
    population = strategy.population  # type: ignore[attr-defined]
    assert MIN_PARENTS <= len(population) <= POPULATION
    proposals = strategy.propose(10)
    mutants = [p for p in proposals if p.origin == "mutant"]
    assert len(proposals) - len(mutants) == round(RANDOM_SHARE * 10)
    for p in mutants:  # one or two decisions from a member (a dependant knob may follow its control)
        assert min(sum(a != b for a, b in zip(p.knobs, parent)) for parent in population) <= 3
        assert p.knobs not in strategy.seen


def test_evolutionary_improves_on_its_first_round_and_on_random_search() -> None:
    best: dict[str, list[float]] = {"evolutionary": [], "random": []}
    for strategy in best:
        for seed in range(20):
            logged = run(make_strategy(settings(strategy, seed=seed), SPACE), rounds=10)
            ok = [r.median_ms for r in logged if r.ok and r.median_ms is not None]
            best[strategy].append(min(ok))
            if strategy == "evolutionary":
                assert min(ok) < min(ok[:4]), seed
    # 40 trials of 240 assignments, seeds 0-19: 1.105 ms on average (3 runs at the optimum, 0.7)
    # against random search's 1.15 (none at the optimum)
    assert sum(best["evolutionary"]) < sum(best["random"])
    assert 0.7 in [round(b, 9) for b in best["evolutionary"]]


def perfect_scorer(assignments: Any) -> np.ndarray:
    """The made-up latency as the model's prediction; the corner that does not fit: infinite."""
    out = []
    for knobs in assignments:
        v = dict(knobs)
        out.append(math.inf if v["tile"] == 16 and v["vector"] == 16 else latency(v))
    return np.array(out)


def test_evolutionary_breeds_generations_on_the_scorer_before_it_proposes() -> None:
    calls: list[int] = []

    def counting(assignments: Any) -> np.ndarray:
        calls.append(len(assignments))
        return perfect_scorer(assignments)

    strategy = make_strategy(settings("evolutionary", seed=2), SPACE)
    strategy.score_with(counting)
    run(strategy, rounds=1)  # random: nothing to breed from, nothing scored
    assert calls == []
    run(strategy, rounds=1)
    proposals = strategy.propose(10)
    bred = 10 - round(RANDOM_SHARE * 10)
    # each round: one call per generation, and one for the random assignments scored beside the first
    assert len(calls) == 2 * (GENERATIONS + 1)
    assert calls[GENERATIONS + 2] == round(SCORED_RANDOM * bred)  # this round's second call
    evolved = [p.values() for p in proposals[:bred]]
    assert {p.origin for p in proposals[:bred]} <= {"mutant", "random"}
    assert not any(v["tile"] == 16 and v["vector"] == 16 for v in evolved)  # infinite: never proposed
    predicted = [latency(v) for v in evolved]
    assert predicted == sorted(predicted)  # the best predicted of all generations, best first
    assert [p.origin for p in proposals[bred:]] == ["random"] * (10 - bred)


def test_evolutionary_with_a_scorer_finds_more_than_without(monkeypatch: pytest.MonkeyPatch) -> None:
    def never(assignments: Any) -> np.ndarray:
        raise AssertionError("one generation: nothing is scored")

    best: dict[str, list[float]] = {"scorer": [], "none": [], "nan": [], "one generation": []}
    for seed in range(20):
        for how in best:
            strategy = make_strategy(settings("evolutionary", seed=seed), SPACE)
            if how == "scorer":
                strategy.score_with(perfect_scorer)
            elif how == "nan":
                strategy.score_with(lambda a: np.full(len(a), np.nan))
            elif how == "one generation":
                strategy.score_with(never)
            with monkeypatch.context() as m:
                if how == "one generation":
                    m.setattr(evolutionary, "GENERATIONS", 1)
                logged = run(strategy, rounds=4)
            best[how].append(min(r.median_ms for r in logged if r.ok and r.median_ms is not None))
    assert best["nan"] == best["one generation"]  # a model with no order: the first generation as it is
    optimum = [round(b, 9) == 0.7 for b in best["scorer"]]
    assert sum(optimum) > sum(round(b, 9) == 0.7 for b in best["none"])
    assert sum(best["scorer"]) < sum(best["none"])
