"""The tuner's early stop and time budget: a measurement's cutoff is a factor of the best median so
far, a cutoff trial is logged and never the best; ``search.time_budget`` ends the search."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from search_runs import POOLS, InProcess, write_run_config

from autotune.config import load_config
from autotune.measure.result import MeasureResult
from autotune.measure.task import MeasureTask, run_task
from autotune.search.log import TrialLog
from autotune.search.tuner import CUTOFF_FACTOR, CUTOFF_FLOOR_MS, tune

pytestmark = pytest.mark.slow

WORKLOAD = {"name": "pool_chain", "args": {"height": 20, "width": 20, "channels": 8}}


def write_config(tmp_path: Path, name: str, **search: Any) -> Path:
    knobs = {"trials": 9, "cost_model": "none", "seed": 2, "batch": 3, "measure_per_round": 3, **search}
    return write_run_config(tmp_path, name, WORKLOAD, memory={"pools": POOLS}, **knobs)


class CutsOff(InProcess):
    """Measures in-process, notes every task's cutoff and reports the 5th task as cut off (no other
    is: a microsecond kernel is far under the cutoff's floor)."""

    def __init__(self) -> None:
        super().__init__()
        self.cutoffs: list[float | None] = []

    def run(self, tasks: Sequence[MeasureTask]) -> Iterator[tuple[int, MeasureResult, str]]:
        for i, task in enumerate(tasks):
            self.cutoffs.append(task.cutoff_ms)
            self.calls += 1
            result = run_task(task)
            if self.calls == 5 and result.status == "ok":
                ms = (task.cutoff_ms or 1.0) * 1.5
                result = MeasureResult(
                    "cutoff", max_abs_err=0.0, median_ms=ms, min_ms=ms, iqr_ms=0.0, repeats=1,
                    error="first timed run over the cutoff",
                )  # fmt: skip
            yield i, result, "test"


def test_a_slow_candidate_is_cut_off_and_never_best(tmp_path: Path) -> None:
    cfg = load_config(write_config(tmp_path, "cut"))
    executor = CutsOff()
    result = tune(cfg, progress=False, executor=executor)
    logged = TrialLog.load(cfg.output / "trials.jsonl")
    measured = [r for r in logged if r.status not in ("infeasible", "invalid")]
    first = [c for r, c in zip(measured, executor.cutoffs) if r.round == measured[0].round]
    assert first and first == [None] * len(first)  # nothing ok before the first round
    for record, cutoff in zip(measured, executor.cutoffs):
        before = [r.median_ms for r in logged if r.ok and r.round < record.round and r.median_ms]
        assert cutoff == (max(CUTOFF_FACTOR * min(before), CUTOFF_FLOOR_MS) if before else None)
    cut = [r for r in logged if r.status == "cutoff"]  # the 5th (these kernels run in microseconds)
    assert len(cut) == 1 and cut[0].median_ms is not None and cut[0].reason
    assert result.best.trial not in {r.trial for r in cut} and result.best.ok
    assert sum(r.status != "infeasible" for r in logged) == 9  # a cutoff trial uses the budget


def test_the_time_budget_ends_the_search_after_a_round(tmp_path: Path) -> None:
    cfg = load_config(write_config(tmp_path, "budget", trials=30, time_budget="1ms"))
    assert cfg.search.time_budget == pytest.approx(0.001)
    assert cfg.to_dict()["search"]["time_budget"] == pytest.approx(0.001)
    result = tune(cfg, progress=False, executor=InProcess())
    logged = TrialLog.load(cfg.output / "trials.jsonl")
    assert {r.round for r in logged} == {0} and result.best.ok  # one round, then the budget is spent
    assert load_config(write_config(tmp_path, "ten", time_budget="10m")).search.time_budget == 600.0
    assert "time_budget" not in load_config(write_config(tmp_path, "none")).to_dict()["search"]
