"""Timings taken while another process had the cores a kernel needed: measured from the threads'
wait for a CPU (Linux's per-thread scheduler statistics), re-timed, recorded and reported."""

from __future__ import annotations

import math
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from autotune.errors import MeasureError
from autotune.measure import timing
from autotune.measure.result import MeasureResult
from autotune.measure.timing import CONTENDED, contention, run_delay_ns, time_candidate
from autotune.report import load_results
from autotune.report.analysis import contended
from autotune.report.document import _noise_lines
from autotune.search.best import figures_of
from autotune.search.log import TrialLog
from autotune.search.records import TrialRecord


def test_contention_is_the_waited_share_of_the_threads_wall_time() -> None:
    assert contention(0, 1.0, 1) == 0.0
    assert contention(500_000_000, 1.0, 2) == 0.25  # 0.5 s waited of 2 threads x 1 s
    assert contention(3_000_000_000, 1.0, 2) == 1.0  # at most all of it
    assert contention(-5, 1.0, 1) == 0.0  # a thread that ended took its share with it
    assert contention(None, 1.0, 1) is None and contention(10, 0.0, 1) is None


class Delays:
    """``run_delay_ns`` stand-in: the readings in turn (before and after each timing)."""

    def __init__(self, *readings: int) -> None:
        self.readings: Iterator[int] = iter(readings)

    def __call__(self) -> int:
        return next(self.readings)


def steady() -> None:
    time.sleep(0.002)


def test_a_contended_timing_is_timed_again_and_the_other_one_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    # the first timing's thread waited far longer than the timing took; the second did not wait
    monkeypatch.setattr(timing, "run_delay_ns", Delays(0, 10**12, 10**12, 10**12))
    t = time_candidate(steady, warmup=0, repeats=3, retime_noise=10.0)
    assert t.retimed and t.contended == 0.0 and t.runs == 3


def test_a_re_timing_stopped_early_counts_its_own_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    # the first timing is contended and its runs are short: all 4; the second's are long: it stops at 3
    monkeypatch.setattr(timing, "run_delay_ns", Delays(0, 10**12, 10**12, 10**12))
    calls: list[int] = []

    def fn() -> None:
        calls.append(1)
        if len(calls) > 4:
            time.sleep(0.02)

    t = time_candidate(fn, warmup=0, repeats=4, retime_noise=10.0, enough_s=0.05)
    assert t.retimed and t.contended == 0.0 and t.runs == timing.CUTOFF_RUNS and len(calls) == 4 + 3


def test_contended_twice_keeps_a_contended_timing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(timing, "run_delay_ns", Delays(0, 10**12, 10**12, 2 * 10**12))
    t = time_candidate(steady, warmup=0, repeats=3, retime_noise=10.0)
    assert t.retimed and t.contended == 1.0


def test_without_a_retime_threshold_the_contention_is_recorded_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(timing, "run_delay_ns", Delays(0, 10**12))
    t = time_candidate(steady, warmup=0, repeats=3)
    assert not t.retimed and t.contended == 1.0


def test_unknown_contention_does_not_retime(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(timing, "run_delay_ns", lambda: None)
    t = time_candidate(steady, warmup=0, repeats=3, retime_noise=10.0)
    assert not t.retimed and t.contended is None


def spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


@pytest.mark.skipif(run_delay_ns() is None, reason="no per-thread scheduler statistics here")
def test_a_thread_sharing_its_cpu_with_two_spinning_processes_is_contended() -> None:
    """Three runnable tasks on one CPU: this thread runs about a third of the time and waits the rest."""
    cpu = min(os.sched_getaffinity(0))
    mask = os.sched_getaffinity(0)
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    try:
        for p in spinners:
            os.sched_setaffinity(p.pid, {cpu})
        os.sched_setaffinity(0, {cpu})
        t = time_candidate(lambda: spin(0.05), warmup=0, repeats=6)
    finally:
        os.sched_setaffinity(0, mask)
        for p in spinners:
            p.kill()
            p.wait()
    assert t.contended is not None and t.contended > CONTENDED


def test_results_and_records_carry_the_contention(tmp_path: Path) -> None:
    result = MeasureResult("ok", 0.0, 2.0, 1.9, 0.1, 10, contended=0.5)
    record = TrialRecord.from_measure(0, 0, (("tile", 1),), result, peak_bytes=10)
    plain = TrialRecord(1, 0, (("tile", 2),), "ok", median_ms=3.0, min_ms=2.9, iqr_ms=0.1, peak_bytes=20)
    assert record.contended == 0.5 and record.to_json()["contended"] == 0.5
    assert "contended" not in plain.to_json()  # written only when known
    assert TrialRecord.from_json(record.to_json()) == record
    run = tmp_path / "run"
    run.mkdir()
    with TrialLog(run / "trials.jsonl") as log:
        log.append(record)
        log.append(plain)
    df = load_results(run)
    assert df["contended"].tolist()[0] == 0.5 and math.isnan(df["contended"].tolist()[1])
    assert contended(df).tolist() == [True, False]
    lines = _noise_lines(df)
    assert lines[2] == (
        "Contended trials: 1 of 2 ok trials were timed while another process had the cores they needed "
        "(their threads waited for a CPU more than 20% of the time, in both timings when re-timed); "
        "their latency is a busy machine's. Trials: 0."
    )
    assert len(_noise_lines(df.assign(contended=float("nan")))) == 2  # no line when none is known


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"contended": 1.5}, "contended must be a share from 0 to 1 of a timed result"),
        ({"contended": -0.1}, "contended must be >= 0"),
        ({"contended": True}, "contended must be a number"),
    ],
)
def test_bad_contention_in_a_result_is_refused(fields: dict[str, object], message: str) -> None:
    with pytest.raises(MeasureError, match=message):
        MeasureResult("ok", 0.0, 2.0, 1.9, 0.1, 10, **fields)  # type: ignore[arg-type]


def test_an_untimed_result_or_record_has_no_contention() -> None:
    with pytest.raises(MeasureError, match="contended must be a share from 0 to 1 of a timed result"):
        MeasureResult("wrong", 1.0, contended=0.1)
    with pytest.raises(ValueError, match="contended must be a share from 0 to 1 of a timed trial"):
        TrialRecord(0, 0, (), "invalid", reason="no schedule", contended=0.1)


def test_a_re_measured_schedule_reports_its_most_contended_round() -> None:
    rounds = [MeasureResult("ok", 0.0, 2.0, 1.9, 0.1, 10, contended=c) for c in (0.0, 0.4, None)]
    assert figures_of(rounds, 10, ()).contended == 0.4
    assert figures_of(rounds[2:], 10, ()).contended is None


def test_a_re_measured_schedule_leaves_out_its_contended_rounds() -> None:
    rounds = [MeasureResult("ok", 0.0, ms, ms, 0.1, 10, contended=c) for ms, c in ((2.0, 0.0), (9.0, 0.9), (3.0, None))]
    figures = figures_of(rounds, 10, ())
    assert (figures.median_ms, figures.min_ms, figures.contended) == (2.5, 2.0, 0.9)
    busy = [MeasureResult("ok", 0.0, ms, ms, 0.1, 10, contended=0.5) for ms in (4.0, 6.0, 8.0)]
    assert figures_of(busy, 10, ()).median_ms == 6.0  # all contended: all of them
