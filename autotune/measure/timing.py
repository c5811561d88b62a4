"""Wall-clock timing of a kernel: warm-up runs, then repeats, summarised robustly.

Kernels timed at the same moment on one machine share its DRAM, L3 and cores,
and each is slowed by the other (up to 40 % on the 2-core machines this runs
on). :func:`timing_lock` serialises the timed part per machine: an exclusive
``fcntl.flock`` on :func:`lock_path` (one file per user in the temporary
directory), taken by every process that times through
:func:`~autotune.measure.measure` - executor children, Ray workers on that
node, ``autotune check`` - while compiles still run side by side. The kernel
releases a ``flock`` when its holder dies, so a killed or crashed worker never
blocks the others; a worker that hangs *while timing* holds it until its
executor kills it.

>>> with timing_lock():
...     median, low, iqr = time_kernel(run, warmup=2, repeats=10)
"""

from __future__ import annotations

import fcntl
import os
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from ..errors import MeasureError

__all__ = ["lock_path", "time_kernel", "timing_lock"]


def lock_path() -> Path:
    """The machine's timing lock file: ``<tempdir>/autotune-timing-<uid>.lock``."""
    return Path(tempfile.gettempdir()) / f"autotune-timing-{os.getuid()}.lock"


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
    fd = os.open(path if path is not None else lock_path(), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def time_kernel(fn: Callable[[], object], warmup: int = 2, repeats: int = 10) -> tuple[float, float, float]:
    """Run ``fn`` ``warmup`` times untimed, then ``repeats`` times timed.

    Returns ``(median, min, iqr)`` in milliseconds (``iqr`` = 75th - 25th
    percentile), each run timed by itself with ``time.perf_counter_ns``. It
    takes no lock: callers that share a machine wrap it in :func:`timing_lock`.
    """
    if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 0:
        raise MeasureError(f"time_kernel: warmup must be an int >= 0, got {warmup!r}")
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise MeasureError(f"time_kernel: repeats must be an int >= 1, got {repeats!r}")
    for _ in range(warmup):
        fn()
    samples = np.empty(repeats, dtype=np.float64)
    clock = time.perf_counter_ns
    for k in range(repeats):
        start = clock()
        fn()
        samples[k] = clock() - start
    samples /= 1e6
    q25, median, q75 = np.percentile(samples, [25, 50, 75])
    return float(median), float(samples.min()), float(q75 - q25)
