"""The executor contract (:class:`Executor`), its registry, and the deadlines and failure results
that every executor shares (see the package docstring for how deadlines are counted)."""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from types import TracebackType
from typing import Any, ClassVar

from ...errors import ConfigError, MeasureError
from ...measure.result import MeasureResult
from ...measure.task import MeasureTask

__all__ = [
    "COMPILE_ALLOWANCE_S",
    "EXECUTORS",
    "UNKNOWN_NODE",
    "WORKER_JOBS",
    "Executor",
    "check_workers",
    "every_round",
    "make_executor",
    "raised_error",
    "register_executor",
    "remeasure_limit",
    "remeasure_timeout",
    "load_factor",
    "task_cpus",
    "task_limit",
    "timeout_result",
    "usable_cores",
]

COMPILE_ALLOWANCE_S = 20.0
"""Seconds a task may take beyond its timed part(s): worker start, imports and the numba compile."""

WORKER_JOBS = 50
"""Jobs a worker process runs before it is replaced by a new one: each compiled kernel stays in its
memory (about 2 MB each)."""

UNKNOWN_NODE = "unknown"
"""The node of a task whose worker died or was killed before it could say where it ran."""


class Executor(ABC):
    """Runs measurement tasks on ``workers`` workers; a context manager that closes itself."""

    name: ClassVar[str]
    workers: int
    remeasure_node: str = ""
    """The node the last :meth:`remeasure` ran on (``""`` before one, or when not known)."""

    @abstractmethod
    def run(self, tasks: Sequence[MeasureTask]) -> Iterator[tuple[int, MeasureResult, str]]:
        """Yield ``(index into tasks, result, node id)`` in completion order, once per task."""

    @abstractmethod
    def remeasure(self, tasks: Sequence[MeasureTask], rounds: int) -> list[list[MeasureResult]]:
        """On one worker, time the tasks alternately ``rounds`` times; ``result[i]`` is task ``i``'s."""

    @abstractmethod
    def close(self) -> None:
        """Release the workers (idempotent)."""

    def __enter__(self) -> Executor:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


EXECUTORS: dict[str, type[Executor]] = {}


def register_executor(cls: type[Executor]) -> type[Executor]:
    """Class decorator: make ``cls`` available to :func:`make_executor` as ``cls.name``."""
    if cls.name in EXECUTORS:
        raise ValueError(f"executor {cls.name!r} is registered twice")
    EXECUTORS[cls.name] = cls
    return cls


def make_executor(name: str, **kwargs: Any) -> Executor:
    """The executor registered as ``name``, constructed with ``kwargs``."""
    cls = EXECUTORS.get(name)
    if cls is None:
        raise ConfigError(f"unknown executor {name!r}; known executors: {', '.join(sorted(EXECUTORS))}")
    return cls(**kwargs)


def check_workers(workers: int, allowance: float) -> None:
    """Raise ConfigError unless ``workers`` is an int >= 1 and ``allowance`` a number of seconds >= 0."""
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ConfigError(f"executor: workers must be an int >= 1, got {workers!r}")
    if isinstance(allowance, bool) or not isinstance(allowance, (int, float)) or allowance < 0:
        raise ConfigError(f"executor: compile_allowance must be a number of seconds >= 0, got {allowance!r}")


def usable_cores() -> int:
    """The cores this process may run on (numba starts one thread per core for a parallel loop)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def task_cpus(task: MeasureTask, capacity: int) -> int:
    """The CPUs ``task`` books: one, or for a kernel with a parallel loop (:attr:`MeasureTask.parallel`)
    timed without the machine's locks (``lock_timing`` off) one per thread it runs (one per usable
    core of this machine), at most ``capacity`` (the CPUs the executor has), so that two parallel
    kernels never share the cores their threads need.

    With the locks (the default), the timed part of a parallel kernel holds the machine's cpu lock
    exclusive (:mod:`autotune.measure.timing`): no compile or timing of another measurement runs
    on the machine meanwhile, so the task books one CPU and its compile runs beside the others'.
    Booking its threads for the whole task ran every compile of a chain whose kernels are all
    parallel one at a time (measured by ``experiments/tune_wall.py``: ``results/tune_wall.md``)."""
    return max(1, min(usable_cores(), capacity)) if task.parallel and not task.lock_timing else 1


def load_factor() -> float:
    """How many times slower than when idle this machine runs: its one-minute load average per
    usable core, at least 1 (1 where the system has no load average).

    A worker started on a machine whose cores are all busy with other work takes that many times
    longer to start, import numba, compile and time; a deadline made for an idle machine would
    kill every task of a run there as hung (a clean clone's test suite beside two processes that
    kept both cores busy: every trial of a multi-node Ray run timed out at 40 s)."""
    try:
        load = os.getloadavg()[0]
    except (AttributeError, OSError):
        return 1.0
    return max(1.0, load / usable_cores())


def task_limit(task: MeasureTask, workers: int, allowance: float, load: float = 1.0) -> float:
    """Seconds ``task`` may take from submission: the allowance, plus its timeout once, or once per
    worker when it times under the machine's lock (it may wait for the others' timed parts), all
    times ``load`` (:func:`load_factor` when it was submitted)."""
    return (allowance + task.timeout * (workers if task.lock_timing else 1)) * load


def timeout_result(task: MeasureTask, workers: int, allowance: float, load: float = 1.0) -> MeasureResult:
    """The ``timeout`` result of a task killed at its :func:`task_limit`, saying how the limit was made."""
    limit = task_limit(task, workers, allowance, load)
    waits = f" x {workers} workers timing in turn" if task.lock_timing and workers > 1 else ""
    busy = f", x {load:.2g} for the machine's load" if load > 1.0 else ""
    return MeasureResult.failure(
        "timeout",
        f"no result after {limit:g} s (timeout {task.timeout:g} s{waits} + {allowance:g} s "
        f"to start and compile{busy}); the worker was killed",
    )


def raised_error(index: int, task: MeasureTask | None, text: str) -> MeasureError:
    """The error that an exception in a worker becomes (``task`` None: a remeasure), with its traceback."""
    what = f"task {index} ({task.workload})" if task is not None else "remeasure"
    return MeasureError(f"{what} raised in the worker:\n{text}")


def remeasure_limit(tasks: Sequence[MeasureTask], rounds: int, allowance: float, load: float = 1.0) -> float:
    """The time a remeasure may take: every task's timeout ``rounds`` times plus one allowance each,
    times ``load`` (:func:`load_factor`)."""
    return sum(t.timeout * rounds + allowance for t in tasks) * load


def remeasure_timeout(limit: float) -> MeasureResult:
    """The ``timeout`` result of a remeasure killed after ``limit`` seconds."""
    return MeasureResult.failure("timeout", f"remeasure: no result after {limit:g} s; the worker was killed")


def every_round(
    tasks: Sequence[MeasureTask], rounds: int, result: MeasureResult
) -> list[list[MeasureResult]]:
    """The same failure for every round of every task (a remeasure that died or hung)."""
    return [[result] * rounds for _ in tasks]
