"""TrialRecord validation and JSON round trip; the trial log's durable append, torn-line recovery, errors.

Whole-file writes (``write_atomic``) are tested in ``tests/test_files.py``."""

from __future__ import annotations

import errno
import json
import math
import os
from pathlib import Path

import pytest

from autotune.errors import AutotuneError
from autotune.measure.result import MeasureResult
from autotune.search import log as log_module
from autotune.search.log import TrialLog, check_writable, load
from autotune.search.records import TrialRecord, trace_key

TRACE = '{"version": 1, "steps": [{"op": "split", "args": {"loop": "y", "factors": [null, 4]}}]}'


def ok_record(trial: int = 0, **fields: object) -> TrialRecord:
    values: dict[str, object] = {
        "trial": trial,
        "round": trial // 2,
        "knobs": (("tile", 4), ("rolling", True), ("pool", "dtcm"), ("ratio", 0.5), ("none", None)),
        "status": "ok",
        "median_ms": 0.41,
        "min_ms": 0.39,
        "iqr_ms": 0.01,
        "max_abs_err": 0.0,
        "peak_bytes": 3456,
        "pool_bytes": (("dtcm", 3456), ("sram", 0)),
        "predicted_ms": 0.5,
        "compile_s": 0.8,
        "node": "local",
        "trace": TRACE,
        **fields,
    }
    return TrialRecord(**values)  # type: ignore[arg-type]


def failed_record(trial: int, status: str = "crashed") -> TrialRecord:
    return TrialRecord(trial, 0, (("tile", 3),), status, reason="the worker died: exit code -11", trace=TRACE)


# ---------------------------------------------------------------- records


def test_record_json_round_trip_keeps_every_field() -> None:
    rec = ok_record()
    data = rec.to_json()
    assert data["knobs"] == {"tile": 4, "rolling": True, "pool": "dtcm", "ratio": 0.5, "none": None}
    assert data["pool_bytes"] == {"dtcm": 3456, "sram": 0}
    assert TrialRecord.from_json(json.loads(json.dumps(data))) == rec
    wrong = TrialRecord(1, 0, (), "wrong", reason="max_abs_err nan", max_abs_err=math.nan, trace=TRACE)
    back = TrialRecord.from_json(json.loads(json.dumps(wrong.to_json())))
    assert back.status == "wrong" and math.isnan(back.max_abs_err)  # type: ignore[arg-type]


def test_how_a_trial_was_picked_is_written_only_when_known() -> None:
    assert "picked" not in ok_record().to_json()  # and a log written before it reads back the same
    picked = ok_record(picked="random")
    assert picked.to_json()["picked"] == "random"
    assert TrialRecord.from_json(json.loads(json.dumps(picked.to_json()))) == picked


def test_record_key_is_the_trace_identity() -> None:
    same = json.dumps(json.loads(TRACE), indent=2, sort_keys=True)
    assert ok_record(trace=same).key == ok_record().key == trace_key(TRACE)
    assert ok_record(trace=TRACE.replace("4]", "8]")).key != ok_record().key
    assert len(ok_record().key) == 64


def test_record_from_measure() -> None:
    result = MeasureResult("ok", 0.0, 0.5, 0.4, 0.02, 10, 0.9, 2304)
    rec = TrialRecord.from_measure(7, 2, (("tile", 4),), result, node="n1", trace=TRACE, peak_bytes=2304)
    assert (rec.status, rec.reason, rec.node, rec.peak_bytes) == ("ok", "", "n1", 2304)
    assert (rec.median_ms, rec.min_ms, rec.compile_s) == (0.5, 0.4, 0.9)
    wrong = TrialRecord.from_measure(8, 2, (), MeasureResult("wrong", max_abs_err=3.0), trace=TRACE)
    assert wrong.status == "wrong" and wrong.reason == "max_abs_err 3"
    crashed = TrialRecord.from_measure(9, 2, (), MeasureResult.failure("crashed", "SIGSEGV"), trace=TRACE)
    assert crashed.reason == "SIGSEGV" and crashed.median_ms is None


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"status": "fast"}, "status must be one of"),
        ({"trial": -1}, "trial must be an int >= 0"),
        ({"round": True}, "round must be an int >= 0"),
        ({"knobs": (("tile", [4]),)}, r"knobs\['tile'\] must be a JSON scalar"),
        ({"knobs": (("a", 1), ("a", 2))}, "knobs names must be distinct"),
        ({"knobs": [("a", 1)]}, "knobs must be a tuple"),
        ({"pool_bytes": (("dtcm", -1),)}, r"pool_bytes\['dtcm'\] must be an int >= 0"),
        ({"median_ms": None}, "an 'ok' trial needs median_ms"),
        ({"min_ms": 0.5}, "min_ms 0.5 exceeds median_ms 0.41"),
        ({"median_ms": math.inf}, "median_ms must be a finite number"),
        ({"compile_s": -1.0}, "compile_s must be >= 0"),
        ({"peak_bytes": 1.5}, "peak_bytes must be an int >= 0"),
        ({"node": None}, "node must be a string"),
        ({"status": "crashed", "reason": "x"}, "a 'crashed' trial is not timed"),
        ({"picked": "luck"}, r"picked must be one of \('model', 'random', 'every'\) or empty, got 'luck'"),
    ],
)
def test_record_validation(fields: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ok_record(**fields)


def test_failed_record_needs_a_reason() -> None:
    with pytest.raises(ValueError, match="a 'timeout' trial needs a reason"):
        TrialRecord(0, 0, (), "timeout")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d.update(colour="red"), "unknown field"),
        (lambda d: d.pop("status"), "missing field"),
        (lambda d: d.update(knobs=[["tile", 4]]), "knobs must be a JSON object"),
    ],
)
def test_record_from_json_names_the_problem(change, message: str) -> None:  # type: ignore[no-untyped-def]
    data = ok_record().to_json()
    change(data)
    with pytest.raises(ValueError, match=message):
        TrialRecord.from_json(data)


# ---------------------------------------------------------------- the log


def test_log_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "trials.jsonl"
    records = [ok_record(0), failed_record(1), failed_record(2, "invalid"), ok_record(3, node="nöde")]
    with TrialLog(path) as log:
        for rec in records:
            log.append(rec)
        assert log.records == tuple(records)
    assert load(path) == records == TrialLog.load(path)
    lines = path.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 4 and all(json.loads(line)["trial"] == i for i, line in enumerate(lines))
    with TrialLog(path) as log:  # reopening continues the file
        assert log.records == tuple(records)
        log.append(ok_record(4))
    assert [r.trial for r in load(path)] == [0, 1, 2, 3, 4]


def test_append_is_flushed_and_fsynced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    synced: list[int] = []
    real_fsync = os.fsync

    def spy(fd: int) -> None:
        synced.append(fd)
        real_fsync(fd)

    path = tmp_path / "trials.jsonl"
    with TrialLog(path) as log:
        monkeypatch.setattr(log_module.os, "fsync", spy)
        log.append(ok_record(0))
        assert synced == [log._file.fileno()]
        assert load(path) == [ok_record(0)]  # visible to another reader before close
        log.append(failed_record(1))
        assert len(synced) == 2


def test_torn_last_line_is_dropped_and_truncated(tmp_path: Path) -> None:
    path = tmp_path / "trials.jsonl"
    with TrialLog(path) as log:
        log.append(ok_record(0))
        log.append(failed_record(1))
    whole = path.read_bytes()
    torn = json.dumps(ok_record(2).to_json()).encode()[:57]  # the driver was killed mid-write
    path.write_bytes(whole + torn)
    assert [r.trial for r in load(path)] == [0, 1]
    assert path.read_bytes() == whole + torn  # reading does not modify the file
    with TrialLog(path) as log:
        assert log.dropped == torn and [r.trial for r in log.records] == [0, 1]
        assert path.read_bytes() == whole
        log.append(ok_record(2))
    assert [r.trial for r in load(path)] == [0, 1, 2]


def test_complete_last_record_without_newline_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "trials.jsonl"
    path.write_text(json.dumps(ok_record(0).to_json()), encoding="utf-8")
    assert load(path) == [ok_record(0)]
    with TrialLog(path) as log:
        assert log.dropped == b""
        log.append(failed_record(1))
    assert [r.trial for r in load(path)] == [0, 1]


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ("{not json", r"trials.jsonl:2: not a JSON record"),
        ('{"trial": 1}', r"trials.jsonl:2: not a valid trial record: TrialRecord: missing field"),
        (
            '{"trial": 1, "round": 0, "knobs": {}, "status": "lost", "reason": "x"}',
            r"trials.jsonl:2: .*status",
        ),
    ],
)
def test_malformed_line_names_file_and_line(tmp_path: Path, bad: str, message: str) -> None:
    path = tmp_path / "trials.jsonl"
    good = json.dumps(ok_record(0).to_json())
    path.write_text(f"{good}\n{bad}\n{good}\n", encoding="utf-8")
    with pytest.raises(AutotuneError, match=message):
        load(path)
    with pytest.raises(AutotuneError, match=message):
        TrialLog(path)


def test_load_missing_log(tmp_path: Path) -> None:
    with pytest.raises(AutotuneError, match="no trial log at"):
        load(tmp_path / "absent.jsonl")


# ---------------------------------------------------------------- the output directory


def test_check_writable_creates_the_directory(tmp_path: Path) -> None:
    out = check_writable(tmp_path / "a" / "b")
    assert out.is_dir() and list(out.iterdir()) == []  # the probe is removed


def test_check_writable_fails_when_the_directory_cannot_be_created(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    with pytest.raises(
        AutotuneError, match=r"cannot create the output directory .*file/out: Not a directory"
    ):
        check_writable(tmp_path / "file" / "out")


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes to read-only directories")
def test_check_writable_fails_on_a_read_only_directory(tmp_path: Path) -> None:
    out = tmp_path / "ro"
    out.mkdir()
    out.chmod(0o500)
    try:
        with pytest.raises(AutotuneError, match=r"cannot write to the output directory .*Permission denied"):
            check_writable(out)
    finally:
        out.chmod(0o700)


def test_check_writable_reports_a_full_disk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def full(path: Path, size: int) -> None:
        path.write_bytes(b"")
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(log_module, "_write_probe", full)
    with pytest.raises(AutotuneError, match=r"cannot write to the output directory .*: the disk is full"):
        check_writable(tmp_path / "out")
    assert list((tmp_path / "out").iterdir()) == []
