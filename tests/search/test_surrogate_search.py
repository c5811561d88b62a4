"""experiments/surrogate_search.py on small inputs: knobs read from a trace, their encoding, the
surrogate's offsets per run, its executor's cutoff, and the figures of a comparison."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pytest
from experiment_scripts import load_experiment

from autotune.measure.task import MeasureTask
from autotune.search.space import Knob, SearchSpace


@pytest.fixture(scope="module")
def ss() -> Any:
    return load_experiment("surrogate_search")


SPACE = SearchSpace(
    "toy",
    (
        Knob("tile", (1, 2, 4, 8), kind="tile"),
        Knob("unroll", (False, True), kind="unroll"),
        Knob("jam", (1, 2), (("unroll", (True,)),), kind="unroll"),
        Knob("at", ("tile", "root"), kind="location"),
    ),
    (("mode", "recompute"),),
)


def trace_of(**decisions: Any) -> str:
    steps = [
        {"op": "sample", "args": {"name": k, "decision": v, "candidates": [], "kind": "tile"}}
        for k, v in decisions.items()
    ]
    program = {"op": "split", "args": dict(decisions)}  # the schedule the decisions build
    return json.dumps({"version": 1, "steps": [*steps, program]})


def test_decisions_read_the_sample_steps_and_default_the_rest(ss: Any) -> None:
    got = ss.decisions(trace_of(tile=4, at="root"), SPACE)
    assert got == {"tile": 4, "unroll": False, "jam": 1, "at": "root", "mode": "recompute"}


def test_the_encoder_keeps_numbers_and_flags_and_one_hots_words(ss: Any) -> None:
    enc = ss.Encoder(SPACE.knobs)
    assert enc.row({"tile": 8, "unroll": True, "jam": 2, "at": "root"}) == [8.0, 1.0, 2.0, 0.0, 1.0]
    assert enc.row({}) == [1.0, 0.0, 1.0, 1.0, 0.0]  # every knob at its default


def test_the_surrogate_learns_one_offset_per_run_against_the_referee(ss: Any) -> None:
    rng = np.random.default_rng(0)
    X = rng.integers(1, 9, size=(240, 1)).astype(float)
    truth = 0.3 * X[:, 0]
    group = np.repeat([0, 1, 2], 80)
    z = truth + np.array([0.0, 0.5, -0.25])[group]  # run 1 timed on a slower evening, run 2 faster
    model = ss.Surrogate.fit(X, z, group)
    assert model.offset[1:] == pytest.approx([0.5, -0.25], abs=0.05)
    assert np.log(model.ms(np.array([[2.0], [6.0]]))) == pytest.approx([0.6, 1.8], abs=0.05)


def test_the_executor_times_by_the_surrogate_and_cuts_off_the_slow(ss: Any) -> None:
    class Fixed:
        def ms(self, X: np.ndarray) -> np.ndarray:
            return np.asarray(X)[:, 0] / 10.0  # tile / 10 ms

    ex = ss.SurrogateExecutor(SPACE, ss.Encoder(SPACE.knobs), Fixed(), noise=0.0, seed=0)
    fast = MeasureTask("toy", (), None, trace_of(tile=2), (), cutoff_ms=0.5)
    slow = MeasureTask("toy", (), None, trace_of(tile=8), (), cutoff_ms=0.5)
    (_, a, _), (_, b, _) = list(ex.run([fast, slow]))
    assert (a.status, a.median_ms) == ("ok", pytest.approx(0.2))
    assert (b.status, b.median_ms) == ("cutoff", pytest.approx(0.8))
    assert [[r.median_ms for r in rounds] for rounds in ex.remeasure([fast], 3)] == [[pytest.approx(0.2)] * 3]


def test_arm_settings_set_module_attributes_and_refuse_unknown_ones(ss: Any) -> None:
    from autotune.search.strategies import evolutionary

    before = evolutionary.GENERATIONS
    try:
        ss.set_attributes(["autotune.search.strategies.evolutionary.GENERATIONS=7", "oracle"])
        assert evolutionary.GENERATIONS == 7
    finally:
        evolutionary.GENERATIONS = before
    with pytest.raises(SystemExit, match="no attribute 'NOPE'"):
        ss.set_attributes(["autotune.search.strategies.evolutionary.NOPE=1"])
    assert ss.parse_arm("wide:a.B=1,a.C=2.0") == ("wide", ["a.B=1", "a.C=2.0"])
    assert ss.parse_arm("default") == ("default", [])


def test_the_summary_counts_runs_within_5_percent_of_the_best_known(ss: Any) -> None:
    runs = [
        {
            "arm": "a",
            "seed": 0,
            "curve": [None, 2.0, 1.04],
            "final_ms": 1.04,
            "measured_best_ms": 1.04,
            "data_best_ms": 1.0,
            "search_s": 5.0,
        },
        {
            "arm": "a",
            "seed": 1,
            "curve": [3.0, 2.0, 2.0],
            "final_ms": 2.0,
            "measured_best_ms": 2.0,
            "data_best_ms": 1.0,
            "search_s": 6.0,
        },
        {
            "arm": "b",
            "seed": 0,
            "curve": [1.05, 1.05, 1.0],
            "final_ms": 1.0,
            "measured_best_ms": 1.0,
            "data_best_ms": 1.0,
            "search_s": 7.0,
        },
    ]
    s = ss.summarise(runs, ["a", "b"], trials=3)
    assert s["best_ms"] == 1.0
    a, b = s["arms"]["a"], s["arms"]["b"]
    assert (a["within"], a["mean_trials"], a["search_s_max"]) == (1, 3.5, 6.0)  # 3 and a miss (4)
    assert a["final_geomean"] == pytest.approx(math.sqrt(1.04 * 2.0))
    assert (b["within"], b["mean_trials"], b["final_worst"]) == (1, 1.0, 1.0)
    assert a["per_seed"][1] == {"trials_to": None, "final": 2.0}
