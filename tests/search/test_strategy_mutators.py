"""Mutators: one per kind of decision; a tile moves mostly to a neighbouring factor, the others to
another choice; a knob whose choices switch other knobs on changes form with its probability; a
mutation changes the asked number of decisions and leaves a full assignment."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from autotune.schedule.primitives.sample import KINDS
from autotune.search.candidates import complete
from autotune.search.mutators import FORM_CHANGE, MUTATORS, NEIGHBOUR, forms, mutate
from autotune.search.space import Knob, SearchSpace, load_space
from autotune.workloads import get as get_workload

SPACE = SearchSpace(
    "small",
    (
        Knob("tile", (1, 2, 4, 8, 16, 32), kind="tile"),
        Knob("regtile", ("none", 4, 8), kind="tile"),
        Knob("at", ("tile", "root"), kind="location"),
        Knob("mode", ("rolling", "recompute"), (("at", ("tile",)),), kind="window"),
        Knob("pool", ("dtcm", "sram", "dram"), kind="pool"),
    ),
    (),
)


def draws(kind: str, knob: Knob, current: object, n: int = 2000) -> Counter[object]:
    rng = np.random.default_rng(0)
    return Counter(MUTATORS[kind].choose(knob, current, rng) for _ in range(n))


def test_every_kind_has_a_mutator() -> None:
    assert set(MUTATORS) == set(KINDS)


def test_a_tile_moves_mostly_to_a_neighbouring_factor() -> None:
    counts = draws("tile", SPACE.knobs[0], 8)
    assert 8 not in counts and set(counts) == {1, 2, 4, 16, 32}
    near = (counts[4] + counts[16]) / sum(counts.values())
    assert near == pytest.approx(NEIGHBOUR + (1 - NEIGHBOUR) * 2 / 5, abs=0.03)
    assert counts[4] == pytest.approx(counts[16], rel=0.15)
    # at an end there is one neighbour; a word ("none") sorts before the numbers
    assert draws("tile", SPACE.knobs[0], 32).most_common(1)[0][0] == 16
    assert draws("tile", SPACE.knobs[1], "none").most_common(1)[0][0] == 4


@pytest.mark.parametrize("kind", [k for k in KINDS if k != "tile"])
def test_other_kinds_take_another_choice_uniformly(kind: str) -> None:
    knob = Knob("k", ("a", "b", "c", "d"), kind=kind)
    counts = draws(kind, knob, "b", n=3000)
    assert set(counts) == {"a", "c", "d"}
    assert max(counts.values()) / min(counts.values()) < 1.2


def test_a_mutation_changes_that_many_decisions() -> None:
    parent = dict(
        complete(SPACE, {"tile": 8, "regtile": 4, "at": "tile", "mode": "recompute", "pool": "sram"})
    )
    rng = np.random.default_rng(1)
    for changes in (1, 2, 3):
        for _ in range(50):
            child = dict(mutate(SPACE, parent, rng, changes))
            changed = {k for k in parent if parent[k] != child[k]}
            if "at" in changed and child["at"] == "root":  # the window knob is off: at its default,
                assert child["mode"] == "rolling"  # and a change drawn for it is undone
                changed.discard("mode")
                assert changes - 1 <= len(changed) <= changes
            else:
                assert len(changed) == changes
            assert tuple(child.items()) == complete(SPACE, child)


def test_a_seed_gives_the_same_children() -> None:
    parent = dict(complete(SPACE, {}))
    first = [mutate(SPACE, parent, np.random.default_rng(7), 2) for _ in range(3)]
    again = [mutate(SPACE, parent, np.random.default_rng(7), 2) for _ in range(3)]
    assert first == again


def test_a_workload_space_mutates_into_schedules() -> None:
    wl = get_workload("pool_chain", height=20, width=20, channels=8)
    space = load_space("search_spaces/cascade.yaml", wl)
    assert {k.kind for k in space.knobs} <= set(MUTATORS)
    rng = np.random.default_rng(0)
    parent = dict(complete(space, {}))
    applied = 0
    for _ in range(20):
        child = dict(mutate(space, parent, rng, 1))
        assert child != parent
        space.apply(wl.func, child)  # raises ScheduleError only for a combination no schedule has
        applied += 1
    assert applied == 20


def test_a_knob_that_a_change_switches_on_is_drawn_from_its_choices() -> None:
    parent = dict(complete(SPACE, {"tile": 8, "regtile": 4, "at": "root", "pool": "sram"}))
    assert parent["mode"] == "rolling"  # off under at root: at its default
    rng = np.random.default_rng(3)
    modes: Counter[str] = Counter()
    for _ in range(400):
        child = dict(mutate(SPACE, parent, rng, 1))
        if child["at"] == "tile":  # the one change: mode is switched on and drawn, not moved again
            assert {k for k in parent if parent[k] != child[k]} <= {"at", "mode"}
            modes[child["mode"]] += 1
        else:
            assert child["mode"] == "rolling"
    assert set(modes) == {"rolling", "recompute"}
    assert modes["rolling"] == pytest.approx(modes["recompute"], rel=0.35)


FORMED = SearchSpace(
    "formed",
    (
        Knob("regtile", (0, 1, 2, 4, 8, 16), kind="tile"),
        Knob("unroll", (False, True), (("regtile", (0,)),), kind="unroll"),
        Knob("pool", ("dtcm",), kind="pool"),
    ),
    (),
)


def test_a_knobs_forms_are_its_choices_grouped_by_the_knobs_they_switch_on() -> None:
    regtile, unroll, pool = FORMED.knobs
    at = dict(complete(FORMED, {"regtile": 8}))
    assert forms(FORMED, regtile, at) == [(0,), (1, 2, 4, 8, 16)]
    assert forms(FORMED, unroll, at) == [(False, True)]  # switches nothing on: one form
    assert forms(FORMED, pool, at) == [("dtcm",)]
    assert forms(SPACE, SPACE.knobs[2], dict(complete(SPACE, {}))) == [("tile",), ("root",)]


def test_a_knob_with_forms_changes_form_with_its_probability_and_moves_within_by_its_kind() -> None:
    rng = np.random.default_rng(5)
    n = 4000
    # from 8 only regtile can move (unroll is off): to 0 (the other form) with FORM_CHANGE, else
    # by the tile mutator over 1-16, where 0 is no neighbour of 1
    from_8 = Counter(dict(mutate(FORMED, {"regtile": 8}, rng))["regtile"] for _ in range(n))
    assert 8 not in from_8
    assert from_8[0] / n == pytest.approx(FORM_CHANGE, abs=0.03)
    near = (from_8[4] + from_8[16]) / (n - from_8[0])
    assert near == pytest.approx(NEIGHBOUR + (1 - NEIGHBOUR) * 2 / 4, abs=0.03)
    from_1 = Counter(dict(mutate(FORMED, {"regtile": 1}, rng))["regtile"] for _ in range(n))
    assert from_1[2] / (n - from_1[0]) == pytest.approx(NEIGHBOUR + (1 - NEIGHBOUR) / 4, abs=0.03)
    # from 0, a form of one choice, a change of regtile always takes another form, its value drawn
    # uniformly, and switches unroll off (at its default)
    moved = [c for c in (dict(mutate(FORMED, {"regtile": 0, "unroll": True}, rng)) for _ in range(n)) if c["regtile"]]
    assert Counter(c["unroll"] for c in moved) == Counter({False: len(moved)})
    counts = Counter(c["regtile"] for c in moved)
    assert set(counts) == {1, 2, 4, 8, 16} and max(counts.values()) / min(counts.values()) < 1.3
    assert len(moved) / n == pytest.approx(0.5, abs=0.03)  # regtile or unroll: the one change
