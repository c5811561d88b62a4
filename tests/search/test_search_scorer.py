"""The tuner's scorer (``Search.score``): the cost model's prediction for assignments a strategy
has not proposed yet, infinite for what cannot be measured, and a scored candidate is not lowered
again when it is proposed."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from search_runs import InProcess, count_lowerings, write_run_config

from autotune.config import load_config, load_workload
from autotune.search import candidates
from autotune.search.cost_model import make_cost_model
from autotune.search.log import TrialLog
from autotune.search.rounds import Search
from autotune.search.space import load_space
from autotune.search.strategies import Outcome, Proposal

WORKLOAD = {"name": "pool_chain", "args": {"height": 12, "width": 12, "channels": 4}}


class _Fixed:
    """A strategy that proposes the same assignments every round (and takes the scorer)."""

    def __init__(self, assignments: Sequence[candidates.Assignment]) -> None:
        self.assignments = list(assignments)
        self.scorer: Any = None

    def propose(self, n: int) -> list[Proposal]:
        return [Proposal(a, i) for i, a in enumerate(self.assignments[:n])]

    def learn(self, outcomes: Sequence[Outcome]) -> None:
        pass

    def logged(self, records: Sequence[Any]) -> None:
        pass

    def score_with(self, scorer: Any) -> None:
        self.scorer = scorer


def test_scores_what_fits_refuses_the_rest_and_the_round_does_not_lower_it_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # pool_chain 12x12x4 under 1 KiB: a tile of one or two rows fits, pool1 whole at root (2 KiB) does not
    memory = {"pools": [{"name": "sram", "size": "2MiB"}], "peak_limit": "1KiB"}
    path = write_run_config(
        tmp_path, "run", WORKLOAD, memory=memory, trials=2, cost_model="xgboost", batch=2, measure_per_round=2
    )
    cfg = load_config(path)
    wl = load_workload(cfg.workload)
    space = load_space(cfg.search.space, wl, cfg.memory.pools)
    fits = [candidates.complete(space, {"tile_rows": t, "strip": 0}) for t in (1, 2)]
    over = candidates.complete(space, {"at_pool1": "root"})
    real = candidates.lower_candidate
    lowered = count_lowerings(monkeypatch)
    with TrialLog(tmp_path / "trials.jsonl") as log:
        search = Search(cfg, wl, space, log, make_cost_model("xgboost", 0, None), InProcess(), False)
        assert search.strategy.scorer == search.score  # a model that ranks: the strategy gets it
        search.strategy = _Fixed(fits)  # type: ignore[assignment]
        scores = search.score([*fits, over])
        # before any trial the model orders by the roofline estimate: finite for what fits
        assert all(math.isfinite(s) for s in scores[:2]) and scores[2] == math.inf
        assert len(lowered) == 3 and search.prepared.keys[over] in search.prepared.unfit
        assert list(search.score([over])) == [math.inf] and len(lowered) == 3  # remembered
        assert search.run_round() == (2, 2)
        assert len(lowered) == 3  # the round measured the scored candidates without lowering them
        records = list(log.records)
        # measured: no prediction is wanted for them any more
        assert list(search.score(fits)) == [math.inf, math.inf]
    assert sorted(dict(r.knobs)["tile_rows"] for r in records) == [1, 2]
    assert all(r.status == "ok" for r in records)
    assert all(r.picked == "every" for r in records)  # two candidates for two measurements: no choice
    for record in records:  # the figures of the scoring's lowering
        func = space.apply(wl.func, dict(record.knobs)).func
        low = real(func, cfg.memory.pools, cfg.memory.planner, cfg.search.seed, cfg.memory.peak_limit)
        assert record.peak_bytes == low.peak


def test_a_model_that_does_not_rank_gives_no_scorer(tmp_path: Path) -> None:
    path = write_run_config(tmp_path, "run", WORKLOAD, trials=2, cost_model="none", strategy="evolutionary")
    cfg = load_config(path)
    wl = load_workload(cfg.workload)
    space = load_space(cfg.search.space, wl, cfg.memory.pools)
    with TrialLog(tmp_path / "trials.jsonl") as log:
        search = Search(cfg, wl, space, log, make_cost_model("none", 0, None), InProcess(), False)
        assert search.strategy.scorer is None
        assert np.isnan(search.score([candidates.complete(space, {})])).all()  # no order
