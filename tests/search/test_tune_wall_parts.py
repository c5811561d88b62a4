"""The search's wall-time savings keep its results: a lowering planned twice from one run of the
passes equals two full lowerings, a candidate ranked out is not lowered again in a later round,
and the run's parts reach ``TuneResult.driver``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from search_runs import InProcess, count_lowerings, write_run_config

from autotune import workloads
from autotune.config import load_config, load_workload
from autotune.errors import PoolOverflowError, ScheduleError
from autotune.lowering import UNPLANNED, lower, plan_lowered
from autotune.memory import Pool
from autotune.search import candidates
from autotune.search.cost_model import make_cost_model
from autotune.search.log import TrialLog
from autotune.search.records import TrialRecord
from autotune.search.rounds import Search
from autotune.search.space import load_space
from autotune.search.stopwatch import PARTS, RUN_PARTS
from autotune.search.strategies import Outcome, Proposal
from autotune.search.tuner import tune

REPO = Path(__file__).resolve().parents[2]
POOLS = (Pool("dtcm", 4096), Pool("sram", 1 << 21))
BIG = tuple(replace(p, size=candidates.UNBOUNDED) for p in POOLS)


def _schedules(n: int) -> list[Any]:
    """``n`` random schedules of a small bottleneck over the cascade space (some overflow dtcm)."""
    wl = workloads.get("bottleneck", height=8, width=8, cin=4, expand=8)
    space = load_space(REPO / "search_spaces" / "cascade.yaml", wl, POOLS)
    rng = np.random.default_rng(3)
    out = []
    while len(out) < n:
        try:
            out.append(space.apply(wl.func, candidates.random_assignment(space, rng)).func)
        except ScheduleError:
            continue
    return out


def _full(func: Any, pools: tuple[Pool, ...], limit: int | None) -> candidates.Lowering:
    """What lower_candidate gives, by lowering the whole pipeline once per set of pools."""
    try:
        lowered = lower(func, pools=pools)
    except PoolOverflowError as exc:
        plan = lower(func, pools=BIG).plan
        return candidates.Lowering(None, plan.total_peak, tuple(plan.pool_peaks.items()), 0.0, str(exc))
    peak = lowered.plan.total_peak
    return candidates.Lowering(lowered, peak, tuple(lowered.plan.pool_peaks.items()), 0.0)


def test_planning_a_function_lowered_up_to_the_plan_equals_lowering_it() -> None:
    for func in _schedules(4):
        unplanned = lower(func, until=UNPLANNED).func
        for pools in (BIG, (Pool("dtcm", 1 << 16), Pool("sram", 1 << 21))):
            whole, parts = lower(func, pools=pools), plan_lowered(unplanned, pools=pools)
            assert str(parts.func) == str(whole.func)
            assert parts.plan == whole.plan


def test_lower_candidate_gives_the_peaks_and_reasons_of_full_lowerings() -> None:
    overflowed = fitted = 0
    for func in _schedules(12):
        got = candidates.lower_candidate(func, POOLS, "greedy_by_size", 0, None)
        want = _full(func, POOLS, None)
        assert (got.peak, got.pool_bytes) == (want.peak, want.pool_bytes)
        if want.lowered is None:
            overflowed += 1
            assert got.lowered is None and got.reason == f"pools overflow: {want.reason}"
        else:
            fitted += 1
            assert got.lowered is not None and str(got.lowered.func) == str(want.lowered.func)
            assert got.lowered.plan == want.lowered.plan
    assert overflowed and fitted  # both paths were taken


# ---------------------------------------------------------------- a candidate ranked out


class _Fixed:
    """A strategy that proposes the same assignments every round."""

    def __init__(self, assignments: Sequence[candidates.Assignment]) -> None:
        self.assignments = list(assignments)
        self.learned: list[Outcome] = []

    def propose(self, n: int) -> list[Proposal]:
        return [Proposal(a, i) for i, a in enumerate(self.assignments[:n])]

    def learn(self, outcomes: Sequence[Outcome]) -> None:
        self.learned.extend(outcomes)

    def logged(self, records: Sequence[TrialRecord]) -> None:
        pass

    def enqueue(self, values: Sequence[dict[str, Any]]) -> None:
        pass


def test_a_candidate_ranked_out_is_not_lowered_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two schedules proposed in two rounds, one measured per round: three proposals of new
    schedules, two lowerings; the second round measures the one ranked out with the figures of
    its first lowering."""
    workload = {"name": "pool_chain", "args": {"height": 12, "width": 12, "channels": 4}}
    path = write_run_config(
        tmp_path, "run", workload, trials=2, cost_model="xgboost", batch=2, measure_per_round=1
    )
    cfg = load_config(path)
    wl = load_workload(cfg.workload)
    space = load_space(cfg.search.space, wl, cfg.memory.pools)
    assignments = [candidates.complete(space, {"tile_rows": t}) for t in (2, 4)]
    real = candidates.lower_candidate
    lowered = count_lowerings(monkeypatch)
    model = make_cost_model("xgboost", 0, None)
    with TrialLog(tmp_path / "trials.jsonl") as log:
        search = Search(cfg, wl, space, log, model, InProcess(), False)
        search.strategy = _Fixed(assignments)  # type: ignore[assignment]
        applied: list[dict[str, Any]] = []
        real_apply = type(space).apply

        def applying(self: Any, func: Any, values: dict[str, Any]) -> Any:
            applied.append(values)
            return real_apply(self, func, values)

        monkeypatch.setattr(type(space), "apply", applying)
        assert search.run_round() == (1, 1) and search.run_round() == (1, 1)
        records = list(log.records)
    assert len(lowered) == 2 and len(set(lowered)) == 2
    assert len(applied) == 2  # each assignment applied once
    assert sorted(dict(r.knobs)["tile_rows"] for r in records) == [2, 4]
    for record in records:  # the figures of the (only) lowering of each
        func = space.apply(wl.func, dict(record.knobs)).func
        low = real(func, cfg.memory.pools, cfg.memory.planner, cfg.search.seed, cfg.memory.peak_limit)
        assert (record.peak_bytes, record.pool_bytes) == (low.peak, low.pool_bytes)
    t = search.clock.snapshot()
    assert t.seconds("apply") > 0 and t.seconds("lowering") > 0 and t.seconds("infeasible") == 0


# ---------------------------------------------------------------- the run's parts


def test_the_run_parts_and_infeasible_lowerings_reach_the_result(tmp_path: Path) -> None:
    """pool_chain 12x12x4: 480 B (one row per tile) fits a 1 KiB limit, the other schedules of the
    space do not, so some lowerings are charged to ``infeasible``."""
    space = tmp_path / "narrow.yaml"
    space.write_text(
        "name: narrow\nfamily: cascade\nknobs:\n  tile_rows: [1, 2]\n  strip: {value: 0}\n"
        "  parallel: {value: none}\n  fuse_*: {value: false}\n  unroll_*: {value: false}\n"
        "  vectorize: {value: false}\n  stage_*: {value: none}\n",
        encoding="utf-8",
    )
    workload = {"name": "pool_chain", "args": {"height": 12, "width": 12, "channels": 4}}
    memory = {"pools": [{"name": "sram", "size": "2MiB"}], "peak_limit": "1KiB"}
    path = write_run_config(
        tmp_path, "run", workload, memory=memory, space=str(space), trials=2, cost_model="none",
        batch=4, measure_per_round=2,
    )  # fmt: skip
    reported: list[Path] = []
    result = tune(load_config(path), progress=False, executor=InProcess(), report=reported.append)
    driver = result.driver
    assert driver is not None and reported == [tmp_path / "run"]
    assert [n for n, _ in driver.parts] == list(PARTS)
    assert [n for n, _ in driver.outside] == list(RUN_PARTS)
    for part in ("setup", "fits", "finish", "report", "apply", "infeasible", "lowering", "wait"):
        assert driver.seconds(part) > 0, part
    assert driver.seconds("start") == driver.seconds("stop") == 0  # the caller's executor
    assert driver.run_s > driver.total_s > 0 and "; run " in driver.text()
