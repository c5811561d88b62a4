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

The tuner's parts are listed in :data:`PARTS`; :attr:`DriverTime.idle_fraction`
is the share of the search loop the driver spent waiting for results. The clock is
``time.perf_counter`` unless another is given (a test's fake clock).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TypeVar

__all__ = ["PARTS", "WAIT", "DriverTime", "Stopwatch"]

T = TypeVar("T")

WAIT = "wait"
PARTS = {
    WAIT: "blocked on the executor: submitting tasks and waiting for their results",
    "propose": "the search strategy drawing a round's candidates (Optuna's ask, mutations, random draws)",
    "learn": "the search strategy taking the round's outcomes (Optuna's tell)",
    "lowering": "applying the space's knobs and lowering + memory-planning each candidate (its peak)",
    "features": "feature vectors of the lowered candidates for the cost model",
    "model": "cost-model fit and predict",
    "log": "appending records to trials.jsonl (and to search.storage's study) and the progress bar",
}
"""The parts the tuner charges; the rest of the loop's time is ``other``."""


@dataclass(frozen=True)
class DriverTime:
    """Seconds of the search loop (``total_s``, wall clock) and the seconds charged to each part.

    ``parts`` are ``(name, seconds)`` pairs in the order of :data:`PARTS`;
    :attr:`other_s` is what no part covers (the round's bookkeeping: sorting out repeated
    candidates, choosing the ones to measure, making tasks).
    """

    total_s: float
    parts: tuple[tuple[str, float], ...]

    def seconds(self, part: str) -> float:
        return dict(self.parts).get(part, 0.0)

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
        """``loop 12.3 s: wait 9.1 s (74%), propose 0.4 s (3%), ...``."""
        rows = [*self.parts, ("other", self.other_s)]
        share = [f"{n} {s:.2f} s ({s / self.total_s:.0%})" if self.total_s else f"{n} 0 s" for n, s in rows]
        return f"loop {self.total_s:.2f} s: " + ", ".join(share)


class Stopwatch:
    """Charges wall time to nested, exclusive parts; started when made. ``clock()`` reads the time in seconds."""

    def __init__(self, clock: Callable[[], float] = time.perf_counter) -> None:
        self._clock = clock
        self._start = clock()
        self._seconds: dict[str, float] = dict.fromkeys(PARTS, 0.0)
        self._stack: list[str] = []
        self._since = self._start  # when the innermost running part (re)started

    def _charge(self, now: float) -> None:
        if self._stack:
            part = self._stack[-1]
            self._seconds[part] = self._seconds.get(part, 0.0) + now - self._since
        self._since = now

    @contextmanager
    def __call__(self, part: str) -> Iterator[None]:
        """Charge the ``with`` body to ``part`` (minus the inner parts it runs)."""
        self._charge(self._clock())
        self._stack.append(part)
        try:
            yield
        finally:
            self._charge(self._clock())
            self._stack.pop()

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
        """The times so far (the parts still running are charged up to now)."""
        now = self._clock()
        self._charge(now)
        return DriverTime(now - self._start, tuple(self._seconds.items()))
