"""The ``"local"`` executor: tasks in ``spawn`` worker processes of this machine, kept from task to
task, for debugging and tests without Ray."""

from __future__ import annotations

import contextlib
import ctypes
import multiprocessing
import os
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
from . import base
from .base import (
    COMPILE_ALLOWANCE_S,
    WORKER_JOBS,
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


PR_SET_PDEATHSIG = 1
"""Linux ``prctl`` option: the signal this process gets when the thread that started it ends."""


def _end_with_driver(driver: int) -> None:
    """On Linux, have the kernel kill this worker (SIGKILL) when the driver ends, however it ends.

    Without it a driver ended by a signal (SIGTERM, SIGKILL: a ``kill``, a batch system's limit)
    leaves its workers measuring at full CPU until their job ends, beside whatever runs next; the
    ``daemon`` flag only acts at the driver's normal exit. The kernel sends the signal when the
    driver's *thread* that started the worker ends, so a driver that keeps an executor beyond the
    thread that used it first loses its idle workers: the next job starts a new one. A worker whose
    driver ended before the call exits at once. Elsewhere it does nothing: the worker ends at its
    next read from the driver."""
    if not sys.platform.startswith("linux"):
        return
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        return  # the worker then ends at its next read, as elsewhere
    if os.getppid() != driver:
        os._exit(0)


def _worker_main(conn: Connection, driver: int) -> None:
    """Entry point of a local worker process: run the jobs that come through ``conn`` (``(job,
    args)``, None to stop), one at a time, and send back each one's value or traceback. It ends
    with the driver, process ``driver`` (:func:`_end_with_driver`).

    The worker ignores SIGINT: a Ctrl-C in the terminal reaches the whole process group, and the
    driver decides what it means (finish the round, or stop and kill the workers). It is ignored
    from the start when the driver started it from its main thread (:func:`_quiet_start`)."""
    _end_with_driver(driver)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        while True:
            try:
                message = conn.recv()
            except EOFError:  # the driver has gone
                return
            if message is None:
                return
            job, args = message
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
    """A local worker process and the job it runs (``index``, ``task``, ``deadline``, ``cpus``, and
    the machine's ``load`` factor its deadline was made with)."""

    proc: BaseProcess
    conn: Connection
    index: int = 0
    task: MeasureTask | None = None
    deadline: float = 0.0
    cpus: int = 1
    load: float = 1.0
    jobs: int = 0  # jobs sent to this process so far

    def send(
        self, index: int, task: MeasureTask | None, job: str, args: tuple[Any, ...], limit: float
    ) -> None:
        """Give the process a job; ``limit`` seconds from now it is late. OSError if it has died."""
        self.index, self.task, self.deadline = index, task, time.monotonic() + limit
        self.jobs += 1
        self.conn.send((job, args))

    def kill(self) -> None:
        self.proc.kill()
        self.proc.join()
        self.conn.close()

    def collect(self) -> tuple[str, Any]:
        """``("value", v)``, ``("raised", traceback)`` or ``("crashed", result)`` (the process died:
        it is reaped)."""
        try:
            kind, payload = self.conn.recv()
        except EOFError:
            self.proc.join()
            self.conn.close()
            reason = f"the worker died: {exit_text(self.proc.exitcode)}"
            return "crashed", MeasureResult.failure("crashed", reason)
        return kind, payload


@register_executor
class LocalExecutor(Executor):
    """Tasks in ``spawn`` worker processes of this machine, at most ``workers`` CPUs booked at once;
    node id ``"local"``. A task books one CPU, or one per thread for a parallel kernel timed without
    the machine's locks (:func:`task_cpus`), which on a 2-core machine with 2 workers runs alone.

    A worker process runs one task at a time and is kept for the next (it keeps the workload, its
    reference outputs and the kernels it compiled), up to :data:`~.base.WORKER_JOBS` jobs, like a
    Ray worker; one that crashed or was killed at its deadline is replaced by a new one.
    :meth:`remeasure` runs on a worker that is kept, :meth:`close` ends the idle ones."""

    name = "local"

    def __init__(self, workers: int = 1, compile_allowance: float = COMPILE_ALLOWANCE_S) -> None:
        check_workers(workers, compile_allowance)
        self.workers = workers
        self.compile_allowance = float(compile_allowance)
        self._ctx = multiprocessing.get_context("spawn")
        self._idle: list[_Child] = []  # live worker processes waiting for a job, the last used last

    def _spawn(self) -> _Child:
        here, there = self._ctx.Pipe(duplex=True)
        proc = self._ctx.Process(
            target=_worker_main, args=(there, os.getpid()), daemon=True, name="autotune-worker"
        )
        with _quiet_start():
            proc.start()
        there.close()
        return _Child(proc, here)

    def _start(
        self, index: int, task: MeasureTask | None, job: str, args: tuple[Any, ...], limit: float
    ) -> _Child:
        """A worker (the last idle one, else a new one) running ``job`` for ``tasks[index]``."""
        while self._idle:
            child = self._idle.pop()
            try:
                child.send(index, task, job, args, limit)
                return child
            except OSError:  # it died while idle
                child.kill()
        child = self._spawn()
        child.send(index, task, job, args, limit)
        return child

    def _keep(self, child: _Child) -> None:
        """Take back a worker that finished its job: kept for the next one, or ended after its last."""
        if child.jobs >= WORKER_JOBS:
            child.kill()
        else:
            self._idle.append(child)

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
                    load = base.load_factor()
                    limit = task_limit(task, self.workers, self.compile_allowance, load)
                    child = self._start(i, task, "run", (task,), limit)
                    child.load = load
                    child.cpus = task_cpus(task, self.workers)
                    running.append(child)
                wait([c.conn for c in running], max(0.0, min(c.deadline for c in running) - time.monotonic()))
                for child in list(running):
                    if child.conn.poll(0):  # a value, a traceback, or EOF from a dead worker
                        kind, payload = child.collect()
                        running.remove(child)
                        if kind != "crashed":
                            self._keep(child)
                        if kind == "raised":
                            raise raised_error(child.index, child.task, payload)
                        yield child.index, payload, "local"
                    elif child.deadline <= time.monotonic():
                        running.remove(child)
                        child.kill()
                        timeout = timeout_result(tasks[child.index], self.workers, self.compile_allowance, child.load)
                        yield child.index, timeout, "local"
        finally:
            for child in running:  # interrupted, or a worker raised: what is in flight is not waited for
                child.kill()

    def remeasure(self, tasks: Sequence[MeasureTask], rounds: int) -> list[list[MeasureResult]]:
        limit = remeasure_limit(tasks, rounds, self.compile_allowance, base.load_factor())
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
        if kind == "crashed":
            return every_round(tasks, rounds, payload)
        self._keep(child)
        if kind == "raised":
            raise raised_error(0, None, payload)
        return payload  # type: ignore[no-any-return]

    def close(self) -> None:
        """End the idle workers (a call to :meth:`run` ends the ones it leaves running). They are
        killed: an idle worker holds nothing to save, and one that exits by itself takes seconds to
        unload numba."""
        while self._idle:
            self._idle.pop().kill()

    def __del__(self) -> None:
        for child in getattr(self, "_idle", ()):
            with contextlib.suppress(Exception):
                child.proc.kill()
