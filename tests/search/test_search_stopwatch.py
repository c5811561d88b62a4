"""Stopwatch: nested parts are exclusive, waiting on an iterator is charged to ``wait``, and DriverTime adds up.

The stopwatch reads a fake clock that the tests move by hand, so every figure is exact.
"""

from __future__ import annotations

from collections.abc import Iterator

from autotune.search.stopwatch import PARTS, DriverTime, Stopwatch


class FakeClock:
    """A clock that stands still until :meth:`advance` moves it."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def test_the_parts_are_named_after_what_they_do() -> None:
    assert list(PARTS) == ["wait", "propose", "learn", "lowering", "features", "model", "log"]


def test_nested_parts_pause_the_outer_one() -> None:
    clock = FakeClock()
    watch = Stopwatch(clock)
    with watch("propose"):
        clock.advance(2.0)
        with watch("lowering"):
            clock.advance(10.0)
        clock.advance(3.0)
    clock.advance(1.0)  # in no part: other
    t = watch.snapshot()
    assert t.seconds("lowering") == 10.0
    assert t.seconds("propose") == 5.0  # 15.0 if lowering were counted twice
    assert t.total_s == 16.0 and t.other_s == 1.0
    assert [n for n, _ in t.parts] == list(PARTS)


def test_iterate_charges_the_producer_not_the_consumer() -> None:
    clock = FakeClock()

    def slow() -> Iterator[int]:
        for i in range(3):
            clock.advance(2.0)  # the executor producing a result
            yield i

    watch = Stopwatch(clock)
    seen = []
    for item in watch.iterate(slow()):
        seen.append(item)
        clock.advance(3.0)  # the consumer's own work: not waiting
    t = watch.snapshot()
    assert seen == [0, 1, 2]
    assert t.wait_s == 6.0 and t.busy_s == 9.0 and t.total_s == 15.0
    assert t.idle_fraction == 0.4


def test_a_snapshot_charges_the_running_part_up_to_now() -> None:
    clock = FakeClock()
    watch = Stopwatch(clock)
    with watch("learn"):
        clock.advance(4.0)
        assert watch.snapshot().seconds("learn") == 4.0
        clock.advance(1.0)
    assert watch.snapshot().seconds("learn") == 5.0


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
