"""experiments/model_reach.py on synthetic figures: the referee's truth it reads, the reach of an
order, the table it writes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from experiment_scripts import load_experiment


@pytest.fixture(scope="module")
def mr() -> Any:
    return load_experiment("model_reach")


def test_the_referees_second_pass_replaces_its_medians_and_sets_its_best(mr: Any, tmp_path: Path) -> None:
    ref = {
        "median_ms": {"a": 1.0, "b": 1.2, "c": None, "d": 3.0},
        "confirm": {"winner": "a", "median_ms": {"a": 1.1, "b": 1.05}},
    }
    (tmp_path / "referee.json").write_text(json.dumps(ref), encoding="utf-8")
    assert mr.referee_medians(tmp_path) == ({"a": 1.1, "b": 1.05, "d": 3.0}, 1.1)
    del ref["confirm"]
    (tmp_path / "referee.json").write_text(json.dumps(ref), encoding="utf-8")
    assert mr.referee_medians(tmp_path) == ({"a": 1.0, "b": 1.2, "d": 3.0}, 1.0)


def test_knob_distance_counts_the_knobs_set_otherwise(mr: Any) -> None:
    assert mr.knob_distance({"a": 1, "b": True}, {"a": 1, "b": True}) == 0
    assert mr.knob_distance({"a": 1, "b": True}, {"a": 2, "b": True}) == 1
    assert mr.knob_distance({"a": 1}, {"a": 1, "c": "x"}) == 1


def test_reach_is_the_position_of_the_first_near_candidate_in_the_predicted_order(mr: Any) -> None:
    predicted = np.array([5.0, 1.0, 3.0, 2.0, 3.0])
    assert mr.first_near(predicted, [False, False, True, False, True]) == 2  # order 1, 3, 2, 4, 0
    assert mr.first_near(predicted, [True, False, False, False, False]) == 4
    assert mr.first_near(predicted, [False] * 5) is None


def test_the_table_gives_each_variant_per_run_and_their_summary(mr: Any) -> None:
    figures = {v: {"spearman": 0.5, "reach": 3} for v in mr.VARIANTS}
    other = {v: {"spearman": 0.1, "reach": None} for v in mr.VARIANTS}
    result = {
        "workload": "chain", "referee_best_ms": 2.0, "schedules": 9, "near": 2, "draws": 40,
        "draws_tried": 100, "draws_s": 3.0,
        "runs": {
            "evolutionary-s0": {"best_search_ms": 2.2, "near_measured": 0, "knobs_from_near": 4, **figures},
            "evolutionary-s1": {"best_search_ms": 2.0, "near_measured": 2, "knobs_from_near": 0, **other},
        },
    }  # fmt: skip
    text = mr.report([result], ["runs/chain"])
    cells = " | ".join("0.50 / 3" for _ in mr.VARIANTS)
    assert f"| evolutionary-s0 | 1.10 | 0 | 4 | {cells} |" in text
    assert "| evolutionary-s1 | 1.00 | 2 | 0 | " + " | ".join("0.10 / -" for _ in mr.VARIANTS) + " |" in text
    assert "| mean / median reach | | | | " + " | ".join("0.30 / 3" for _ in mr.VARIANTS) + " |" in text
    assert "Referee: 9 schedules, 2 within 5% of its best (2 ms); 40 random draws that fit" in text
