"""Whole-file writes leave the old file or the new one: ``write_atomic`` itself, its ``skip_unchanged``
mode, and the run's tables and pictures when the disk fills half-way through writing them."""

from __future__ import annotations

import errno
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from autotune import files as files_module
from autotune.files import write_atomic
from autotune.memory import Allocation, draw, parse_pools, plan_memory
from autotune.report import load_results, plot_convergence, plot_pareto, write_tables
from autotune.search.log import TrialLog
from autotune.search.records import TrialRecord

TRACE = '{"version": 1, "steps": []}'
PNG = b"\x89PNG\r\n\x1a\n"


def half_then_full(fd: int, data: bytes) -> None:
    """A ``_write_all`` on a disk that fills half-way through ``data``."""
    os.write(fd, data[: len(data) // 2])
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def full_on_call(n: int) -> Callable[[int, bytes], None]:
    """A ``_write_all`` whose ``n``-th call (from 1) finds the disk full half-way; the others write."""
    real = files_module._write_all
    calls = 0

    def write_all(fd: int, data: bytes) -> None:
        nonlocal calls
        calls += 1
        if calls == n:
            half_then_full(fd, data)
        real(fd, data)

    return write_all


def names(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


# ---------------------------------------------------------------- write_atomic


def test_write_atomic_replaces_the_file(tmp_path: Path) -> None:
    path = tmp_path / "best.json"
    assert write_atomic(path, '{"trial": 1}\n') == path
    assert path.read_text(encoding="utf-8") == '{"trial": 1}\n'
    write_atomic(path, "nöde\n".encode())  # bytes as they are; text as UTF-8
    assert path.read_text(encoding="utf-8") == "nöde\n"
    (tmp_path / "plain.txt").write_text("x")
    assert path.stat().st_mode == (tmp_path / "plain.txt").stat().st_mode  # the umask applies
    assert names(tmp_path) == ["best.json", "plain.txt"]


def test_write_atomic_failing_mid_write_keeps_the_old_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The disk fills half-way through the new contents: the old file is intact, no temporary file is left."""
    path = tmp_path / "best.json"
    path.write_text('{"trial": 1}\n')
    monkeypatch.setattr(files_module, "_write_all", half_then_full)
    with pytest.raises(OSError) as info:
        write_atomic(path, '{"trial": 2, "figures": {}}\n')
    assert info.value.errno == errno.ENOSPC
    assert path.read_text() == '{"trial": 1}\n'
    assert names(tmp_path) == ["best.json"]


def test_write_atomic_is_fsynced_before_the_rename(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The new contents are on disk before they replace the old file (else a crash may leave it empty)."""
    path = tmp_path / "best.json"
    path.write_text("old\n")
    seen: list[str] = []
    real_fsync = os.fsync

    def spy(fd: int) -> None:
        if not seen:  # the first fsync is the file's; the directory's follows the rename
            seen.append(path.read_text())
        real_fsync(fd)

    monkeypatch.setattr(files_module.os, "fsync", spy)
    write_atomic(path, "new\n")
    assert seen == ["old\n"] and path.read_text() == "new\n"


def test_skip_unchanged_leaves_identical_content_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Same content: not rewritten (same inode, same mtime, nothing written); other content: replaced."""
    path = tmp_path / "k_0123.py"
    assert write_atomic(path, "x = 1\n", skip_unchanged=True) == path  # a missing file is written
    assert path.read_text() == "x = 1\n"
    os.utime(path, ns=(1_000_000_000, 1_000_000_000))  # an old mtime, so a rewrite could not keep it
    before = path.stat()

    def no_write(fd: int, data: bytes) -> None:
        raise AssertionError("identical content was written again")

    with monkeypatch.context() as m:
        m.setattr(files_module, "_write_all", no_write)
        assert write_atomic(path, "x = 1\n", skip_unchanged=True) == path
        assert write_atomic(path, b"x = 1\n", skip_unchanged=True) == path
    after = path.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)

    write_atomic(path, "x = 2\n", skip_unchanged=True)
    replaced = path.stat()
    assert path.read_text() == "x = 2\n"
    assert replaced.st_ino != before.st_ino and replaced.st_mtime_ns != before.st_mtime_ns
    assert names(tmp_path) == ["k_0123.py"]


def test_without_skip_unchanged_identical_content_is_rewritten(tmp_path: Path) -> None:
    path = tmp_path / "report.md"
    write_atomic(path, "same\n")
    before = path.stat()
    write_atomic(path, "same\n")
    assert path.stat().st_ino != before.st_ino and path.read_text() == "same\n"


# ---------------------------------------------------------------- the run's tables and pictures


def record(trial: int, ms: float, peak: int) -> TrialRecord:
    return TrialRecord(
        trial, 0, (("tile", trial + 1),), "ok", median_ms=ms, min_ms=ms * 0.9, iqr_ms=ms * 0.05,
        peak_bytes=peak, pool_bytes=(("dtcm", peak),), trace=TRACE,
    )  # fmt: skip


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    """A results directory whose tables were written for two trials; its log now holds three."""
    out = tmp_path / "run"
    out.mkdir()
    with TrialLog(out / "trials.jsonl") as log:
        log.append(record(0, 2.0, 4000))
        log.append(TrialRecord(1, 0, (("tile", 2),), "crashed", reason="the worker died"))
        write_tables(out)
        log.append(record(2, 1.0, 8000))
    return out


@pytest.mark.parametrize("failing", [1, 2], ids=["parquet", "csv"])
def test_write_tables_failing_mid_write_keeps_the_old_table(
    run_dir: Path, monkeypatch: pytest.MonkeyPatch, failing: int
) -> None:
    """The disk fills half-way through trials.parquet (written first) or trials.csv: the file being
    written keeps its old contents whole, and no temporary file is left in the directory."""
    old_parquet = (run_dir / "trials.parquet").read_bytes()
    old_csv = (run_dir / "trials.csv").read_text(encoding="utf-8")
    assert len(old_csv.splitlines()) == 3  # header and two trials
    monkeypatch.setattr(files_module, "_write_all", full_on_call(failing))
    with pytest.raises(OSError) as info:
        write_tables(run_dir)
    assert info.value.errno == errno.ENOSPC
    assert (run_dir / "trials.csv").read_text(encoding="utf-8") == old_csv
    if failing == 1:
        assert (run_dir / "trials.parquet").read_bytes() == old_parquet
    else:  # the parquet table was written before the disk filled: it is the new one, whole
        import pandas as pd

        assert list(pd.read_parquet(run_dir / "trials.parquet")["trial"]) == [0, 1, 2]
    assert names(run_dir) == ["trials.csv", "trials.jsonl", "trials.parquet"]


def test_write_tables_replaces_both_tables(run_dir: Path) -> None:
    import pandas as pd

    assert write_tables(run_dir) == (run_dir / "trials.parquet", run_dir / "trials.csv")
    assert list(pd.read_parquet(run_dir / "trials.parquet")["trial"]) == [0, 1, 2]
    assert len((run_dir / "trials.csv").read_text(encoding="utf-8").splitlines()) == 4
    assert names(run_dir) == ["trials.csv", "trials.jsonl", "trials.parquet"]


@pytest.mark.parametrize("plot", [plot_convergence, plot_pareto])
def test_a_plot_failing_mid_write_keeps_the_old_picture(
    run_dir: Path, monkeypatch: pytest.MonkeyPatch, plot: Callable[..., Path]
) -> None:
    df = load_results(run_dir)
    path = run_dir / "plots" / "figure.png"
    assert plot(df, path) == path
    old = path.read_bytes()
    assert old.startswith(PNG)
    monkeypatch.setattr(files_module, "_write_all", half_then_full)
    with pytest.raises(OSError):
        plot(df.head(1), path)
    assert path.read_bytes() == old
    assert names(path.parent) == ["figure.png"]


def test_drawing_a_plan_failing_mid_write_keeps_the_old_picture(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pools = parse_pools("dtcm=4KiB")
    plan = plan_memory([Allocation("A", 1000, 0, 3), Allocation("B", 600, 1, 2)], pools, "greedy_by_size")
    path = tmp_path / "sub" / "plan.png"
    assert draw(plan, path) == path
    old = path.read_bytes()
    assert old.startswith(PNG)
    other = plan_memory([Allocation("C", 2000, 0, 1)], pools, "greedy_by_size")
    monkeypatch.setattr(files_module, "_write_all", half_then_full)
    with pytest.raises(OSError) as info:
        draw(other, path)
    assert info.value.errno == errno.ENOSPC
    assert path.read_bytes() == old
    assert names(path.parent) == ["plan.png"]
