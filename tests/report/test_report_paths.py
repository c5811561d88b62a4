"""`autotune report PATH` on a trial log or table file, on files it cannot read, and runs that stop
before their first trial (no output directory left behind)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_report import RECORDS

from autotune import cli
from autotune.errors import AutotuneError
from autotune.report import load_results, write_tables
from autotune.search import tuner as tuner_module
from autotune.search.log import TrialLog


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    out = tmp_path / "run"
    out.mkdir()
    with TrialLog(out / "trials.jsonl") as log:
        for record in RECORDS:
            log.append(record)
    return out


def files(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_report_of_a_trial_log_file_prints_the_summary_and_writes_nothing(
    run_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, "report", str(run_dir / "trials.jsonl"))
    assert (code, err) == (0, "")
    assert out.startswith("trials: 8 (ok 4, infeasible 1, invalid 1, wrong 1, crashed 1)\nbest 4 ok:")
    assert files(run_dir) == ["trials.jsonl"]


def test_report_of_a_parquet_table_gives_the_same_summary(
    run_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_tables(run_dir)
    before = files(run_dir)
    _, from_log, _ = run(capsys, "report", str(run_dir / "trials.jsonl"))
    code, out, err = run(capsys, "report", str(run_dir / "trials.parquet"))
    assert (code, err, out) == (0, "", from_log)
    assert files(run_dir) == before
    assert list(load_results(run_dir / "trials.parquet")["trial"]) == list(range(8))


@pytest.mark.parametrize(
    ("name", "content", "expected"),
    [
        ("best.json", "{}", "{path}: a file, expected a run directory, a trials.jsonl or a trials.parquet"),
        (
            "notes.txt",
            "hello",
            "{path}: a file, expected a run directory, a trials.jsonl or a trials.parquet",
        ),
        ("other.parquet", "not parquet", "{path}: cannot read it as a parquet table"),
        ("missing.parquet", None, "no trial table at {path}"),
        ("missing.jsonl", None, "no trial log at {path}"),
        ("bad.jsonl", "{oops\n", "{path}:1: not a JSON record"),
    ],
)
def test_report_of_a_file_it_cannot_read_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, content: str | None, expected: str
) -> None:
    path = tmp_path / name
    if content is not None:
        path.write_text(content, encoding="utf-8")
    before = files(tmp_path)
    code, out, err = run(capsys, "report", str(path))
    assert (code, out) == (2, "")
    assert err.startswith(f"autotune: error: {expected.format(path=path)}") and err.count("\n") == 1
    assert files(tmp_path) == before


def test_a_parquet_table_without_the_retimed_column_has_none_retimed(run_dir: Path) -> None:
    parquet, _ = write_tables(run_dir)
    df = load_results(parquet)
    df.drop(columns="retimed").to_parquet(parquet)
    back = load_results(parquet)
    assert list(back.columns) == list(df.columns)
    assert back["retimed"].tolist() == [False] * 8


def test_a_parquet_table_without_the_trial_columns(tmp_path: Path) -> None:
    import pandas as pd

    pd.DataFrame({"x": [1]}).to_parquet(tmp_path / "t.parquet")
    with pytest.raises(AutotuneError, match=r"t\.parquet: not a table of trials \(no column trial, round"):
        load_results(tmp_path / "t.parquet")


# ---------------------------------------------------------------- runs that stop before their first trial

CONFIG = """\
workload: {name: pool_chain, args: {height: 12, width: 12, channels: 2}}
memory: {pools: [{name: sram, size: 1MiB}], peak_limit: %s}
search: {space: cascade, trials: 4}
"""


def test_a_run_that_fails_before_its_first_trial_leaves_no_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A peak limit below every schedule fails after the output directory was made and proven
    writable: the directories the run made (``a/b/c``) are removed, the one that was there stays."""

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("tuning started")

    monkeypatch.setattr(tuner_module, "make_executor", refuse)
    config = tmp_path / "run.yaml"
    config.write_text(CONFIG % "16", encoding="utf-8")
    code, out, err = run(
        capsys, "run", str(config), "--output", str(tmp_path / "a" / "b" / "c"), "--no-progress"
    )
    assert (code, out) == (2, "")
    assert err.startswith("autotune: error: ") and "peak_limit" in err
    assert files(tmp_path) == ["run.yaml"]


def test_a_run_that_fails_before_its_first_trial_keeps_a_directory_it_did_not_make_as_it_was(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tuner_module, "make_executor", lambda *a, **k: (_ for _ in ()).throw(AssertionError))
    config = tmp_path / "run.yaml"
    config.write_text(CONFIG % "16", encoding="utf-8")
    out_dir = tmp_path / "out"
    (out_dir / "mine").mkdir(parents=True)
    (out_dir / "notes.txt").write_text("kept")
    code, _, _ = run(capsys, "run", str(config), "--output", str(out_dir), "--no-progress")
    assert code == 2
    assert files(out_dir) == ["mine", "notes.txt"]  # what was there stays; what the run wrote goes


def test_an_interrupted_start_leaves_no_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C while the workers start (before any trial): no directory, no traceback."""

    def interrupted(*args: Any, **kwargs: Any) -> Any:
        raise KeyboardInterrupt

    monkeypatch.setattr(tuner_module, "make_executor", interrupted)
    config = tmp_path / "run.yaml"
    config.write_text(CONFIG % "null", encoding="utf-8")
    code, _, err = run(capsys, "run", str(config), "--output", str(tmp_path / "out"), "--no-progress")
    assert code == 130
    assert "Traceback" not in err and "interrupted before the first trial" in err
    assert files(tmp_path) == ["run.yaml"]
