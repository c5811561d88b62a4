"""A round's random share is drawn from the proposals the strategy drew at random: the wiring from
the strategy's proposal origins to :func:`autotune.search.candidates.choose`."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from search_runs import InProcess, write_run_config

from autotune.config import load_config
from autotune.measure.result import MeasureResult
from autotune.measure.task import MeasureTask
from autotune.search import candidates, rounds
from autotune.search.tuner import tune

WORKLOAD = {"name": "pool_chain", "args": {"height": 12, "width": 12, "channels": 4}}


def _result(task: MeasureTask) -> MeasureResult:
    ms = 0.1 + int(hashlib.sha256(task.trace.encode()).hexdigest()[:6], 16) % 1000 / 1000
    return MeasureResult("ok", 0.0, ms, ms, 0.0, 3, compile_s=0.0, workspace_bytes=0)


class ByTrace(InProcess):
    """A latency from the trace's hash: the rounds run without compiling a kernel."""

    def run(self, tasks: Sequence[MeasureTask]) -> Iterator[tuple[int, MeasureResult, str]]:
        yield from ((i, _result(t), "test") for i, t in enumerate(tasks))

    def remeasure(self, tasks: Sequence[MeasureTask], rounds: int) -> list[list[MeasureResult]]:
        return [[_result(t)] * rounds for t in tasks]


@pytest.mark.parametrize("from_draws", [True, False])
def test_the_random_share_is_drawn_from_the_random_proposals(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, from_draws: bool
) -> None:
    monkeypatch.setattr(rounds, "EPSILON_FROM_DRAWS", from_draws)
    calls: list[tuple[list[str], list[tuple[int, str]], Any]] = []
    origins: list[list[str]] = []
    measure, choose = rounds.Search._measure, candidates.choose

    def spy_measure(self: Any, feasible: list[Any], *args: Any) -> None:
        origins.append([c.proposal.origin for c in feasible])
        measure(self, feasible, *args)

    def spy_choose(predicted: np.ndarray, *args: Any) -> list[tuple[int, str]]:
        picks = choose(predicted, *args)
        drawn = args[5] if len(args) > 5 else None
        calls.append((origins[-1], picks, drawn))
        return picks

    monkeypatch.setattr(rounds.Search, "_measure", spy_measure)
    monkeypatch.setattr(rounds.cand, "choose", spy_choose)
    search = {"strategy": "evolutionary", "cost_model": "xgboost", "trials": 24, "batch": 16}
    path = write_run_config(tmp_path, "run", WORKLOAD, measure_per_round=4, epsilon=0.5, seed=0, **search)
    tune(load_config(path), progress=False, executor=ByTrace())
    ranked = [(o, p, d) for o, p, d in calls if any(how == "model" for _, how in p)]
    assert ranked, "no round was ranked by the model"
    for origin, picks, drawn in ranked:
        if not from_draws:
            assert drawn is None
            continue
        assert drawn == [o == "random" for o in origin]
        share = [i for i, how in picks if how == "random"]
        left = [i for i, o in enumerate(origin) if o == "random" and (i, "model") not in picks]
        assert all(origin[i] == "random" for i in share[: len(left)])
    if from_draws:  # the strategy drew some at random in the rounds ranked by the model
        assert any(how == "random" and o[i] == "random" for o, p, _ in ranked for i, how in p)
