"""Reports from a trial log written by hand: the table, its files, the summary, the plots, report.md."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import autotune
from autotune import cli, workloads
from autotune.report import (
    load_results,
    pareto_front,
    plot_convergence,
    plot_pareto,
    result_line,
    summary,
    trace_text,
    write_report,
    write_tables,
)
from autotune.schedule import Schedule
from autotune.search.log import TrialLog
from autotune.search.records import TrialRecord

ARGS = {"height": 20, "width": 20, "channels": 8}
PNG = b"\x89PNG\r\n\x1a\n"


def rolling_trace(tile: int) -> str:
    wl = workloads.get("pool_chain", **ARGS)
    sch = Schedule(wl.func)
    sch = sch.split(sch.get_loops("pool2")[1], [None, tile])
    return sch.compute_at("pool1", sch.last[0]).rolling_buffer("pool1", 0).trace_json()


def ok(trial: int, ms: float, peak: int, tile: int, **extra: Any) -> TrialRecord:
    return TrialRecord(
        trial, trial // 4, (("tile_rows", tile), ("mode", "rolling")), "ok", median_ms=ms, min_ms=ms * 0.9,
        iqr_ms=ms * 0.05, max_abs_err=0.0, peak_bytes=peak, pool_bytes=(("dtcm", peak), ("sram", 0)),
        compile_s=0.8, node="n1", trace=rolling_trace(tile), **extra,
    )  # fmt: skip


RECORDS = [
    ok(0, 2.0, 4000, 1, predicted_ms=2.5),
    TrialRecord(
        1,
        0,
        (("tile_rows", 16), ("mode", "recompute")),
        "infeasible",
        reason="peak over the limit",
        peak_bytes=20000,
        pool_bytes=(("dtcm", 0), ("sram", 20000)),
    ),
    ok(2, 1.0, 8000, 2, retimed=True),  # its first timing was noisy: timed twice
    TrialRecord(
        3, 0, (("tile_rows", 8), ("mode", "rolling")), "invalid", reason="rolling_buffer: no overlap"
    ),
    ok(4, 1.5, 9000, 4),  # dominated by trial 2
    TrialRecord(
        5,
        1,
        (("tile_rows", 2), ("mode", "recompute")),
        "wrong",
        reason="max_abs_err 3",
        max_abs_err=3.0,
        peak_bytes=100,
        trace='{"version": 1, "steps": []}',
    ),
    ok(6, 0.5, 16000, 8),
    TrialRecord(7, 1, (("tile_rows", 1), ("mode", "recompute")), "crashed", reason="the worker died"),
]


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    with TrialLog(tmp_path / "trials.jsonl") as log:
        for record in reversed(RECORDS):  # completion order is not trial order
            log.append(record)
    return tmp_path


def best_json(run_dir: Path, record: TrialRecord) -> dict[str, Any]:
    data = {
        "name": "handmade", "workload": {"name": "pool_chain", "path": None, "args": ARGS},
        "pools": [{"name": "dtcm", "size": 65536}, {"name": "sram", "size": 2 << 20}],
        "planner": "greedy_by_size", "peak_limit": 12000, "seed": 0, "trial": record.trial, "key": record.key,
        "knobs": dict(record.knobs), "trace": json.loads(record.trace),
        "figures": {"status": "ok", "median_ms": 0.5, "min_ms": 0.45, "iqr_ms": 0.01, "peak_bytes": 16000,
                    "pool_bytes": {"dtcm": 16000}, "reason": ""},
        "default": {"status": "ok", "median_ms": 1.25, "min_ms": 1.2, "iqr_ms": 0.02, "peak_bytes": 64000,
                    "pool_bytes": {"dtcm": 64000}, "reason": "", "pools": "config"},
        "speedup": 2.5, "memory_ratio": 4.0, "remeasure": {"rounds": 5, "candidates": []},
    }  # fmt: skip
    (run_dir / "best.json").write_text(json.dumps(data), encoding="utf-8")
    return data


def test_load_results_one_row_per_trial(run_dir: Path) -> None:
    df = load_results(run_dir)
    assert list(df["trial"]) == list(range(8))
    assert list(df.columns[:4]) == ["trial", "round", "status", "reason"]
    assert {"knob.tile_rows", "knob.mode", "pool.dtcm", "pool.sram", "median_ms", "min_ms", "iqr_ms",
            "peak_bytes", "predicted_ms", "compile_s", "node", "trace", "key"} <= set(df.columns)  # fmt: skip
    assert df.loc[0, "predicted_ms"] == 2.5 and pd.isna(df.loc[2, "predicted_ms"])
    assert df.loc[1, "pool.sram"] == 20000 and pd.isna(df.loc[3, "peak_bytes"])
    assert df["median_ms"].dtype == "float64" and str(df["peak_bytes"].dtype) == "Int64"
    assert df.loc[6, "key"] == RECORDS[6].key
    assert df["retimed"].tolist() == [False, False, True, False, False, False, False, False]
    assert autotune.load_results(run_dir).equals(df)


def test_load_results_of_an_empty_log(tmp_path: Path) -> None:
    (tmp_path / "trials.jsonl").write_text("")
    df = load_results(tmp_path)
    assert len(df) == 0 and "knob.tile_rows" not in df.columns
    assert summary(df).splitlines() == ["trials: 0 ()", "no ok trial"]


def test_tables_round_trip(run_dir: Path) -> None:
    parquet, csv = write_tables(run_dir)
    back = pd.read_parquet(parquet)
    assert list(back["trial"]) == list(range(8))
    assert list(back["status"]) == [r.status for r in RECORDS]
    assert back.loc[6, "median_ms"] == 0.5
    assert len(pd.read_csv(csv)) == 8


def test_summary_counts_and_best_five(run_dir: Path) -> None:
    text = summary(load_results(run_dir))
    lines = text.splitlines()
    assert lines[0] == "trials: 8 (ok 4, infeasible 1, invalid 1, wrong 1, crashed 1)"
    assert lines[1:] == [  # latencies in their unit; trial 2 was timed twice
        "best 4 ok:",
        "  trial  median      min     IQR  retimed  peak bytes  knobs",
        "      6  500 µs   450 µs   25 µs       no      16,000  tile_rows=8, mode=rolling",
        "      2    1 ms   900 µs   50 µs      yes       8,000  tile_rows=2, mode=rolling",
        "      4  1.5 ms  1.35 ms   75 µs       no       9,000  tile_rows=4, mode=rolling",
        "      0    2 ms   1.8 ms  100 µs       no       4,000  tile_rows=1, mode=rolling",
    ]


def test_pareto_front_keeps_the_undominated(run_dir: Path) -> None:
    front = pareto_front(load_results(run_dir))
    assert list(front["trial"]) == [0, 2, 6]  # 4 is slower than 2 with more memory


def test_plots_are_pngs(run_dir: Path, tmp_path: Path) -> None:
    df = load_results(run_dir)
    for path in (plot_convergence(df, tmp_path / "c.png"), plot_pareto(df, tmp_path / "p.png", 12000)):
        assert path.read_bytes().startswith(PNG)
    empty = df.iloc[0:0]
    assert plot_convergence(empty, tmp_path / "e.png").read_bytes().startswith(PNG)
    assert plot_pareto(empty, tmp_path / "f.png").read_bytes().startswith(PNG)


def test_report_of_an_unfinished_run(run_dir: Path) -> None:
    text = write_report(run_dir).read_text()
    assert "has not finished" in text and "trials: 8" in text
    for name in ("convergence.png", "pareto.png", "trials.parquet", "trials.csv"):
        assert (run_dir / name).exists()
    assert not (run_dir / "pools.png").exists()


def test_report_of_a_finished_run(run_dir: Path) -> None:
    best = best_json(run_dir, RECORDS[6])
    text = write_report(run_dir).read_text()
    assert text.startswith("# autotune report: handmade")
    line = "best: 500 µs, 2.50x faster than the default schedule (1.25 ms), uses 1/4.0 of its workspace"
    assert line in text and line in result_line(best)
    assert trace_text(best["trace"]) in text
    assert json.loads(trace_text(best["trace"])) == best["trace"]
    for image in ("convergence.png", "pareto.png", "pools.png"):
        assert f"]({image})" in text
        assert (run_dir / image).read_bytes().startswith(PNG)


def test_report_says_when_the_default_was_timed_in_fewer_rounds(run_dir: Path) -> None:
    best = best_json(run_dir, RECORDS[6])
    assert "Both re-measured on one worker, alternating, 5 rounds.\n" in write_report(run_dir).read_text()
    best["figures"]["rounds"], best["default"]["rounds"] = 5, 1
    (run_dir / "best.json").write_text(json.dumps(best), encoding="utf-8")
    assert (
        "Both re-measured on one worker, alternating, 5 rounds; the default, over 10 times slower than the "
        "fastest in the first round, in 1 round only.\n"
    ) in write_report(run_dir).read_text()


def test_result_line_when_the_best_uses_more_memory(run_dir: Path) -> None:
    best = best_json(run_dir, RECORDS[6])
    best["default"]["peak_bytes"] = 8000
    assert result_line(best).endswith("uses 2.0x its workspace (16,000 vs 8,000 bytes)")
    best["figures"]["peak_bytes"] = 0
    assert result_line(best).endswith("uses no workspace (0 vs 8,000 bytes)")
    best["figures"]["peak_bytes"], best["default"]["peak_bytes"] = 131072, 0  # a packed panel vs none
    assert result_line(best).endswith("uses 131,072 bytes of workspace where the default uses none")


def test_result_line_when_the_best_measures_slower_than_the_default(run_dir: Path) -> None:
    best = best_json(run_dir, RECORDS[6])
    best["speedup"] = 0.25
    assert result_line(best).startswith("best: 500 µs, 4.00x slower than the default schedule (1.25 ms)")


def test_cli_report(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    best_json(run_dir, RECORDS[6])
    assert cli.main(["report", str(run_dir)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("trials: 8 (ok 4,")
    assert "2.50x faster" in out and f"report: {run_dir / 'report.md'}" in out
    assert cli.main(["report", str(run_dir / "nope")]) == 2
    assert "autotune: error: no trial log at" in capsys.readouterr().err
