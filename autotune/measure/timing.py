"""Wall-clock timing of a kernel: warm-up runs, then repeats, summarised robustly.

Kernels timed at the same moment on one machine share its DRAM, L3 and cores,
and each is slowed by the other (up to 40 % on the 2-core machines this runs
on). Two per-machine ``fcntl.flock`` files (one per user in the temporary
directory) keep measurements apart. Every process that measures through
:func:`~autotune.measure.measure` takes them - executor children, Ray workers
on that node, ``autotune check``:

- the *timing lock* (:func:`timing_lock` on :func:`lock_path`), exclusive:
  one process times at a time, while compiles still run side by side.
- the *cpu lock* (:func:`cpu_lock` on :func:`cpu_lock_path`), a reader-writer
  lock. A numba compile keeps one core busy for 1-5 s. A serial kernel timed
  meanwhile runs on the other core and is barely disturbed, but a kernel with
  a parallel loop runs on two threads, one per core, and loses one of them
  (one kernel measured 0.4 ms alone, 4-11 ms next to a compile). So
  ``measure`` holds the cpu lock *shared* while it builds, compiles, runs once
  and checks (any number of compiles run side by side), and the timing of a
  parallel kernel holds it *exclusive*: it waits for the compiles in flight
  and keeps new ones out. A serial kernel's timing does not take it.

Lock order: :func:`timing_section` takes the timing lock, then (parallel
kernel) the cpu lock exclusive. Nobody waits for the timing lock while holding
the cpu lock (``measure`` lets go of its shared hold before timing), so no
cycle of waits can form.

Starvation: ``flock`` gives a waiting exclusive holder no preference over new
shared holders. With many workers whose compiles overlap, a parallel timing
may wait for a long time, holding the timing lock, so every other timing waits
with it.

The locks keep this project's processes apart, not others: a timing also measures its
*contention* (:func:`contention`), the share of its wall time the kernel's threads spent runnable
but waiting for a CPU (Linux's per-thread scheduler statistics, :func:`run_delay_ns`). A timing
contended over :data:`CONTENDED` is taken again, as a noisy one is (:func:`time_candidate`), and
the share is recorded with the result, so that a trial timed while another program had the cores
is known as such.

The kernel releases a ``flock`` when its holder dies, so a killed or crashed
worker never blocks the others; a worker that hangs while holding a lock
(timing, or compiling under the shared cpu lock) holds it until its executor
kills it.

>>> with cpu_lock("shared"):
...     kernel.compile()
>>> with timing_section(kernel.parallel):
...     median, low, iqr = time_kernel(run, warmup=2, repeats=10)
"""

from __future__ import annotations

import fcntl
import math
import os
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Literal, NamedTuple

import numpy as np

from ..errors import MeasureError

__all__ = [
    "CONTENDED",
    "CHECK_RUN_OVER",
    "CUTOFF_RUNS",
    "ENOUGH_S",
    "LockMode",
    "MAX_BATCH",
    "MIN_SAMPLE_S",
    "Timing",
    "check_optional_positive",
    "contention",
    "cpu_lock",
    "is_contended",
    "cpu_lock_path",
    "lock_path",
    "noise",
    "over_at_once",
    "run_delay_ns",
    "summarise",
    "time_candidate",
    "time_kernel",
    "time_runs",
    "timing_lock",
    "timing_section",
]

LockMode = Literal["shared", "exclusive"]
"""How :func:`cpu_lock` holds its file: ``shared`` (many holders) or ``exclusive`` (one)."""

_FLOCK_OPS = {"shared": fcntl.LOCK_SH, "exclusive": fcntl.LOCK_EX}


def lock_path() -> Path:
    """The machine's timing lock file: ``<tempdir>/autotune-timing-<uid>.lock``."""
    return Path(tempfile.gettempdir()) / f"autotune-timing-{os.getuid()}.lock"


def cpu_lock_path() -> Path:
    """The machine's cpu lock file: ``<tempdir>/autotune-cpu-<uid>.lock``, next to :func:`lock_path`."""
    return Path(tempfile.gettempdir()) / f"autotune-cpu-{os.getuid()}.lock"


@contextmanager
def _flock(path: str | os.PathLike[str], mode: LockMode) -> Iterator[None]:
    """Hold a ``flock`` on ``path`` (created if missing) in ``mode`` for the ``with`` body.

    Each call opens its own file description, so two calls in one process
    contend like two processes. The kernel drops the lock when the description
    is closed, at the latest when the process dies.
    """
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, _FLOCK_OPS[mode])
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


@contextmanager
def timing_lock(enabled: bool = True, path: str | os.PathLike[str] | None = None) -> Iterator[None]:
    """Hold the per-machine timing lock (``path``, default :func:`lock_path`) for the ``with`` body.

    Blocks until no other process holds it. Each call opens its own file
    description, so two threads or two calls in one process exclude each other
    too (do not nest it). ``enabled=False`` does nothing.
    """
    if not enabled:
        yield
        return
    with _flock(path if path is not None else lock_path(), "exclusive"):
        yield


@contextmanager
def cpu_lock(
    mode: LockMode, enabled: bool = True, path: str | os.PathLike[str] | None = None
) -> Iterator[None]:
    """Hold the per-machine cpu lock (``path``, default :func:`cpu_lock_path`) in ``mode``.

    ``shared`` blocks while another holder has it exclusive; ``exclusive``
    blocks while anyone holds it. As with :func:`timing_lock`, every call is its
    own holder: never take it exclusive while this process holds it shared (it
    would wait for itself), and never wait for the timing lock while holding it
    (use :func:`timing_section`). ``enabled=False`` does nothing.
    """
    if mode not in _FLOCK_OPS:
        raise MeasureError(f"cpu_lock: mode must be 'shared' or 'exclusive', got {mode!r}")
    if not enabled:
        yield
        return
    with _flock(path if path is not None else cpu_lock_path(), mode):
        yield


@contextmanager
def timing_section(
    parallel: bool,
    enabled: bool = True,
    timing_path: str | os.PathLike[str] | None = None,
    cpu_path: str | os.PathLike[str] | None = None,
) -> Iterator[None]:
    """Hold the locks for timing a kernel: the timing lock, then the cpu lock exclusive if ``parallel``.

    Always in this order (see the module docstring). ``enabled=False`` takes
    neither; the paths default as in :func:`timing_lock` and :func:`cpu_lock`.
    """
    with timing_lock(enabled, timing_path), cpu_lock("exclusive", enabled and parallel, cpu_path):
        yield


def check_optional_positive(who: str, name: str, value: object) -> None:
    """Raise MeasureError naming ``who`` and ``name`` unless ``value`` is None or a finite number > 0."""
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < math.inf:
        raise MeasureError(f"{who}: {name} must be None or a finite number > 0, got {value!r}")


def _check_counts(who: str, warmup: int, repeats: int) -> None:
    if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 0:
        raise MeasureError(f"{who}: warmup must be an int >= 0, got {warmup!r}")
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise MeasureError(f"{who}: repeats must be an int >= 1, got {repeats!r}")


CUTOFF_RUNS = 3
"""The cutoff judges the fastest of this many first timed runs: a single run is at the mercy of the
scheduler (on the shared 2-core host one descheduled time slice turned runs of a 5 µs kernel into
12-16 ms), and three in a row slowed as much are rare."""


ENOUGH_S = 2.0
"""Timed runs that add up to this many seconds are enough: a timing stops there once it has
:data:`CUTOFF_RUNS` runs, and the warm-up stops after a run of a third of it. Repeats are there to
see past the scheduler's interruptions, which a run of seconds averages over by itself; a kernel of
seconds a run (an unscheduled chain: the default schedule that a run's end re-times in every
round beside its best) is then timed in three runs, not ``repeats``, and warmed up once."""


CHECK_RUN_OVER = 2.0
"""A kernel's checking run (its first call, made before the warm-up) that lasts longer than this many
times the cutoff and at least a third of :data:`ENOUGH_S` stops the candidate without a timed run
(:func:`over_at_once`). A run of a third of a second or more averages over the scheduler's
interruptions, as the warm-up rule assumes, and the factor covers the other worker's compile, which
the checking run may share the cores with: a parallel kernel's two threads then share one core."""


def over_at_once(run_ms: float, cutoff_ms: float | None, enough_s: float | None) -> bool:
    """Whether one run of ``run_ms`` shows by itself that its kernel is over ``cutoff_ms``: longer
    than :data:`CHECK_RUN_OVER` times the cutoff and than a third of ``enough_s`` (None: never, as no
    run is long enough to stand for the timing)."""
    if cutoff_ms is None or enough_s is None:
        return False
    return run_ms > CHECK_RUN_OVER * cutoff_ms and run_ms >= enough_s * 1000.0 / 3.0


MIN_SAMPLE_S = 0.01
"""A timed run of a kernel quicker than this is a batch of back-to-back calls that lasts about this
long (the number of calls from the last warm-up call's time), and its time per call is the run's
sample, as TVM's ``min_repeat_ms`` makes a repeat. Timed one call a run, a kernel of 0.1-1 ms gave
medians that moved by a median 4-15% from one re-measured round to the next, and 2-4% in batches of
10 ms (``experiments/sample_batch.py``, ``results/sample_batch_*.md``)."""
MAX_BATCH = 10_000
"""At most this many calls make one timed run."""


def time_runs(
    fn: Callable[[], object],
    warmup: int = 2,
    repeats: int = 10,
    cutoff_ms: float | None = None,
    enough_s: float | None = ENOUGH_S,
    min_sample_s: float | None = MIN_SAMPLE_S,
) -> tuple[np.ndarray, bool]:
    """Run ``fn`` ``warmup`` times untimed, then up to ``repeats`` times timed.

    Returns the timed runs in milliseconds per call and whether the cutoff stopped them. A timed
    run is one call timed by itself with ``time.perf_counter_ns``, or, when the last warm-up call
    took less than ``min_sample_s`` (:data:`MIN_SAMPLE_S`; None: never), a batch of calls that
    lasts about that long, timed together. With ``cutoff_ms``, when the fastest of the first
    :data:`CUTOFF_RUNS` timed runs (all of them, if ``repeats`` is smaller) is longer than it, the
    timing ends there (those samples, ``True``). Runs that add up to ``enough_s`` end the warm-up
    and the timing early (:data:`ENOUGH_S`; None: never). It takes no lock.
    """
    _check_counts("time_runs", warmup, repeats)
    check_optional_positive("time_runs", "cutoff_ms", cutoff_ms)
    check_optional_positive("time_runs", "enough_s", enough_s)
    check_optional_positive("time_runs", "min_sample_s", min_sample_s)
    enough_ns = math.inf if enough_s is None else enough_s * 1e9
    clock = time.perf_counter_ns
    last: int | None = None
    for _ in range(warmup):
        start = clock()
        fn()
        last = clock() - start
        if last >= enough_ns / 3:
            break
    batch = 1
    if last is not None and min_sample_s is not None:
        batch = max(1, min(MAX_BATCH, math.ceil(min_sample_s * 1e9 / max(last, 1))))
    samples = np.empty(repeats, dtype=np.float64)
    for k in range(repeats):
        start = clock()
        for _ in range(batch):
            fn()
        samples[k] = (clock() - start) / batch
        judged = k + 1 == min(CUTOFF_RUNS, repeats)
        if judged and cutoff_ms is not None and samples[: k + 1].min() / 1e6 > cutoff_ms:
            return samples[: k + 1] / 1e6, True
        if k + 1 >= CUTOFF_RUNS and samples[: k + 1].sum() * batch >= enough_ns:
            return samples[: k + 1] / 1e6, False
    return samples / 1e6, False


def summarise(samples: np.ndarray) -> tuple[float, float, float]:
    """``(median, min, iqr)`` of timed runs (``iqr`` = 75th - 25th percentile), in their unit."""
    q25, median, q75 = np.percentile(samples, [25, 50, 75])
    return float(median), float(samples.min()), float(q75 - q25)


def noise(median: float, low: float, iqr: float) -> float:
    """How far a timing's runs spread: the larger of ``(median - min) / median`` and
    ``iqr / median`` (0 for a zero median)."""
    return max(median - low, iqr) / median if median > 0 else 0.0


CONTENDED = 0.2
"""A timing is *contended* when the kernel's threads spent more than this share of its wall time
runnable but waiting for a CPU (:func:`contention`): another process had the cores it needed. A
kernel with a parallel loop needs every core, and one that waits for a time slice at every call
gives runs slow and alike, which their spread does not show."""


def is_contended(share: float | None) -> bool:
    """Whether a timing's :func:`contention` ``share`` is over :data:`CONTENDED` (False when not known)."""
    return share is not None and share > CONTENDED


def run_delay_ns() -> int | None:
    """Nanoseconds the threads of this process have spent runnable but waiting for a CPU, summed
    (the second field of Linux's ``/proc/self/task/<tid>/schedstat``); None where it is not
    reported. A thread that ends between two readings takes its share with it."""
    try:
        tids = os.listdir("/proc/self/task")
    except OSError:
        return None
    total, read = 0, False
    for tid in tids:
        try:
            with open(f"/proc/self/task/{tid}/schedstat", "rb") as f:
                total += int(f.read().split()[1])
            read = True
        except (OSError, ValueError, IndexError):
            continue  # a thread that ended meanwhile, or a kernel without scheduler statistics
    return total if read else None


def contention(waited_ns: int | None, wall_s: float, threads: int) -> float | None:
    """The share of ``threads`` x ``wall_s`` that the threads spent waiting for a CPU (``waited_ns``,
    a difference of :func:`run_delay_ns`), at most 1; None when not known."""
    if waited_ns is None or wall_s <= 0:
        return None
    return min(1.0, max(0, waited_ns) / 1e9 / (max(1, threads) * wall_s))


class Timing(NamedTuple):
    """What :func:`time_candidate` found: the figures in milliseconds, how many timed runs they
    summarise, whether the cutoff stopped the timing after its first runs, whether the candidate
    was timed a second time because the first timing was noisy or contended, and the
    :func:`contention` of the timing kept (None: not known)."""

    median_ms: float
    min_ms: float
    iqr_ms: float
    runs: int
    stopped: bool = False
    retimed: bool = False
    contended: float | None = None


def _timed(
    fn: Callable[[], object],
    warmup: int,
    repeats: int,
    cutoff_ms: float | None,
    threads: int,
    enough_s: float | None,
    min_sample_s: float | None,
) -> tuple[np.ndarray, bool, float, float | None]:
    """:func:`time_runs` with its wall seconds (warm-up included) and :func:`contention`."""
    before, start = run_delay_ns(), time.perf_counter()
    samples, stopped = time_runs(fn, warmup, repeats, cutoff_ms, enough_s, min_sample_s)
    took, after = time.perf_counter() - start, run_delay_ns()
    waited = None if before is None or after is None else after - before
    return samples, stopped, took, contention(waited, took, threads)


def time_candidate(
    fn: Callable[[], object],
    warmup: int = 2,
    repeats: int = 10,
    cutoff_ms: float | None = None,
    retime_noise: float | None = None,
    budget_s: float | None = None,
    threads: int = 1,
    enough_s: float | None = ENOUGH_S,
    min_sample_s: float | None = MIN_SAMPLE_S,
) -> Timing:
    """Time ``fn`` as :func:`time_runs` does (``cutoff_ms`` may stop it after its first timed runs),
    and measure its :func:`contention` (``threads``: the threads ``fn`` runs on); then, with
    ``retime_noise``, a full timing whose :func:`noise` exceeds it, or that is contended (over
    :data:`CONTENDED`), is timed once more (warm-up and repeats, no cutoff) and the better of the
    two is kept (``retimed``): the one not contended, else the less noisy. With ``budget_s``, the
    seconds all the runs may take, it is re-timed only if the first timing (warm-up included) took
    at most half of that. ``enough_s`` and ``min_sample_s`` as in :func:`time_runs`. It takes no lock."""
    check_optional_positive("time_candidate", "retime_noise", retime_noise)
    check_optional_positive("time_candidate", "budget_s", budget_s)
    samples, stopped, took, contended = _timed(fn, warmup, repeats, cutoff_ms, threads, enough_s, min_sample_s)
    figures = summarise(samples)
    fits = budget_s is None or 2 * took <= budget_s
    if stopped or retime_noise is None or not fits:
        return Timing(*figures, len(samples), stopped, contended=contended)
    if noise(*figures) <= retime_noise and not is_contended(contended):
        return Timing(*figures, len(samples), contended=contended)
    again, _, _, contended_again = _timed(fn, warmup, repeats, None, threads, enough_s, min_sample_s)
    first, second = (figures, contended, len(samples)), (summarise(again), contended_again, len(again))
    kept = min(first, second, key=lambda t: (is_contended(t[1]), noise(*t[0])))
    return Timing(*kept[0], kept[2], retimed=True, contended=kept[1])


def time_kernel(fn: Callable[[], object], warmup: int = 2, repeats: int = 10) -> tuple[float, float, float]:
    """Run ``fn`` ``warmup`` times untimed, then ``repeats`` times timed.

    Returns ``(median, min, iqr)`` in milliseconds (``iqr`` = 75th - 25th
    percentile), each run timed by itself with ``time.perf_counter_ns``. It
    takes no lock: callers that share a machine wrap it in :func:`timing_section`.
    """
    _check_counts("time_kernel", warmup, repeats)
    samples, _ = time_runs(fn, warmup, repeats, enough_s=None, min_sample_s=None)
    return summarise(samples)
