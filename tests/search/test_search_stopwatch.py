"""Stopwatch: nested parts are exclusive, waiting on an iterator is charged to ``wait``, and DriverTime adds up.

The stopwatch reads a fake clock that the tests move by hand, so every figure is exact.
"""

from __future__ import annotations

from collections.abc import Iterator

from autotune.search.stopwatch import PARTS, RUN_PARTS, DriverTime, Stopwatch


class FakeClock:
    """A clock that stands still until :meth:`advance` moves it."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def test_the_parts_are_named_after_what_they_do() -> None:
    assert list(PARTS) == [
        "wait", "propose", "learn", "apply", "lowering", "infeasible", "features", "model", "log",
    ]  # fmt: skip
    assert list(RUN_PARTS) == ["setup", "fits", "start", "finish", "stop", "report"]


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


def test_a_span_renamed_inside_its_with_charges_the_new_part() -> None:
    clock = FakeClock()
    watch = Stopwatch(clock)
    with watch("lowering") as span:
        clock.advance(2.0)
        with watch("features"):
            clock.advance(1.0)
        clock.advance(3.0)
        assert watch.snapshot().seconds("lowering") == 5.0  # still its name while it runs
        span.part = "infeasible"
        assert watch.snapshot().seconds("infeasible") == 5.0 and watch.snapshot().seconds("lowering") == 0.0
    with watch("lowering"):
        clock.advance(4.0)
    t = watch.snapshot()
    assert t.seconds("infeasible") == 5.0 and t.seconds("lowering") == 4.0 and t.seconds("features") == 1.0
    assert t.total_s == 10.0 and t.other_s == 0.0


def test_the_run_parts_are_kept_outside_the_loop() -> None:
    clock = FakeClock()
    watch = Stopwatch(clock)
    with watch("setup"):
        clock.advance(1.0)
    with watch("fits"):
        clock.advance(2.0)
    with watch("propose"):
        clock.advance(3.0)
    for _ in watch.iterate(iter([1]), "wait"):
        clock.advance(0.5)  # the loop's own bookkeeping: other
    with watch("finish"):
        clock.advance(4.0)
    with watch("report"):
        clock.advance(5.0)
    t = watch.snapshot()
    assert t.total_s == 3.5 and t.other_s == 0.5 and t.run_s == 15.5
    assert [n for n, _ in t.parts] == list(PARTS)
    assert t.outside == (
        ("setup", 1.0),
        ("fits", 2.0),
        ("start", 0.0),
        ("finish", 4.0),
        ("stop", 0.0),
        ("report", 5.0),
    )
    assert t.seconds("report") == 5.0 and t.seconds("propose") == 3.0
    assert t.text().endswith(
        "; run 15.50 s: setup 1.00 s (6%), fits 2.00 s (13%), start 0.00 s (0%), finish 4.00 s (26%), "
        "stop 0.00 s (0%), report 5.00 s (32%), loop 3.50 s (23%)"
    )


def test_a_loop_without_run_parts_has_nothing_outside() -> None:
    clock = FakeClock()
    watch = Stopwatch(clock)
    with watch("model"):
        clock.advance(1.0)
    t = watch.snapshot()
    assert t.outside == () and t.run_s == t.total_s == 1.0 and ";" not in t.text()
