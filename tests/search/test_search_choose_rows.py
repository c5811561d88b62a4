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


def test_the_random_share_draws_from_the_strategys_random_proposals_first() -> None:
    predicted = np.arange(8.0)
    drawn = [False, False, False, False, False, True, False, True]  # 5 and 7 were drawn at random
    for seed in range(5):
        picked = choose(predicted, 4, 0.5, np.random.default_rng(seed), None, (), drawn)
        assert picked[:2] == [(0, "model"), (1, "model")]
        assert sorted(i for i, _ in picked[2:]) == [5, 7]


def test_a_drawn_proposal_the_model_ranks_first_is_the_models_and_too_few_drawn_are_filled() -> None:
    predicted = np.arange(8.0)
    drawn = [True, False, False, False, False, False, False, True]
    picked = choose(predicted, 4, 0.5, np.random.default_rng(0), None, (), drawn)
    assert picked[:2] == [(0, "model"), (1, "model")]
    random_share = [i for i, how in picked[2:]]
    assert random_share[0] == 7 and random_share[1] in (2, 3, 4, 5, 6)


def test_without_drawn_proposals_the_random_share_is_what_it_was() -> None:
    predicted = np.arange(10.0)
    none_drawn = [False] * 10
    for seed in range(5):
        a = choose(predicted, 4, 0.5, np.random.default_rng(seed), None, (), none_drawn)
        assert a == choose(predicted, 4, 0.5, np.random.default_rng(seed))
