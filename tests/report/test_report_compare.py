"""Latency units, noisy trials, which knobs mattered, runs side by side, and -v/-q."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from autotune import cli
from autotune.report import compare_runs, format_ms, knob_importance, load_results, noisy, summary
from autotune.search.log import TrialLog
from autotune.search.records import TrialRecord


def ok(trial: int, median: float, low: float, iqr: float, **knobs: Any) -> TrialRecord:
    return TrialRecord(
        trial,
        0,
        tuple(knobs.items()),
        "ok",
        median_ms=median,
        min_ms=low,
        iqr_ms=iqr,
        peak_bytes=1000 * (trial + 1),
    )


def write_log(directory: Path, records: list[TrialRecord]) -> Path:
    directory.mkdir(parents=True)
    with TrialLog(directory / "trials.jsonl") as log:
        for r in records:
            log.append(r)
    return directory


@pytest.mark.parametrize(
    ("ms", "text"),
    [
        (0.0123, "12.3 µs"),
        (4.5, "4.5 ms"),
        (1234.0, "1.234 s"),
        (0.00002, "20 ns"),
        (None, "-"),
        (float("nan"), "-"),
    ],
)
def test_latencies_are_written_in_the_unit_of_their_magnitude(ms: float | None, text: str) -> None:
    assert format_ms(ms) == text


def test_a_trial_whose_spread_is_large_against_its_median_is_noisy(tmp_path: Path) -> None:
    records = [
        ok(0, 2.0, 0.011, 0.1, tile=1),  # median 2.0 ms, min 0.011 ms: the case of a busy machine
        ok(1, 1.0, 0.9, 0.6, tile=2),  # IQR 60% of the median
        ok(2, 1.0, 0.6, 0.1, tile=4),  # min 40% below: under the 50% threshold
        TrialRecord(3, 0, (("tile", 8),), "infeasible", reason="over", peak_bytes=9),
    ]
    df = load_results(write_log(tmp_path / "run", records))
    assert noisy(df).tolist() == [True, True, False, False]
    text = summary(df)
    rows = {line.split()[0]: line.split()[1:7] for line in text.splitlines()[3:-1]}
    assert rows["0*"] == ["2", "ms", "11", "µs", "100", "µs"]
    assert rows["1*"][:4] == ["1", "ms", "900", "µs"] and rows["2"][:4] == ["1", "ms", "600", "µs"]
    assert text.endswith(
        "* noisy: 2 of 3 ok trials have median - min or IQR above 50% of their median (timed on a busy machine?)"
    )


def test_the_noise_threshold_is_the_one_the_measurement_retimes_at() -> None:
    from autotune.measure.task import RETIME_NOISE
    from autotune.report import NOISE_THRESHOLD

    assert NOISE_THRESHOLD is RETIME_NOISE


def test_a_retimed_trial_still_noisy_is_marked_in_both_columns(tmp_path: Path) -> None:
    records = [
        TrialRecord(
            0, 0, (("tile", 1),), "ok", median_ms=2.0, min_ms=0.5, iqr_ms=0.1, peak_bytes=10, retimed=True
        ),
        TrialRecord(1, 0, (("tile", 2),), "ok", median_ms=3.0, min_ms=2.9, iqr_ms=0.1, peak_bytes=20),
    ]
    lines = summary(load_results(write_log(tmp_path / "run", records))).splitlines()
    assert lines[2:5] == [
        "  trial  median     min     IQR  retimed  peak bytes  knobs",
        "     0*    2 ms  500 µs  100 µs      yes          10  tile=1",
        "      1    3 ms  2.9 ms  100 µs       no          20  tile=2",
    ]


def test_knob_importance_is_the_variance_share_of_each_knob_alone() -> None:
    # tile decides the latency (1 ms or 4 ms); mode takes both values in each tile group
    rows = [(1, "a", 1.0), (1, "b", 1.0), (2, "a", 4.0), (2, "b", 4.0)]
    df = pd.DataFrame(
        {
            "status": "ok",
            "median_ms": [r[2] for r in rows],
            "knob.tile": [r[0] for r in rows],
            "knob.mode": [r[1] for r in rows],
        }
    )
    table = knob_importance(df)
    assert table["knob"].tolist() == ["tile", "mode"]
    assert table["share"].tolist() == pytest.approx([1.0, 0.0])
    assert table["best"].tolist()[0] == "1" and table["values"].tolist() == [2, 2]
    assert knob_importance(df.head(2)).empty  # fewer than 3 ok trials: nothing to say
    # a knob that explains half: two groups whose means differ, with spread inside them
    y = np.log([1.0, 2.0, 4.0, 8.0])
    df = pd.DataFrame({"status": "ok", "median_ms": np.exp(y), "knob.k": [0, 0, 1, 1]})
    share = float(knob_importance(df)["share"][0])
    assert share == pytest.approx((4 * (np.log(2.0) ** 2)) / float(((y - y.mean()) ** 2).sum()))


def best_json(directory: Path, median: float, knobs: dict[str, Any]) -> None:
    data = {
        "name": directory.name, "workload": {"name": "pool_chain", "path": None, "args": {"height": 20}},
        "figures": {"median_ms": median, "peak_bytes": 4096}, "knobs": knobs, "trial": 0,
    }  # fmt: skip
    (directory / "best.json").write_text(json.dumps(data))


def test_report_of_two_runs_puts_them_side_by_side(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = write_log(
        tmp_path / "a",
        [ok(0, 2.0, 0.011, 0.1, tile=4, mode="rolling"), ok(1, 1.5, 1.4, 0.1, tile=8, mode="rolling")],
    )
    best_json(a, 0.0421, {"tile": 4, "mode": "rolling"})
    b = write_log(tmp_path / "b", [ok(0, 3.0, 2.9, 0.1, tile=2, mode="rolling")])
    c = b / "trials.jsonl"  # a log without best.json: its fastest ok trial, marked (search)
    assert cli.main(["report", str(a), str(c)]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].split() == [str(a), str(c)]
    assert lines[1].split() == ["workload", "pool_chain(height=20)", "-"]
    assert lines[2].split() == ["best", "latency", "42.1", "µs", "3", "ms", "(search)"]
    assert lines[3].split() == ["best", "peak", "4,096", "B", "1,000", "B"]
    assert lines[4].split() == ["trials", "2", "(ok", "2)", "1", "(ok", "1)"]
    assert lines[5].split() == ["noisy", "ok", "trials", "1", "of", "2", "0", "of", "1"]
    assert lines[6].split() == ["knob", "tile", "4", "2"]  # mode is rolling in both: not shown
    assert lines[7] == "noisy: an ok trial whose median - min or IQR exceeds 50% of its median"
    assert out == compare_runs([a, c]) + "\n"
    assert not (b / "report.md").exists() and not (a / "report.md").exists()  # comparing writes nothing
    assert cli.main(["report", str(a), str(tmp_path / "nowhere")]) == 2
    assert "no trial log at" in capsys.readouterr().err


def test_verbosity_flags(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    parser = cli.build_parser()
    assert parser.parse_args(["-q", "report", "x"]).quiet is True
    assert parser.parse_args(["report", "x", "-q"]).quiet is True
    args = parser.parse_args(["run", "c.yaml", "-v"])
    assert (args.verbose, args.quiet) == (True, False)
    assert parser.parse_args(["run", "c.yaml"]).verbose is False
    assert cli.main(["report", "x", "-q", "-v"]) == 2
    assert "not allowed with argument" in capsys.readouterr().err
    log = write_log(tmp_path / "run", [ok(0, 2.0, 1.9, 0.1, tile=4)]) / "trials.jsonl"
    assert cli.main(["report", str(log), "-q"]) == 0
    assert capsys.readouterr().out == ""
