"""Cheaper, steadier timings: a cutoff stops a slow candidate after its first timed runs (checked
all the same; judged on the fastest of them), or at its checking run when that run alone is long and
well over, and a noisy timing is timed once more, keeping the steadier of the two.

Runs are made slow or fast with ``time.sleep`` (a lower bound on a run's time) and no-ops, so
the outcomes do not depend on how busy the machine is; nothing asserts how long anything takes.
"""

from __future__ import annotations

import math
import time

import numpy as np
import pytest
from measure_funcs import N, axpy, axpy_reference

from autotune.errors import MeasureError
from autotune.measure import measure
from autotune.measure.task import MeasureTask
from autotune.measure.timing import (
    CHECK_RUN_OVER,
    CUTOFF_RUNS,
    MAX_BATCH,
    noise,
    over_at_once,
    time_candidate,
    time_runs,
)

SLOW_S = 0.02  # a run that sleeps this long takes at least 20 ms


class Runs:
    """A kernel stand-in: call ``k`` sleeps ``pattern(k)`` seconds (0: returns at once)."""

    def __init__(self, pattern: object) -> None:
        self.pattern, self.calls = pattern, 0

    def __call__(self) -> None:
        seconds = self.pattern(self.calls)  # type: ignore[operator]
        self.calls += 1
        if seconds:
            time.sleep(seconds)


def test_first_timed_runs_all_over_the_cutoff_end_the_timing() -> None:
    fn = Runs(lambda k: SLOW_S)
    samples, stopped = time_runs(fn, warmup=2, repeats=10, cutoff_ms=1.0)
    assert CUTOFF_RUNS == 3
    assert stopped and len(samples) == CUTOFF_RUNS and samples.min() >= SLOW_S * 1000
    assert fn.calls == 2 + CUTOFF_RUNS  # the warm-up runs, then the judged timed runs


def test_one_slow_first_run_does_not_stop_the_timing() -> None:
    """A first run slowed by the scheduler: the fastest of the judged runs is under the cutoff."""
    fn = Runs(lambda k: SLOW_S if k == 1 else 0)  # the warm-up, then a slow first timed run
    samples, stopped = time_runs(fn, warmup=1, repeats=6, cutoff_ms=SLOW_S * 1000 / 2, min_sample_s=None)
    assert not stopped and len(samples) == 6 and samples[0] >= SLOW_S * 1000


def test_fewer_repeats_than_judged_runs_are_judged_all() -> None:
    fn = Runs(lambda k: SLOW_S)
    samples, stopped = time_runs(fn, warmup=0, repeats=2, cutoff_ms=1.0)
    assert stopped and len(samples) == 2 and fn.calls == 2


def test_under_the_cutoff_every_repeat_runs() -> None:
    fn = Runs(lambda k: 0)
    samples, stopped = time_runs(fn, warmup=1, repeats=6, cutoff_ms=1e9, min_sample_s=None)
    assert not stopped and len(samples) == 6 and fn.calls == 7
    samples, stopped = time_runs(Runs(lambda k: SLOW_S), warmup=0, repeats=2)  # no cutoff
    assert not stopped and len(samples) == 2


def test_only_the_first_timed_runs_are_compared_with_the_cutoff() -> None:
    """Warm-up runs are not timed, and slow runs after the judged ones do not stop the timing."""
    slow = {0, *range(1 + CUTOFF_RUNS, 1 + CUTOFF_RUNS + 2)}  # a slow warm-up, slow runs after the judged ones
    fn = Runs(lambda k: SLOW_S if k in slow else 0)
    samples, stopped = time_runs(fn, warmup=1, repeats=CUTOFF_RUNS + 3, cutoff_ms=SLOW_S * 1000 / 2)
    assert not stopped and len(samples) == CUTOFF_RUNS + 3 and samples[CUTOFF_RUNS] >= SLOW_S * 1000


def test_a_quick_kernel_is_timed_in_batches_of_calls() -> None:
    # the warm-up call takes about 1 ms: a batch of about min_sample_s / 1 ms calls per timed run
    fn = Runs(lambda k: 0.001)
    samples, stopped = time_runs(fn, warmup=1, repeats=3, min_sample_s=0.004)
    batch = (fn.calls - 1) // 3
    assert not stopped and len(samples) == 3 and fn.calls == 1 + 3 * batch and 1 <= batch <= 4
    assert all(1.0 <= s < 20.0 for s in samples)  # milliseconds per call, not per batch
    fn = Runs(lambda k: 0)  # no warm-up: nothing says how long a call takes, one call a run
    samples, _ = time_runs(fn, warmup=0, repeats=3, min_sample_s=0.004)
    assert len(samples) == 3 and fn.calls == 3
    fn = Runs(lambda k: 0)  # instant calls: at most MAX_BATCH a run
    time_runs(fn, warmup=1, repeats=2, min_sample_s=1.0)
    assert fn.calls == 1 + 2 * MAX_BATCH


def test_long_runs_end_the_warm_up_and_the_timing_early() -> None:
    # runs of SLOW_S: one warm-up run is a third of enough_s, three timed runs add up to it
    fn = Runs(lambda k: SLOW_S)
    samples, stopped = time_runs(fn, warmup=2, repeats=10, enough_s=2.5 * SLOW_S)
    assert not stopped and len(samples) == CUTOFF_RUNS and fn.calls == 1 + CUTOFF_RUNS
    fn = Runs(lambda k: SLOW_S)  # short against enough_s: every warm-up and every repeat
    samples, _ = time_runs(fn, warmup=2, repeats=4, enough_s=100.0)
    assert len(samples) == 4 and fn.calls == 6
    fn = Runs(lambda k: SLOW_S)  # None: the counts exactly
    samples, _ = time_runs(fn, warmup=2, repeats=4, enough_s=None)
    assert len(samples) == 4 and fn.calls == 6


def test_a_noisy_timing_is_timed_again_and_the_steadier_one_kept() -> None:
    repeats = 4
    # first timing: fast and slow runs in turn (noise about 1); second timing: slow runs only
    fn = Runs(lambda k: SLOW_S if k >= repeats or k % 2 else 0)
    timing = time_candidate(fn, warmup=0, repeats=repeats, retime_noise=0.5)
    assert timing.retimed and not timing.stopped and timing.runs == repeats
    assert fn.calls == 2 * repeats
    assert timing.min_ms >= SLOW_S * 1000  # the second, steadier timing
    assert noise(timing.median_ms, timing.min_ms, timing.iqr_ms) < noise(SLOW_S * 500, 0.0, 0.0)


def test_a_steady_timing_or_a_stopped_one_is_not_timed_again() -> None:
    fn = Runs(lambda k: SLOW_S)
    assert not time_candidate(fn, warmup=0, repeats=3, retime_noise=0.5).retimed and fn.calls == 3
    fn = Runs(lambda k: SLOW_S if k % 2 else 0)
    assert not time_candidate(fn, warmup=0, repeats=4).retimed and fn.calls == 4  # no threshold
    fn = Runs(lambda k: SLOW_S)
    timing = time_candidate(fn, warmup=0, repeats=4, cutoff_ms=1.0, retime_noise=1e-9)
    assert timing.stopped and not timing.retimed and timing.runs == CUTOFF_RUNS and fn.calls == CUTOFF_RUNS


def test_a_retime_that_would_not_fit_the_budget_is_skipped() -> None:
    fn = Runs(lambda k: SLOW_S if k % 2 else 0)
    timing = time_candidate(fn, warmup=0, repeats=4, retime_noise=0.5, budget_s=SLOW_S)
    assert not timing.retimed and fn.calls == 4  # the first timing alone took 2 x SLOW_S


@pytest.mark.parametrize("bad", [0, -1.0, math.nan, math.inf, True, "3"])
def test_the_thresholds_are_positive_numbers(bad: object) -> None:
    with pytest.raises(MeasureError, match=r"time_runs: cutoff_ms must be None or a finite number > 0"):
        time_runs(lambda: None, 0, 1, bad)  # type: ignore[arg-type]
    with pytest.raises(MeasureError, match=r"time_candidate: retime_noise must be None"):
        time_candidate(lambda: None, 0, 1, retime_noise=bad)  # type: ignore[arg-type]
    with pytest.raises(MeasureError, match=r"measure: cutoff_ms must be None"):
        measure(axpy(), axpy_reference, [], cutoff_ms=bad)  # type: ignore[arg-type]
    for field in ("cutoff_ms", "retime_noise"):
        with pytest.raises(MeasureError, match=rf"MeasureTask: {field} must be None or a finite number > 0"):
            MeasureTask("w", (), None, "{}", (), **{field: bad})  # type: ignore[arg-type]


def _inputs() -> list[np.ndarray]:
    return [np.random.default_rng(0).standard_normal(N).astype(np.float32)]


@pytest.mark.slow
def test_a_kernel_over_the_cutoff_is_checked_timed_in_its_first_runs_and_not_ok() -> None:
    result = measure(axpy(), axpy_reference, _inputs(), warmup=1, repeats=5, cutoff_ms=1e-9)
    assert result.status == "cutoff" and not result.ok, result.error
    assert result.max_abs_err == 0.0  # checked against the reference like every candidate
    assert result.repeats == CUTOFF_RUNS and result.min_ms <= result.median_ms
    assert result.error.startswith(
        f"fastest of the first {CUTOFF_RUNS} timed runs {result.min_ms:.4g} ms over the cutoff 1e-09 ms"
    )
    assert not result.retimed


def test_one_run_stands_for_the_timing_only_when_long_and_well_over_the_cutoff() -> None:
    assert CHECK_RUN_OVER == 2.0
    assert over_at_once(700.0, cutoff_ms=300.0, enough_s=2.0)  # over 2 x 300 ms and a third of 2 s
    assert not over_at_once(700.0, cutoff_ms=400.0, enough_s=2.0)  # under twice the cutoff
    assert not over_at_once(600.0, cutoff_ms=1.0, enough_s=2.0)  # too short to average the scheduler
    assert not over_at_once(1e9, cutoff_ms=None, enough_s=2.0)
    assert not over_at_once(1e9, cutoff_ms=1.0, enough_s=None)  # exact counts asked: always timed


@pytest.mark.slow
def test_a_checking_run_well_over_the_cutoff_is_the_kernels_one_timing() -> None:
    """With ``enough_s`` so short that any run stands for a timing, the checking run decides."""
    result = measure(axpy(), axpy_reference, _inputs(), warmup=1, repeats=5, cutoff_ms=1e-9, enough_s=1e-9)
    assert result.status == "cutoff" and result.max_abs_err == 0.0  # checked all the same
    assert result.repeats == 1 and result.median_ms == result.min_ms > 0 and result.iqr_ms == 0.0
    assert result.error == (
        f"its checking run took {result.median_ms:.4g} ms, over 2 times the cutoff 1e-09 ms; not timed"
    )
    wrong = measure(axpy(offset=1.5), axpy_reference, _inputs(), cutoff_ms=1e-9, enough_s=1e-9)
    assert wrong.status == "wrong"  # the checking run's verdict comes first


@pytest.mark.slow
def test_the_cutoff_never_hides_a_wrong_kernel() -> None:
    result = measure(axpy(offset=1.5), axpy_reference, _inputs(), cutoff_ms=1e-9)
    assert result.status == "wrong" and result.max_abs_err == pytest.approx(0.5)


@pytest.mark.slow
def test_a_kernel_under_the_cutoff_is_timed_in_full() -> None:
    # no re-timing: on a busy machine a contended timing is re-timed whatever its noise
    result = measure(axpy(), axpy_reference, _inputs(), warmup=1, repeats=5, cutoff_ms=1e9)
    assert result.status == "ok" and result.repeats == 5 and result.error == ""
