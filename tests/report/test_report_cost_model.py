"""report.md's cost-model section (rank correlation and top-k recall of the predictions made before
each trial was measured) and the convergence plot's cutoff trials, from logs written by hand."""

from __future__ import annotations

import math
from pathlib import Path

from autotune.report import load_results, write_report
from autotune.report.analysis import cost_model_quality
from autotune.search.log import TrialLog
from autotune.search.records import TrialRecord


def ok(trial: int, ms: float, predicted: float | None) -> TrialRecord:
    return TrialRecord(
        trial, trial // 4, (("tile_rows", trial % 5 + 1),), "ok", median_ms=ms, min_ms=ms, iqr_ms=0.0,
        max_abs_err=0.0, peak_bytes=1000, predicted_ms=predicted,
    )  # fmt: skip


def write_log(tmp_path: Path, records: list[TrialRecord]) -> Path:
    with TrialLog(tmp_path / "trials.jsonl") as log:
        for r in records:
            log.append(r)
    return tmp_path


def test_the_quality_of_the_predictions(tmp_path: Path) -> None:
    # measured 1..10 ms; predicted in the same order but for trials 8 and 9, swapped with 1 and 2
    measured = [float(m) for m in range(1, 11)]
    predicted = [9.0, 10.0, 3.0, 4.0, 5.0, 6.0, 7.0, 1.0, 2.0, 10.5]
    records = [ok(0, 5.0, None), *(ok(i + 1, m, p) for i, (m, p) in enumerate(zip(measured, predicted)))]
    records.append(TrialRecord(11, 3, (("tile_rows", 1),), "infeasible", reason="over", peak_bytes=9))
    quality = cost_model_quality(load_results(write_log(tmp_path, records)))
    assert quality is not None and quality["trials"] == 10 and quality["k"] == 1
    d2 = sum((a - b) ** 2 for a, b in zip([8, 9, 3, 4, 5, 6, 7, 1, 2, 10], range(1, 11)))
    assert math.isclose(quality["spearman"], 1 - 6 * d2 / (10 * 99))  # no ties: the textbook formula
    assert quality["recall"] == 0.0  # the fastest (1 ms) is predicted 9th
    report = write_report(tmp_path).read_text()
    assert "## Cost model" in report and "On 10 held-out trials" in report and "top-1 recall 0.00" in report


def test_no_predictions_no_section_and_cutoff_trials_are_drawn(tmp_path: Path) -> None:
    cut = TrialRecord(2, 0, (("tile_rows", 3),), "cutoff", reason="first run over 8 ms", median_ms=9.0,
                      min_ms=9.0, iqr_ms=0.0, max_abs_err=0.0, peak_bytes=1000)  # fmt: skip
    out = write_log(tmp_path, [ok(0, 2.0, None), ok(1, 1.5, None), cut])
    assert cost_model_quality(load_results(out)) is None
    report = write_report(out).read_text()
    assert "## Cost model" not in report
    assert (out / "convergence.png").stat().st_size > 0
