"""The ``"local"`` executor: each task in a fresh ``spawn`` process, for debugging and tests without Ray."""

from __future__ import annotations

import contextlib
import multiprocessing
import signal
import sys
import threading
import time
import traceback
import types
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from typing import Any

from ...measure.isolate import exit_text
from ...measure.result import MeasureResult
from ...measure.task import MeasureTask, remeasure_tasks, run_task
from .base import (
    COMPILE_ALLOWANCE_S,
    Executor,
    check_workers,
    every_round,
    raised_error,
    register_executor,
    remeasure_limit,
    remeasure_timeout,
    task_cpus,
    task_limit,
    timeout_result,
)

__all__ = ["LocalExecutor"]


def _child_main(conn: Connection, job: str, args: tuple[Any, ...]) -> None:
    """Entry point of a local worker process: run the job, send back its value or traceback.

    The worker ignores SIGINT: a Ctrl-C in the terminal reaches the whole process group, and the
    driver decides what it means (finish the round, or stop and kill the workers). It is ignored
    from the start when the driver started it from its main thread (:func:`_quiet_start`)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        fn: Callable[..., Any] = run_task if job == "run" else remeasure_tasks
        conn.send(("value", fn(*args)))
    except BaseException:  # the parent raises it as a MeasureError, with this traceback
        conn.send(("raised", traceback.format_exc()))
    finally:
        conn.close()


@contextlib.contextmanager
def _quiet_start() -> Iterator[None]:
    """While a local worker is started: ``__main__`` hidden, so that ``spawn`` does not run the
    calling script again in the child (a script without an ``if __name__ == "__main__":`` guard
    would tune again there; the child needs nothing from it, its target lives in this module);
    and, in the main thread, SIGINT ignored, so that the child starts with it ignored (a Ctrl-C
    while it imports would kill it) while the driver's own SIGINT is held pending, blocked, and
    delivered to its handler once this ends."""
    main = sys.modules.get("__main__")
    sys.modules["__main__"] = types.ModuleType("__main__")
    in_main = threading.current_thread() is threading.main_thread()
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    handler = signal.signal(signal.SIGINT, signal.SIG_IGN) if in_main else None
    try:
        yield
    finally:
        if in_main:
            signal.signal(signal.SIGINT, handler)
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        if main is not None:
            sys.modules["__main__"] = main


@dataclass
class _Child:
    """A running local worker process and what it is doing."""

    index: int
    task: MeasureTask | None
    proc: BaseProcess
    conn: Connection
    deadline: float
    cpus: int = 1

    def kill(self) -> None:
        self.proc.kill()
        self.proc.join()
        self.conn.close()

    def collect(self) -> tuple[str, Any]:
        """``("value", v)``, ``("raised", traceback)`` or ``("crashed", result)``; the process is reaped."""
        try:
            kind, payload = self.conn.recv()
        except EOFError:
            self.proc.join()
            reason = f"the worker died: {exit_text(self.proc.exitcode)}"
            return "crashed", MeasureResult.failure("crashed", reason)
        finally:
            self.conn.close()
        self.proc.join()
        return kind, payload


@register_executor
class LocalExecutor(Executor):
    """Each task in a fresh ``spawn`` child process, at most ``workers`` CPUs booked at once; node
    id ``"local"``. A task books one CPU, or one per thread for a parallel kernel (:func:`task_cpus`),
    so a parallel kernel on a 2-core machine with 2 workers runs alone."""

    name = "local"

    def __init__(self, workers: int = 1, compile_allowance: float = COMPILE_ALLOWANCE_S) -> None:
        check_workers(workers, compile_allowance)
        self.workers = workers
        self.compile_allowance = float(compile_allowance)
        self._ctx = multiprocessing.get_context("spawn")

    def _start(
        self, index: int, task: MeasureTask | None, job: str, args: tuple[Any, ...], limit: float
    ) -> _Child:
        receiver, sender = self._ctx.Pipe(duplex=False)
        proc = self._ctx.Process(
            target=_child_main, args=(sender, job, args), daemon=True, name="autotune-worker"
        )
        with _quiet_start():
            proc.start()
        sender.close()
        return _Child(index, task, proc, receiver, time.monotonic() + limit)

    def _fits(self, task: MeasureTask, running: list[_Child]) -> bool:
        """Whether ``task`` may start beside ``running``: its CPUs are free (or nothing runs)."""
        booked = sum(c.cpus for c in running)
        return not running or booked + task_cpus(task, self.workers) <= self.workers

    def run(self, tasks: Sequence[MeasureTask]) -> Iterator[tuple[int, MeasureResult, str]]:
        pending = deque(enumerate(tasks))
        running: list[_Child] = []
        try:
            while pending or running:
                while pending and self._fits(pending[0][1], running):
                    i, task = pending.popleft()
                    limit = task_limit(task, self.workers, self.compile_allowance)
                    child = self._start(i, task, "run", (task,), limit)
                    child.cpus = task_cpus(task, self.workers)
                    running.append(child)
                wait([c.conn for c in running], max(0.0, min(c.deadline for c in running) - time.monotonic()))
                for child in list(running):
                    if child.conn.poll(0):  # a value, a traceback, or EOF from a dead worker
                        kind, payload = child.collect()
                        running.remove(child)
                        if kind == "raised":
                            raise raised_error(child.index, child.task, payload)
                        yield child.index, payload, "local"
                    elif child.deadline <= time.monotonic():
                        running.remove(child)
                        child.kill()
                        timeout = timeout_result(tasks[child.index], self.workers, self.compile_allowance)
                        yield child.index, timeout, "local"
        finally:
            for child in running:
                child.kill()

    def remeasure(self, tasks: Sequence[MeasureTask], rounds: int) -> list[list[MeasureResult]]:
        limit = remeasure_limit(tasks, rounds, self.compile_allowance)
        self.remeasure_node = "local"
        child = self._start(0, None, "remeasure", (list(tasks), rounds), limit)
        try:
            if not child.conn.poll(limit):
                child.kill()
                return every_round(tasks, rounds, remeasure_timeout(limit))
            kind, payload = child.collect()
        except BaseException:  # KeyboardInterrupt: the remeasure does not go on without the driver
            child.kill()
            raise
        if kind == "raised":
            raise raised_error(0, None, payload)
        if kind == "crashed":
            return every_round(tasks, rounds, payload)
        return payload  # type: ignore[no-any-return]

    def close(self) -> None:
        """Nothing outlives a call to :meth:`run` or :meth:`remeasure`."""
