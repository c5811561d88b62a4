"""Stopwatch: nested parts are exclusive, waiting on an iterator is charged to ``wait``, and DriverTime adds up."""

from __future__ import annotations

import time
from collections.abc import Iterator

from autotune.search.stopwatch import PARTS, DriverTime, Stopwatch


def test_nested_parts_pause_the_outer_one() -> None:
    clock = Stopwatch()
    with clock("optuna"):
        time.sleep(0.02)
        with clock("lowering"):
            time.sleep(0.1)
        time.sleep(0.02)
    t = clock.snapshot()
    assert t.seconds("lowering") >= 0.1
    assert 0.04 <= t.seconds("optuna") < 0.1  # at least 0.14 if lowering were counted twice
    assert sum(s for _, s in t.parts) <= t.total_s
    assert [n for n, _ in t.parts] == list(PARTS)


def test_iterate_charges_the_producer_not_the_consumer() -> None:
    def slow() -> Iterator[int]:
        for i in range(3):
            time.sleep(0.02)
            yield i

    clock = Stopwatch()
    seen = []
    for item in clock.iterate(slow()):
        seen.append(item)
        time.sleep(0.03)  # the consumer's own work: not waiting
    t = clock.snapshot()
    assert seen == [0, 1, 2]
    assert 0.06 <= t.wait_s < 0.13  # at least 0.15 if the consumer's sleeps were charged to it
    assert t.busy_s >= 0.09 and 0 < t.idle_fraction < 0.6


def test_closing_iterate_closes_the_source() -> None:
    closed = []

    def source() -> Iterator[int]:
        try:
            yield from range(10)
        finally:
            closed.append(True)

    stream = Stopwatch().iterate(source())
    assert next(stream) == 0
    stream.close()
    assert closed == [True]


def test_driver_time_text_and_empty() -> None:
    t = DriverTime(10.0, (("wait", 6.0), ("model", 1.0)))
    assert t.idle_fraction == 0.6 and t.busy_s == 4.0 and t.other_s == 3.0
    assert t.text() == "loop 10.00 s: wait 6.00 s (60%), model 1.00 s (10%), other 3.00 s (30%)"
    assert DriverTime(0.0, ()).idle_fraction == 0.0
