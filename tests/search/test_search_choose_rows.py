"""The candidates chosen for measurement: one per feature row by prediction, none the model has timed."""

from __future__ import annotations

from typing import Any

import numpy as np

from autotune.search.candidates import choose


def indices(*args: Any) -> list[int]:
    """The candidates :func:`choose` picks, without how."""
    return [i for i, _ in choose(*args)]


def test_the_predicted_share_takes_one_candidate_per_row() -> None:
    predicted = np.array([1.0, 1.0, 2.0, 3.0, 4.0, 5.0])
    rows = ["a", "a", "b", "b", "c", "d"]
    assert indices(predicted, 3, 0.0, np.random.default_rng(0), rows) == [0, 2, 4]
    assert indices(predicted, 3, 0.0, np.random.default_rng(0)) == [0, 1, 2]  # without rows: by prediction


def test_rows_of_timed_trials_are_left_to_the_random_share() -> None:
    predicted = np.array([1.0, 2.0, 3.0, 4.0])
    rows = ["timed", "b", "timed", "c"]
    assert indices(predicted, 2, 0.0, np.random.default_rng(0), rows, {"timed"}) == [1, 3]
    picked = indices(predicted, 3, 1 / 3, np.random.default_rng(0), rows, {"timed"})
    assert picked[:2] == [1, 3] and picked[2] in (0, 2)


def test_too_few_distinct_rows_are_filled_by_prediction() -> None:
    predicted = np.array([3.0, 1.0, 2.0, 4.0])
    rows = ["a", "a", "a", "timed"]
    assert indices(predicted, 3, 0.0, np.random.default_rng(0), rows, {"timed"}) == [1, 2, 0]


def test_the_random_share_is_seeded_and_distinct() -> None:
    predicted = np.arange(10.0)
    rows = [i // 2 for i in range(10)]
    a = indices(predicted, 6, 0.5, np.random.default_rng(3), rows)
    assert a[:3] == [0, 2, 4]
    assert len(set(a)) == 6 and not set(a[3:]) & {0, 2, 4}
    assert a == indices(predicted, 6, 0.5, np.random.default_rng(3), rows)
