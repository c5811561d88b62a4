"""time_kernel: warm-up runs are not timed; median, min and IQR are in milliseconds."""

from __future__ import annotations

import time

import pytest

from autotune.errors import MeasureError
from autotune.measure import time_kernel


def test_counts_and_units() -> None:
    calls = []

    def fn() -> None:
        calls.append(1)
        time.sleep(0.002)

    median, low, iqr = time_kernel(fn, warmup=3, repeats=5)
    assert len(calls) == 8
    assert 2.0 <= low <= median < 50.0
    assert iqr >= 0.0


@pytest.mark.parametrize(("warmup", "repeats"), [(-1, 5), (0, 0), (1.5, 3), (1, True)])
def test_invalid_counts(warmup: object, repeats: object) -> None:
    with pytest.raises(MeasureError):
        time_kernel(lambda: None, warmup, repeats)  # type: ignore[arg-type]
