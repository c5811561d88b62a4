"""Where the tuner's wall time goes: waiting on the executor, or the driver's own work.

A :class:`Stopwatch` charges wall time to named parts. Parts nest and are
exclusive: while an inner part runs, the outer one is paused, so the parts
never count a second twice and they add up to at most the total::

    clock = Stopwatch()
    with clock("propose"):
        proposals = strategy.propose(64)
        with clock("lowering"):      # propose is paused meanwhile
            low = lower_candidate(...)
    for item in clock.iterate(executor.run(tasks), "wait"):
        ...
    clock.snapshot()                 # DriverTime(total_s=..., parts=(("lowering", ...), ...))

The search loop's parts are listed in :data:`PARTS`; :attr:`DriverTime.idle_fraction`
is the share of the search loop the driver spent waiting for results. The run's parts before
and after the loop (:data:`RUN_PARTS`: setting up, the fit check, starting the executor, the
re-measure of the best, the report) are charged on the same clock and kept apart
(:attr:`DriverTime.outside`), so that :attr:`DriverTime.total_s` is the loop's wall time and
:attr:`DriverTime.run_s` the run's. A part whose name is known only at its end (a lowering that
turns out infeasible) is renamed inside its ``with``::

    with clock("lowering") as span:
        low = lower_candidate(...)
        if low.lowered is None:
            span.part = "infeasible"

The clock is ``time.perf_counter`` unless another is given (a test's fake clock).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TypeVar

__all__ = ["PARTS", "RUN_PARTS", "WAIT", "DriverTime", "Span", "Stopwatch"]

T = TypeVar("T")

WAIT = "wait"
PARTS = {
    WAIT: "blocked on the executor: submitting tasks and waiting for their results",
    "propose": "the search strategy drawing a round's candidates (Optuna's ask, mutations, random draws)",
    "learn": "the search strategy taking the round's outcomes (Optuna's tell)",
    "apply": "applying the space's knobs to the workload: each proposal's schedule and trace",
    "lowering": "lowering + memory-planning the candidates that fit (to rank them)",
    "infeasible": "lowering + memory-planning the candidates over the memory (their exact peaks)",
    "features": "feature vectors of the lowered candidates for the cost model",
    "model": "cost-model fit and predict",
    "log": "appending records to trials.jsonl (and to search.storage's study) and the progress bar",
}
"""The parts the search loop charges; the rest of the loop's time is ``other``."""

RUN_PARTS = {
    "setup": "loading the workload and the space, the cost model, the log and the strategy (a resumed log)",
    "fits": "the check that some schedule fits the memory (lowering schedules until one does)",
    "start": "starting the executor (a local Ray: ray.init)",
    "finish": "re-measuring the top trials and the default schedule, writing best.json and its files",
    "stop": "stopping the executor (a local Ray: ray.shutdown)",
    "report": "the report: tables, plots, report.md",
}
"""The run's parts before and after the search loop (:attr:`DriverTime.outside`)."""


@dataclass(frozen=True)
class DriverTime:
    """Seconds of the search loop (``total_s``, wall clock) and the seconds charged to each part.

    ``parts`` are ``(name, seconds)`` pairs in the order of :data:`PARTS`;
    :attr:`other_s` is what no part covers (the round's bookkeeping: sorting out repeated
    candidates, choosing the ones to measure, making tasks). ``outside`` are the run's parts
    before and after the loop (:data:`RUN_PARTS`), not in ``total_s``.
    """

    total_s: float
    parts: tuple[tuple[str, float], ...]
    outside: tuple[tuple[str, float], ...] = ()

    @property
    def run_s(self) -> float:
        """Seconds of the whole run: the loop and the parts outside it."""
        return self.total_s + sum(s for _, s in self.outside)

    def seconds(self, part: str) -> float:
        return dict(self.parts + self.outside).get(part, 0.0)

    @property
    def wait_s(self) -> float:
        """Seconds blocked on the executor."""
        return self.seconds(WAIT)

    @property
    def busy_s(self) -> float:
        """Seconds of the driver's own work: every part but ``wait``, plus ``other``."""
        return max(0.0, self.total_s - self.wait_s)

    @property
    def other_s(self) -> float:
        return max(0.0, self.total_s - sum(s for _, s in self.parts))

    @property
    def idle_fraction(self) -> float:
        """The share of the loop spent waiting on the executor (0 when nothing was timed)."""
        return self.wait_s / self.total_s if self.total_s > 0 else 0.0

    def text(self) -> str:
        """``loop 12.3 s: wait 9.1 s (74%), propose 0.4 s (3%), ...``, then, when the run's parts
        were charged, ``; run 20.1 s: setup 0.2 s (1%), ..., loop 12.3 s (61%)``."""
        rows = [*self.parts, ("other", self.other_s)]
        text = f"loop {self.total_s:.2f} s: " + _shares(rows, self.total_s)
        if self.outside:
            text += f"; run {self.run_s:.2f} s: " + _shares(
                [*self.outside, ("loop", self.total_s)], self.run_s
            )
        return text


def _shares(rows: list[tuple[str, float]], total: float) -> str:
    return ", ".join(f"{n} {s:.2f} s ({s / total:.0%})" if total else f"{n} 0 s" for n, s in rows)


class Span:
    """A running part of a :class:`Stopwatch`; setting :attr:`part` charges its time, from its
    start, to another part."""

    __slots__ = ("part", "seconds")

    def __init__(self, part: str) -> None:
        self.part = part
        self.seconds = 0.0  # charged so far (not counting the inner parts)


class Stopwatch:
    """Charges wall time to nested, exclusive parts; started when made. ``clock()`` reads the time in seconds."""

    def __init__(self, clock: Callable[[], float] = time.perf_counter) -> None:
        self._clock = clock
        self._start = clock()
        self._seconds: dict[str, float] = dict.fromkeys([*PARTS, *RUN_PARTS], 0.0)
        self._stack: list[Span] = []  # the running parts, innermost last
        self._since = self._start  # when the innermost running part (re)started

    def _charge(self, now: float) -> None:
        if self._stack:
            self._stack[-1].seconds += now - self._since
        self._since = now

    @contextmanager
    def __call__(self, part: str) -> Iterator[Span]:
        """Charge the ``with`` body to ``part`` (minus the inner parts it runs), or to the part the
        body names last in the :class:`Span` it is given."""
        self._charge(self._clock())
        span = Span(part)
        self._stack.append(span)
        try:
            yield span
        finally:
            self._charge(self._clock())
            self._stack.pop()
            self._seconds[span.part] = self._seconds.get(span.part, 0.0) + span.seconds

    def iterate(self, items: Iterable[T], part: str = WAIT) -> Iterator[T]:
        """Yield from ``items``, charging the time spent getting each item (not the caller's) to ``part``.

        Closing this generator closes ``items`` if it is a generator (an executor stops its workers).
        """
        iterator = iter(items)
        try:
            while True:
                with self(part):
                    try:
                        item = next(iterator)
                    except StopIteration:
                        return
                yield item
        finally:
            close = getattr(iterator, "close", None)
            if close is not None:
                close()

    def snapshot(self) -> DriverTime:
        """The times so far (the parts still running are charged up to now, to their current names)."""
        now = self._clock()
        self._charge(now)
        seconds = dict(self._seconds)
        for span in self._stack:
            seconds[span.part] = seconds.get(span.part, 0.0) + span.seconds
        loop = [(n, s) for n, s in seconds.items() if n not in RUN_PARTS]
        outside = tuple((n, seconds[n]) for n in RUN_PARTS)
        elapsed = now - self._start - sum(s for _, s in outside)
        return DriverTime(elapsed, tuple(loop), outside if any(s for _, s in outside) else ())
