"""experiments/pick_value.py on synthetic logs: which of a round's measured trials were the model's
picks and which the epsilon share's, and what is counted of them."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from experiment_scripts import load_experiment

from autotune.search.records import TrialRecord


@pytest.fixture(scope="module")
def pv() -> Any:
    return load_experiment("pick_value")


def record(trial: int, rnd: int, status: str, ms: float | None = None) -> TrialRecord:
    times = {} if ms is None else {"median_ms": ms, "min_ms": ms, "iqr_ms": 0.0}
    return TrialRecord(trial, rnd, (("t", trial),), status, reason="" if status == "ok" else status, **times)


def test_a_full_rounds_measurements_are_the_models_picks_then_the_random_ones(pv: Any) -> None:
    records = [
        record(0, 0, "infeasible"),  # numbered before the round's measurements: not a pick
        record(1, 0, "invalid"),
        record(2, 0, "ok", 1.0),  # model 1
        record(3, 0, "ok", 2.0),  # model 2
        record(4, 0, "cutoff", 9.0),  # model 3
        record(5, 0, "error"),  # random 4: a failed measurement is a pick all the same
        record(6, 1, "ok", 1.5),  # a round of one measurement: its share is not known
        record(7, 1, "infeasible"),
    ]
    assert pv.places(records, 4, 0.25) == {
        2: (1, "model"),
        3: (2, "model"),
        4: (3, "model"),
        5: (4, "random"),
    }
    assert pv.places(records, 4, 0.5)[4] == (3, "random")
    assert pv.places(records, 4, 0.0)[5] == (4, "model")  # no epsilon share: every pick is the model's


def test_a_record_that_says_how_it_was_picked_is_taken_at_its_word(pv: Any) -> None:
    said = [record(0, 0, "ok", 1.0), record(1, 0, "ok", 2.0), record(2, 0, "ok", 3.0)]
    said = [dataclasses.replace(r, picked=how) for r, how in zip(said, ("model", "random", "model"))]
    assert pv.places(said, 3, 0.0) == {0: (1, "model"), 1: (2, "random"), 2: (3, "model")}
    every = [dataclasses.replace(r, picked="every") for r in said]
    assert pv.places(every, 3, 0.0) == {}  # no choice was made: neither share
