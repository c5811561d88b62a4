"""experiments/sample_efficiency.py's referee on synthetic logs: which schedules were among a run's
five fastest and when, and the trials a run needs by the re-timed medians."""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

import pytest
from experiment_scripts import load_experiment

from autotune.search.records import TrialRecord


@pytest.fixture(scope="module")
def se() -> Any:
    return load_experiment("sample_efficiency")


def record(trial: int, status: str, ms: float | None = None) -> TrialRecord:
    times = {} if ms is None else {"median_ms": ms, "min_ms": ms, "iqr_ms": 0.0}
    reason = "" if status == "ok" else status
    return TrialRecord(
        trial, 0, (("t", trial),), status, reason=reason, trace=f'{{"trial": {trial}}}', **times
    )


def test_top_spans_enter_and_leave_by_measured_trial(se: Any) -> None:
    records = [
        record(0, "ok", 5.0),  # measured 1
        record(1, "infeasible"),  # not measured: no position
        record(2, "cutoff", 90.0),  # measured 2, never ok
        record(3, "ok", 4.0),  # measured 3
        record(4, "ok", 6.0),  # measured 4: third of three, outside a top 2
        record(5, "ok", 3.0),  # measured 5: pushes trial 0 out
    ]
    spans = se.top_spans(records, 2)
    by_trial = {s["key"]: s for s in spans}
    key = {r.trial: r.key for r in records}
    assert set(by_trial) == {key[0], key[3], key[5]}
    assert by_trial[key[0]] == {"key": key[0], "search_ms": 5.0, "enter": 1, "leave": 5}
    assert by_trial[key[3]] == {"key": key[3], "search_ms": 4.0, "enter": 3, "leave": None}
    assert by_trial[key[5]] == {"key": key[5], "search_ms": 3.0, "enter": 5, "leave": None}


def test_refereed_counts_the_first_top_schedule_within_the_target(se: Any) -> None:
    run = {
        "curve": [5.0, 5.0, 4.0, 4.0, 3.0],
        "tops": [
            {"key": "a", "search_ms": 5.0, "enter": 1, "leave": 5},
            {"key": "b", "search_ms": 4.0, "enter": 3, "leave": None},
            {"key": "c", "search_ms": 3.0, "enter": 5, "leave": None},
        ],
    }
    # re-timed: the search's fastest (c) is slower than b; a was never re-timed ok
    medians = {"a": None, "b": 3.1, "c": 3.4}
    judged = se.refereed(run, medians, 1.05 * 3.1)
    assert judged["to_within"] == 3
    assert judged["final_ms"] == 3.1 and se.delivered({"referee": judged}) == 3
    assert judged["curve"] == [None, None, 3.1, 3.1, 3.1]
    assert se.refereed(run, medians, 3.0)["to_within"] is None
    # within 5% once, but pushed out of the top 5 by the end: not delivered
    pushed = {"curve": run["curve"], "tops": [dict(run["tops"][1], leave=4), run["tops"][2]]}
    left = se.refereed(pushed, medians, 1.05 * 3.1)
    assert left["to_within"] == 3 and left["final_ms"] == 3.4 and se.delivered({"referee": left}) is None


def test_verdict_counts_seeds_within_the_trials_and_the_wall(se: Any) -> None:
    runs = [
        {"strategy": "random", "wall": {"search_s": 100.0}, "n": None, "curve": [1.0] * 64},
        {"strategy": "evolutionary", "wall": {"search_s": 100.0}, "n": 20},
        {"strategy": "evolutionary", "wall": {"search_s": 200.0}, "n": 30},  # over 180 s
    ]
    v = se.verdict(runs, lambda r: r["n"])
    assert v["random"] == {
        "seeds": 1, "met": 0, "reached": 0, "mean_trials": None,
        "geometric": {"trials": 64, "reached": 0, "mean": None, "at_least": pytest.approx(64 / math.log(20))},
    }  # fmt: skip
    assert v["evolutionary"] == {
        "seeds": 2, "met": 1, "reached": 2, "mean_trials": 25.0, "vs_random": None, "vs_random_at_most": 25 / 65,
        "vs_random_geometric_at_most": pytest.approx(25 / (64 / math.log(20))),
    }  # fmt: skip


def test_a_strategy_that_always_got_there_is_bounded_against_a_random_that_did_not(se: Any) -> None:
    """Random missed one seed of two in its 64 trials: its mean is at least (40 + 65) / 2, so a
    strategy at 21 trials on every seed needs at most 0.4 of random's; one that missed a seed
    itself has no bound."""
    runs = [
        {"strategy": "random", "wall": {"search_s": 9.0}, "n": 40, "curve": [1.0] * 64},
        {"strategy": "random", "wall": {"search_s": 9.0}, "n": None, "curve": [1.0] * 64},
        {"strategy": "evolutionary", "wall": {"search_s": 9.0}, "n": 21, "curve": [1.0] * 64},
        {"strategy": "evolutionary", "wall": {"search_s": 9.0}, "n": 21, "curve": [1.0] * 64},
        {"strategy": "pretrained", "wall": {"search_s": 9.0}, "n": 10, "curve": [1.0] * 64},
        {"strategy": "pretrained", "wall": {"search_s": 9.0}, "n": None, "curve": [1.0] * 64},
    ]
    v = se.verdict(runs, lambda r: r["n"])
    assert v["evolutionary"]["vs_random"] == pytest.approx(21 / 40)
    assert v["evolutionary"]["vs_random_at_most"] == pytest.approx(21 / 52.5)
    assert v["pretrained"]["vs_random"] == pytest.approx(10 / 40)
    assert "vs_random_at_most" not in v["pretrained"]
    line = se.verdict_lines(v, "referee")[0]
    assert "evolutionary 0.53, at most 0.40 (21.0 over 2 of 2 seeds; random 40.0 over 1 of 2)" in line
    # geometric: 40 + 64 trials, one a run's first within 5%
    g = v["random"]["geometric"]
    assert (g["trials"], g["reached"], g["mean"]) == (104, 1, 104.0)
    assert g["at_least"] == pytest.approx(104 / 4.7439, rel=1e-4)  # the Poisson upper bound of 1 event
    assert v["evolutionary"]["vs_random_geometric_at_most"] == pytest.approx(21 / g["at_least"])
    assert "vs_random_geometric_at_most" not in v["pretrained"]
    assert line.endswith(
        "Random had it drawn on (its trials to 5% geometric; 104 measured trials, 1 a run's first within "
        "5%): mean 104.0 trials, at least 21.9 at 95%; evolutionary's mean at most 0.96 of it."
    )


def test_a_baselines_random_runs_are_the_control(se: Any) -> None:
    """``--baseline DIR --baseline-strategies random``: its runs, labelled ``random@DIR``, are what
    the model-guided runs (this invocation's and a baseline's) are compared with."""
    runs = [
        {"strategy": "random@old", "wall": {"search_s": 9.0}, "n": 40, "curve": [1.0] * 64},
        {"strategy": "random@old", "wall": {"search_s": 9.0}, "n": None, "curve": [1.0] * 64},
        {"strategy": "evolutionary", "wall": {"search_s": 9.0}, "n": 21, "curve": [1.0] * 64},
        {"strategy": "evolutionary@old", "wall": {"search_s": 9.0}, "n": 30, "curve": [1.0] * 64},
    ]
    v = se.verdict(runs, lambda r: r["n"])
    assert v["evolutionary"]["vs_random"] == pytest.approx(21 / 40)
    assert v["evolutionary@old"]["vs_random_at_most"] == pytest.approx(30 / 52.5)
    assert v["random@old"]["geometric"]["trials"] == 104
    line = se.verdict_lines(v, "referee")[0]
    assert "evolutionary 0.53, at most 0.40 (21.0 over 1 of 1 seeds; random@old 40.0 over 1 of 2)" in line
    assert line.endswith("evolutionary's mean at most 0.96 of it, evolutionary@old's mean at most 1.37 of it.")
    # this invocation's own random runs come first
    assert se.random_label(["random@old", "evolutionary", "random"]) == "random"
    assert se.random_label(["evolutionary"]) is None


def test_the_poisson_upper_bound_leaves_the_stated_chance_below_the_count(se: Any) -> None:
    """No event: the rule of three (ln 20); one and five events: the chi-square bounds
    (chi2(0.95, 2k + 2) / 2: 4.744 and 10.513)."""
    assert se.poisson_upper(0, 0.95) == pytest.approx(math.log(20))
    assert se.poisson_upper(1, 0.95) == pytest.approx(4.7439, rel=1e-4)
    assert se.poisson_upper(5, 0.95) == pytest.approx(10.5130, rel=1e-4)


def test_without_random_runs_there_is_no_ratio_to_random(se: Any) -> None:
    """An invocation of one strategy (``--strategies evolutionary`` against a ``--baseline``)."""
    runs = [{"strategy": "evolutionary", "wall": {"search_s": 9.0}, "n": 21, "curve": [1.0] * 64}]
    v = se.verdict(runs, lambda r: r["n"])
    assert v == {"evolutionary": {"seeds": 1, "met": 1, "reached": 1, "mean_trials": 21.0, "vs_random": None}}
    line = se.verdict_lines(v, "referee")[0]
    assert line.endswith(
        "Mean trials to 5% (seeds that got there; no random runs here): evolutionary 21.0 over 1 of 1 seeds."
    )
    assert "random -" not in line


def test_round_agreement_ranks_the_rounds_against_each_other(se: Any) -> None:
    """Three rounds of four schedules: rounds 0 and 1 rank them alike, round 2 in reverse; a
    schedule that failed a round is left out, and so is one timed in the first round only; with fewer
    than three schedules there is none."""
    ref = {"rounds_ms": {
        "a": [1.0, 1.1, 4.0], "b": [2.0, 2.1, 3.0], "c": [3.0, 3.1, 2.0], "d": [4.0, 4.1, 1.0],
        "e": [5.0, None, 0.5], "f": [50.0],
    }}  # fmt: skip
    assert se.round_agreement(ref) == pytest.approx((-1.0 / 3.0, -1.0, 1.0))  # pairs: 1, -1, -1
    assert se.round_agreement({"rounds_ms": {"a": [1.0, 2.0], "b": [2.0, 1.0]}}) is None


def test_epsilon_sets_the_random_share_of_this_invocations_runs_only(
    se: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    args = argparse.Namespace(
        runs=tmp_path / "runs", baseline=tmp_path / "before", trials=64, workers=1, epsilon=0.1
    )
    assert se.configure("pool_chain", "evolutionary", 0, args, None).search.epsilon == 0.1
    default = argparse.Namespace(**{**vars(args), "epsilon": None})
    assert se.configure("pool_chain", "evolutionary", 0, default, None).search.epsilon == 0.25  # the config's
    monkeypatch.setattr(se, "finished", lambda cfg, sha: True)
    baseline, _ = se.baseline_config("pool_chain", "evolutionary", 0, args)
    assert baseline.search.epsilon == 0.25 and baseline.output == (
        tmp_path / "before" / "pool_chain" / "evolutionary-s0"
    )


def test_a_baseline_without_the_finished_run_stops_before_any_run(se: Any, tmp_path: Path) -> None:
    """``--baseline DIR`` reads runs and never makes one: a missing run is named, and nothing is
    written under DIR."""
    args = argparse.Namespace(
        runs=tmp_path / "runs", baseline=tmp_path / "before", trials=64, workers=1, epsilon=None
    )
    (tmp_path / "before" / "pool_chain" / "evolutionary-s1").mkdir(parents=True)  # begun, not finished
    for strategy in ("evolutionary", "pretrained"):
        missing = rf"{strategy}-s1 is not a finished run of pool_chain, {strategy}, seed 1"
        with pytest.raises(SystemExit, match=missing):
            se.baseline_config("pool_chain", strategy, 1, args)
    assert [p.name for p in (tmp_path / "before").rglob("*")] == ["pool_chain", "evolutionary-s1"]
    assert not args.runs.exists()


def test_the_second_pass_times_the_fastest_again_and_its_figure_is_the_best(
    se: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first pass's fastest (a, 1.00 ms) and those within 1.15x of it (b; not c) are timed again;
    their second-pass medians replace the first ones, and a's second figure is the best even where
    b's is less; a file with the same schedules and rounds is read, not timed again."""
    timed: list[list[str]] = []
    again = {"a": [1.1, 1.2, 1.1], "b": [1.05, 1.0, 1.1]}

    class Executor:
        def __init__(self, workers: int) -> None:
            assert workers == 1

        def __enter__(self) -> Executor:
            return self

        def __exit__(self, *exc: object) -> None:
            return None

        def remeasure(self, tasks: list[str], rounds: int) -> list[list[Any]]:
            timed.append(list(tasks))
            return [
                [argparse.Namespace(status="ok", median_ms=ms) for ms in again[t][:rounds]] for t in tasks
            ]

    monkeypatch.setattr(se, "LocalExecutor", Executor)
    monkeypatch.setattr(se, "make_task", lambda cfg, trace: trace)
    ref = {"median_ms": {"a": 1.0, "b": 1.14, "c": 1.2, "d": None}}
    traces = {k: k for k in "abcd"}
    doc = se.confirm("wl", ref, traces, None, tmp_path / "referee.json", 3)
    assert timed == [["a", "b"]]
    assert doc["confirm"]["winner"] == "a" and doc["confirm"]["median_ms"] == {"a": 1.1, "b": 1.05}
    medians, best = se.referee_medians(doc)
    assert medians == {"a": 1.1, "b": 1.05, "c": 1.2, "d": None} and best == 1.1
    assert (
        se.confirm("wl", json.loads((tmp_path / "referee.json").read_text()), traces, None, tmp_path / "x", 3)
        == doc
    )
    assert timed == [["a", "b"]]  # read, not timed again
    assert se.referee_medians(ref) == (ref["median_ms"], 1.0)  # no second pass: the least median
    assert se.confirm("wl", ref, traces, None, tmp_path / "y", 0) is ref
