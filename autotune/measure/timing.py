"""Wall-clock timing of a kernel: warm-up runs, then repeats, summarised robustly."""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from ..errors import MeasureError

__all__ = ["time_kernel"]


def time_kernel(fn: Callable[[], object], warmup: int = 2, repeats: int = 10) -> tuple[float, float, float]:
    """Run ``fn`` ``warmup`` times untimed, then ``repeats`` times timed.

    Returns ``(median, min, iqr)`` in milliseconds (``iqr`` = 75th - 25th
    percentile), each run timed by itself with ``time.perf_counter_ns``.
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
