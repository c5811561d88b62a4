"""What an infeasible trial teaches: the evolutionary strategy does not propose again an assignment
whose memory knobs (every knob but the loop-only ones) equal those of an ``infeasible`` trial
(:class:`autotune.search.feasibility.MemoryVerdicts`), and the loop-only knobs never change a peak."""

from __future__ import annotations

import fnmatch
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from autotune import te, workloads
from autotune.config import SearchConfig
from autotune.errors import ScheduleError
from autotune.memory import Pool
from autotune.search import candidates
from autotune.search.feasibility import LOOP_KNOBS, MemoryVerdicts, memory_knobs
from autotune.search.records import TrialRecord
from autotune.search.space import Knob, SearchSpace, load_space
from autotune.search.strategies import Outcome, SearchStrategy, complete, make_strategy
from autotune.workloads import Workload, intermediate_bytes, ops

REPO = Path(__file__).resolve().parents[2]
SPACE = SearchSpace(
    "memory",
    (
        Knob("tile_rows", (1, 2, 4, 8, 16), kind="tile"),
        Knob("at_a", ("tile", "root"), kind="location"),
        Knob("unroll_a", (False, True), kind="unroll"),
        Knob("jam_a", (1, 2, 4), (("unroll_a", (True,)),), kind="unroll"),
        Knob("vectorize", (False, True), kind="vectorize"),
    ),
    (),
)


def over(knobs: dict[str, Any]) -> bool:
    """The made-up memory: ``a`` whole at root, or 8 rows or more per tile, is over the limit."""
    return knobs["at_a"] == "root" or knobs["tile_rows"] >= 8


def latency(knobs: dict[str, Any]) -> float:
    return 1.0 + abs(knobs["tile_rows"] - 4) / 4 + (not knobs["vectorize"]) * 0.5 - knobs["jam_a"] * 0.1


def run(strategy: SearchStrategy, rounds: int = 10, batch: int = 8, measure: int = 2) -> list[TrialRecord]:
    """The tuner's loop in miniature: every infeasible proposal is logged, the first ``measure``
    feasible ones of a round are measured, the others are ranked out."""
    log: list[TrialRecord] = []
    for rnd in range(rounds):
        outcomes, measured = [], 0
        for p in strategy.propose(batch):
            knobs = p.values()
            if over(knobs):
                record = TrialRecord(len(log), rnd, p.knobs, "infeasible", reason="peak", peak_bytes=1 << 20)
            elif measured < measure:
                measured += 1
                ms = latency(knobs)
                record = TrialRecord(len(log), rnd, p.knobs, "ok", median_ms=ms, min_ms=ms, iqr_ms=0.0, peak_bytes=1024)
            else:
                outcomes.append(Outcome(None, p))
                continue
            log.append(record)
            outcomes.append(Outcome(record, p, 0.5 if record.status == "infeasible" else 0.0))
        strategy.learn(outcomes)
    return log


def settings(strategy: str) -> SearchConfig:
    return SearchConfig(Path("memory.yaml"), 64, "tpe", "none", 0, strategy=strategy)


def test_verdicts_are_keyed_by_the_knobs_that_may_change_an_allocation() -> None:
    verdicts = MemoryVerdicts(SPACE)
    assert verdicts.names == ("tile_rows", "at_a")
    tiled = complete(SPACE, {"tile_rows": 8, "at_a": "tile"})
    unrolled = complete(SPACE, {"tile_rows": 8, "at_a": "tile", "unroll_a": True, "jam_a": 4, "vectorize": True})
    assert verdicts.key(unrolled) == (("tile_rows", 8), ("at_a", "tile"))
    assert not verdicts.over(unrolled) and not verdicts.fits(unrolled)
    verdicts.learn(tiled, "infeasible")
    assert verdicts.over(unrolled) and not verdicts.fits(unrolled)
    smaller = complete(SPACE, {"tile_rows": 4, "at_a": "tile"})
    verdicts.learn(smaller, "invalid")  # never lowered: says nothing about its memory
    assert not verdicts.over(smaller) and not verdicts.fits(smaller)
    for status in ("ok", "cutoff", "wrong", "timeout", "crashed", "error"):
        verdicts.learn(complete(SPACE, {"tile_rows": 2, "at_a": "tile"}), status)
    assert verdicts.fits(complete(SPACE, {"tile_rows": 2, "at_a": "tile", "vectorize": True}))
    # the values only infeasible trials have had: 8 rows once; a tile at all has fitted
    assert verdicts.never_fits(unrolled, after=1) == [("tile_rows", 8)]
    assert verdicts.never_fits(unrolled, after=2) == []
    verdicts.learn(complete(SPACE, {"tile_rows": 8, "at_a": "root"}), "infeasible")
    assert verdicts.never_fits(complete(SPACE, {"tile_rows": 8, "at_a": "root"})) == [("tile_rows", 8)]
    assert verdicts.never_fits(complete(SPACE, {"tile_rows": 16, "at_a": "root"}), after=1) == [("at_a", "root")]
    # a knob named by no loop pattern may change an allocation: it is part of the key
    other = SearchSpace("other", (Knob("vector", (0, 8)), Knob("unroll", (False, True))), ())
    assert MemoryVerdicts(other).names == ("vector", "unroll")


def test_the_evolutionary_strategy_does_not_propose_a_setting_found_over_the_memory() -> None:
    strategy = make_strategy(settings("evolutionary"), SPACE)
    log = run(strategy)
    verdicts = MemoryVerdicts(SPACE)
    # a setting over the memory is proposed in one round only: the round that found it out
    rounds = {verdicts.key(r.knobs): r.round for r in reversed(log) if r.status == "infeasible"}
    late = [r for r in log if r.status == "infeasible" and r.round > rounds[verdicts.key(r.knobs)]]
    assert rounds and not late
    assert strategy.refused > 0  # type: ignore[attr-defined]
    assert sum(r.ok for r in log) == 20
    # random search, the control, learns nothing of the kind and meets the same settings again
    control = run(make_strategy(settings("random"), SPACE))
    first = {verdicts.key(r.knobs): r.round for r in reversed(control) if r.status == "infeasible"}
    assert any(r.round > first[verdicts.key(r.knobs)] for r in control if r.status == "infeasible")


def test_a_resumed_strategy_learns_the_settings_over_the_memory() -> None:
    log = run(make_strategy(settings("evolutionary"), SPACE), rounds=3)
    resumed = make_strategy(settings("evolutionary"), SPACE)
    resumed.learn([Outcome(r) for r in log])
    known = {r.knobs for r in log if r.status == "infeasible"}
    assert known and all(resumed.memory.over(k) for k in known)  # type: ignore[attr-defined]
    proposed = resumed.propose(16)
    assert proposed and not any(resumed.memory.over(p.knobs) for p in proposed)  # type: ignore[attr-defined]


def test_a_value_only_infeasible_trials_have_had_is_bred_when_the_scorer_lowers_the_children() -> None:
    """Two trials with 4 rows per tile were over the memory, both because ``a`` was whole at root:
    without a scorer the strategy takes every child with 4 rows to be over too (the value-by-value
    guess), with one (which lowers each child, here ``over``) it breeds them, and the scorer, not
    the guess, keeps the children over the memory out."""

    def record(n: int, status: str, **values: Any) -> TrialRecord:
        knobs = complete(SPACE, values)
        if status == "infeasible":
            return TrialRecord(n, 0, knobs, status, reason="peak", peak_bytes=1 << 20)
        ms = latency(dict(knobs))
        return TrialRecord(n, 0, knobs, "ok", median_ms=ms, min_ms=ms, iqr_ms=0.0, peak_bytes=1024)

    log = [
        record(0, "ok", tile_rows=2, at_a="tile"),
        record(1, "ok", tile_rows=1, at_a="tile", vectorize=True),
        record(2, "infeasible", tile_rows=4, at_a="root"),
        record(3, "infeasible", tile_rows=4, at_a="root", vectorize=True),
    ]

    def scorer(assignments: Any) -> np.ndarray:
        return np.array([np.inf if over(dict(k)) else latency(dict(k)) for k in assignments])

    bred: dict[bool, list[dict[str, Any]]] = {}
    for scored in (False, True):
        strategy = make_strategy(settings("evolutionary"), SPACE)
        strategy.learn([Outcome(r) for r in log])
        assert strategy.memory.never_fits(complete(SPACE, {"tile_rows": 4, "at_a": "tile"}))  # type: ignore[attr-defined]
        strategy.score_with(scorer if scored else None)
        bred[scored] = [p.values() for p in strategy.propose(16) if p.origin == "mutant"]
    assert bred[False] and not any(k["tile_rows"] == 4 for k in bred[False])
    assert any(k["tile_rows"] == 4 and k["at_a"] == "tile" for k in bred[True])
    assert not any(over(k) for k in bred[True])


def two_dense_layers() -> Workload:
    """x[8, 16] -> dense to 32 + bias (a stage of its own) -> dense to 16 with relu on its input."""
    x = te.placeholder((8, 16), "float32", name="x")
    w1 = te.placeholder((32, 16), "float32", name="w1")
    b1 = te.placeholder((32,), "float32", name="b1")
    w2 = te.placeholder((16, 32), "float32", name="w2")
    hidden = ops.dense(x, w1, b1, name="fc1")
    out = ops.dense(hidden, w2, name="fc2", data_act=ops.relu_expr)
    func = te.create_func([x, w1, b1, w2], [out], name="two_dense")
    return Workload("two_dense", {}, func, lambda *a: (), "", 0, intermediate_bytes(func), (1.0,) * 4)


WORKLOADS = {
    "pool_chain": lambda: workloads.get("pool_chain", height=12, width=12, channels=4),
    "bottleneck": lambda: workloads.get("bottleneck", height=8, width=8, cin=4, expand=8),
    "tiny_cnn": lambda: workloads.get("tiny_cnn", height=16, width=16),
    "two_dense": two_dense_layers,
}
POOLS = (Pool("dtcm", 4096), Pool("sram", 1 << 22))


def peaks(space: SearchSpace, wl: Workload, values: dict[str, Any]) -> tuple[int, tuple[tuple[str, int], ...]] | None:
    try:
        func = space.apply(wl.func, values).func
    except ScheduleError:
        return None
    low = candidates.lower_candidate(func, POOLS, "greedy_by_size", 0, None)
    return low.peak, low.pool_bytes


@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_the_loop_knobs_never_change_a_peak(name: str) -> None:
    """On random schedules, every other value of every active loop-only knob gives the same peaks
    (schedules are drawn until two were checked and some loop-only knob was active in one)."""
    wl = WORKLOADS[name]()
    space = load_space(REPO / "search_spaces" / "cascade.yaml", wl, POOLS)
    memory = {k.name for k in memory_knobs(space)}
    loop = [k for k in space.knobs if k.name not in memory]
    assert loop and all(any(fnmatch.fnmatchcase(k.name, p) for p in LOOP_KNOBS) for k in loop)
    rng = np.random.default_rng(11)
    checked = compared = 0
    while checked < 2 or compared == 0:
        assert checked < 50, "no random schedule had an active loop-only knob"
        values = candidates.random_assignment(space, rng)
        base = peaks(space, wl, values)
        if base is None:
            continue
        checked += 1
        active = space.active_values(values)
        for knob in (k for k in loop if k.name in active):
            for choice in knob.choices:
                changed = peaks(space, wl, dict(complete(space, {**values, knob.name: choice})))
                assert changed in (None, base), (knob.name, choice, values)
                compared += changed is not None


def test_inlining_register_tiles_and_packing_change_the_peak_of_two_dense_layers() -> None:
    """The knobs of a dense chain that are neither tiles nor locations still size buffers: each is
    a memory knob (check_fits tries its values, and a verdict keys on it)."""
    wl = two_dense_layers()
    space = load_space(REPO / "search_spaces" / "cascade.yaml", wl, POOLS)
    tiled = {"tile_rows": 4, "at_fc1": "tile", "regtile_fc1": 1, "chblock_fc1": 16}
    whole = {"tile_rows": 4, "at_fc1": "root", "at_fc1_bias": "root"}
    moves = [  # (the schedule, a knob moved, its peak before and after)
        (whole, "inline_fc1_bias", True, 2048, 1024),
        (tiled, "regtile_fc1", 0, 1536, 1024),
        (tiled, "dot_fc1", 1, 1536, 1024),
        (tiled, "chblock_fc1", 32, 1536, 3072),
        (tiled, "pack_fc1", "root", 1536, 3072),
    ]
    memory = {k.name for k in memory_knobs(space)}
    for values, name, value, before, after in moves:
        assert name in memory
        assert peaks(space, wl, dict(complete(space, values))) == (before, (("dtcm", before), ("sram", 0)))
        moved = dict(complete(space, {**values, name: value}))
        assert peaks(space, wl, moved) == (after, (("dtcm", after), ("sram", 0))), name
