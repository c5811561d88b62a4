"""The end of a run writes best.json, best_ir.txt and best_kernel.py; a failed rewrite keeps the old best.json.

``finish`` runs here on hand-made trial records with an executor whose
re-measure makes its figures up, so nothing is compiled or timed.
"""

from __future__ import annotations

import errno
import json
import math
import os
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from search_runs import write_run_config

from autotune import files as files_module
from autotune.config import RunConfig, load_config, load_workload
from autotune.measure.result import MeasureResult
from autotune.measure.task import MeasureTask
from autotune.report import write_report
from autotune.schedule import Schedule
from autotune.search.best import REMEASURE_ROUNDS, TOP_K, finish
from autotune.search.executors import Executor
from autotune.search.log import TrialLog
from autotune.search.records import TrialRecord
from autotune.workloads import Workload

WORKLOAD = {"name": "pool_chain", "args": {"height": 12, "width": 10, "channels": 4}}


class MadeUp(Executor):
    """Re-measures the ``i``-th task as ``i + 1`` ms in every round (the default, last, is the slowest;
    in ``default_rounds`` rounds if given)."""

    name = "test-made-up"
    workers = 1

    def __init__(self, default_rounds: int | None = None) -> None:
        self.default_rounds = default_rounds

    def run(self, tasks: Sequence[MeasureTask]) -> Iterator[tuple[int, MeasureResult, str]]:
        raise AssertionError("finish only re-measures")

    def remeasure(self, tasks: Sequence[MeasureTask], rounds: int) -> list[list[MeasureResult]]:
        self.remeasure_node = "made-up"
        self.remeasured = len(tasks)
        results = [
            [MeasureResult("ok", 0.0, float(i + 1), float(i + 1), 0.0, repeats=1)] * rounds
            for i in range(len(tasks))
        ]
        if self.default_rounds is not None:
            results[-1] = results[-1][: self.default_rounds]
        return results

    def close(self) -> None:
        pass


def trial(wl: Workload, number: int, tile: int, median_ms: float = 1.0) -> TrialRecord:
    """An ``ok`` trial of pool_chain with pool2's rows split by ``tile``."""
    sch = Schedule(wl.func)
    sch = sch.split(sch.get_loops("pool2")[1], [None, tile])
    return TrialRecord(
        number, 0, (("tile_rows", tile),), "ok", median_ms=median_ms, min_ms=0.9, iqr_ms=0.1,
        max_abs_err=0.0, peak_bytes=0, pool_bytes=(), trace=sch.trace_json(),
    )  # fmt: skip


@pytest.fixture
def run(tmp_path: Path) -> tuple[RunConfig, Workload]:
    cfg = load_config(write_run_config(tmp_path, "best", WORKLOAD, trials=2, cost_model="none", seed=5))
    cfg.output.mkdir()
    return cfg, load_workload(cfg.workload)


def test_finish_writes_the_best_and_its_companions(run: tuple[RunConfig, Workload]) -> None:
    cfg, wl = run
    result = finish(cfg, wl, [trial(wl, 0, 4), trial(wl, 1, 2)], MadeUp())
    best = json.loads((cfg.output / "best.json").read_text(encoding="utf-8"))
    assert best["trial"] == result.best.trial == 0  # re-measured fastest: the first of the top trials
    assert best["remeasure"]["rounds"] == REMEASURE_ROUNDS and best["figures"]["node"] == "made-up"
    assert best["figures"]["rounds"] == best["default"]["rounds"] == REMEASURE_ROUNDS
    assert "T.prim_func" in (cfg.output / "best_ir.txt").read_text(encoding="utf-8")
    assert (cfg.output / "best_kernel.py").stat().st_size > 0
    assert sorted(p.name for p in cfg.output.iterdir()) == ["best.json", "best_ir.txt", "best_kernel.py"]
    assert best["cost_model"] == {"kind": "none", "cross_validated": None}


def test_the_end_times_again_the_top_k_schedules_and_picks_by_those_timings(
    run: tuple[RunConfig, Workload],
) -> None:
    cfg, wl = run
    # 11 distinct schedules, the search's fastest last; the made-up re-measure times them in the order
    # given (fastest by the search first), the first as the fastest
    records = [trial(wl, n, tile, median_ms=2.0 - 0.1 * n) for n, tile in enumerate(range(1, 12))]
    executor = MadeUp()
    result = finish(cfg, wl, records, executor)
    assert executor.remeasured == TOP_K + 1 == 11  # the 10 fastest and the default
    assert result.best.trial == 10
    best = json.loads((cfg.output / "best.json").read_text(encoding="utf-8"))
    assert [c["trial"] for c in best["remeasure"]["candidates"]] == list(range(10, 0, -1))


def test_best_json_gives_the_rounds_of_a_default_timed_in_fewer(run: tuple[RunConfig, Workload]) -> None:
    cfg, wl = run
    result = finish(cfg, wl, [trial(wl, 0, 4), trial(wl, 1, 2)], MadeUp(default_rounds=1))
    best = json.loads((cfg.output / "best.json").read_text(encoding="utf-8"))
    assert (best["figures"]["rounds"], best["default"]["rounds"]) == (REMEASURE_ROUNDS, 1)
    assert result.speedup == 3.0 and best["default"]["median_ms"] == 3.0


def test_the_cost_models_out_of_fold_figures_go_to_best_json_and_the_report(
    run: tuple[RunConfig, Workload],
) -> None:
    cfg, wl = run
    records = [trial(wl, 0, 4), trial(wl, 1, 2)]
    with TrialLog(cfg.output / "trials.jsonl") as log:
        for r in records:
            log.append(r)
    quality = {"trials": 40.0, "folds": 4.0, "spearman": 0.6875, "recall": math.nan, "k": 4.0}
    finish(cfg, wl, records, MadeUp(), quality)
    best = json.loads((cfg.output / "best.json").read_text(encoding="utf-8"))
    assert best["cost_model"]["cross_validated"] == {**quality, "recall": None}  # NaN is not JSON
    report = write_report(cfg.output).read_text(encoding="utf-8")
    assert (
        "Out of fold, after the search (4 folds of the 40 ok trials, each predicted by a model of the run's "
        "kind fitted on the other folds and the cutoff trials): Spearman 0.69; top-4 recall -."
    ) in report
    assert "held-out trials (each ok trial predicted before it was measured" not in report  # none logged
    assert "Each trial above" not in report  # nothing above to compare with


def test_a_failed_rewrite_of_best_json_keeps_the_previous_one(
    run: tuple[RunConfig, Workload], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A resumed run finds another best, and the disk fills half-way through writing its best.json:
    the previous best.json is still there, whole, and no temporary file is left beside it."""
    cfg, wl = run
    finish(cfg, wl, [trial(wl, 0, 4)], MadeUp())
    previous = (cfg.output / "best.json").read_bytes()
    previous_ir = (cfg.output / "best_ir.txt").read_bytes()

    real_write_all = files_module._write_all

    def full_in_best_json(fd: int, data: bytes) -> None:
        if not data.startswith(b"{"):  # best_ir.txt and best_kernel.py go through
            real_write_all(fd, data)
            return
        os.write(fd, data[: len(data) // 2])
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(files_module, "_write_all", full_in_best_json)
    with pytest.raises(OSError) as info:
        finish(cfg, wl, [trial(wl, 1, 2)], MadeUp())
    assert info.value.errno == errno.ENOSPC
    # best_ir.txt took the new best: the write that failed was best.json's
    assert (cfg.output / "best_ir.txt").read_bytes() != previous_ir
    assert (cfg.output / "best.json").read_bytes() == previous
    assert json.loads(previous)["trial"] == 0
    assert sorted(p.name for p in cfg.output.iterdir()) == ["best.json", "best_ir.txt", "best_kernel.py"]
