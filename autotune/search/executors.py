"""Executors: run :class:`~autotune.measure.task.MeasureTask` s on workers and stream the results back.

An :class:`Executor` turns every task into exactly one ``(index, result, node)``
in completion order. A worker that dies (numba does no bounds checks: a wrong
index segfaults) gives a ``crashed`` result with the reason; one that does not
answer in time is killed and gives ``timeout``; the run goes on either way. An
exception inside the worker (a workload that cannot be built, a bug) is not a
result: it raises :class:`~autotune.errors.MeasureError` with the worker's
traceback, after the other workers are stopped.

Deadlines. Workers on one machine compile side by side but time one at a
time: the timed part of a task (warm-up and repeats) runs under the machine's
:func:`~autotune.measure.timing.timing_lock` (``MeasureTask.lock_timing``, on
by default). A task may therefore wait for the timed parts of the other
``workers - 1`` tasks in flight, so it may take
``compile_allowance + task.timeout * workers`` seconds from submission
(``compile_allowance + task.timeout`` when it does not lock). The allowance
(:data:`COMPILE_ALLOWANCE_S`, 20 s by default) covers starting a worker
process, importing numba and compiling the kernel (about 1 s, 2–4 s with
``parallel=True``, more on a loaded machine), which ``task.timeout`` does not.
It also absorbs the waits of the cpu lock (:mod:`autotune.measure.timing`): a
compile waits while another worker times a parallel kernel, and a parallel
kernel's timing waits for the compiles in flight; neither is counted apart, so
a task whose timed part runs close to its timeout can still time out spuriously
on a machine busy with many workers.
The trade-off: waiting for the lock never becomes a spurious timeout, but a
kernel that hangs is killed ``task.timeout * (workers - 1)`` seconds later than
it would be without the lock; and a kernel that hangs *while timing* (it passed
the check, so rarely) holds the lock until it is killed, so the tasks queued
behind it may time out too. The lock is a ``flock``: a killed worker releases it.

- ``"ray"`` (:class:`RayExecutor`): Ray tasks, at most ``workers`` in flight;
  each worker is reused for 50 tasks, so a workload is built once per worker.
- ``"local"`` (:class:`LocalExecutor`): a fresh ``spawn`` process per task, for
  debugging and tests without Ray (each task pays the imports, about 1–2 s).

>>> with make_executor("ray", address=None, workers=2) as ex:
...     for index, result, node in ex.run(tasks): ...
...     ex.remeasure(top, rounds=5), ex.remeasure_node
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import signal
import socket
import sys
import threading
import time
import traceback
import types
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from pathlib import Path
from types import TracebackType
from typing import Any, ClassVar

from ..errors import ConfigError, MeasureError
from ..measure.isolate import exit_text
from ..measure.result import MeasureResult
from ..measure.task import MeasureTask, remeasure_tasks, run_task

__all__ = [
    "COMPILE_ALLOWANCE_S",
    "EXECUTORS",
    "Executor",
    "LocalExecutor",
    "RayExecutor",
    "check_reachable",
    "make_executor",
    "register_executor",
    "task_limit",
]

COMPILE_ALLOWANCE_S = 20.0
"""Seconds a task may take beyond its timed part(s): worker start, imports and the numba compile."""

UNKNOWN_NODE = "unknown"
"""The node of a task whose worker died or was killed before it could say where it ran."""

PACKAGE_DIR = Path(__file__).resolve().parents[1]
"""The ``autotune`` package directory, shipped to the workers of a Ray cluster."""


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


def _check_workers(workers: int, allowance: float) -> None:
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ConfigError(f"executor: workers must be an int >= 1, got {workers!r}")
    if isinstance(allowance, bool) or not isinstance(allowance, (int, float)) or allowance < 0:
        raise ConfigError(f"executor: compile_allowance must be a number of seconds >= 0, got {allowance!r}")


def task_limit(task: MeasureTask, workers: int, allowance: float) -> float:
    """Seconds ``task`` may take from submission: the allowance, plus its timeout once, or once per
    worker when it times under the machine's lock (it may wait for the others' timed parts)."""
    return allowance + task.timeout * (workers if task.lock_timing else 1)


def _timeout(task: MeasureTask, workers: int, allowance: float) -> MeasureResult:
    limit = task_limit(task, workers, allowance)
    waits = f" x {workers} workers timing in turn" if task.lock_timing and workers > 1 else ""
    return MeasureResult.failure(
        "timeout",
        f"no result after {limit:g} s (timeout {task.timeout:g} s{waits} + {allowance:g} s "
        "to start and compile); the worker was killed",
    )


def _raised(index: int, task: MeasureTask | None, text: str) -> MeasureError:
    what = f"task {index} ({task.workload})" if task is not None else "remeasure"
    return MeasureError(f"{what} raised in the worker:\n{text}")


def _remeasure_limit(tasks: Sequence[MeasureTask], rounds: int, allowance: float) -> float:
    """The time a remeasure may take: every task's timeout ``rounds`` times plus one allowance each."""
    return sum(t.timeout * rounds + allowance for t in tasks)


def _remeasure_timeout(limit: float) -> MeasureResult:
    return MeasureResult.failure("timeout", f"remeasure: no result after {limit:g} s; the worker was killed")


def _all(tasks: Sequence[MeasureTask], rounds: int, result: MeasureResult) -> list[list[MeasureResult]]:
    """The same failure for every round of every task (a remeasure that died or hung)."""
    return [[result] * rounds for _ in tasks]


# --------------------------------------------------------------------------- local


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
    """Each task in a fresh ``spawn`` child process, at most ``workers`` at once; node id ``"local"``."""

    name = "local"

    def __init__(self, workers: int = 1, compile_allowance: float = COMPILE_ALLOWANCE_S) -> None:
        _check_workers(workers, compile_allowance)
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

    def run(self, tasks: Sequence[MeasureTask]) -> Iterator[tuple[int, MeasureResult, str]]:
        pending = deque(enumerate(tasks))
        running: list[_Child] = []
        try:
            while pending or running:
                while pending and len(running) < self.workers:
                    i, task = pending.popleft()
                    limit = task_limit(task, self.workers, self.compile_allowance)
                    running.append(self._start(i, task, "run", (task,), limit))
                wait([c.conn for c in running], max(0.0, min(c.deadline for c in running) - time.monotonic()))
                for child in list(running):
                    if child.conn.poll(0):  # a value, a traceback, or EOF from a dead worker
                        running.remove(child)
                        kind, payload = child.collect()
                        if kind == "raised":
                            raise _raised(child.index, child.task, payload)
                        yield child.index, payload, "local"
                    elif child.deadline <= time.monotonic():
                        running.remove(child)
                        child.kill()
                        timeout = _timeout(tasks[child.index], self.workers, self.compile_allowance)
                        yield child.index, timeout, "local"
        finally:
            for child in running:
                child.kill()

    def remeasure(self, tasks: Sequence[MeasureTask], rounds: int) -> list[list[MeasureResult]]:
        limit = _remeasure_limit(tasks, rounds, self.compile_allowance)
        self.remeasure_node = "local"
        child = self._start(0, None, "remeasure", (list(tasks), rounds), limit)
        if not child.conn.poll(limit):
            child.kill()
            return _all(tasks, rounds, _remeasure_timeout(limit))
        kind, payload = child.collect()
        if kind == "raised":
            raise _raised(0, None, payload)
        if kind == "crashed":
            return _all(tasks, rounds, payload)
        return payload  # type: ignore[no-any-return]

    def close(self) -> None:
        """Nothing outlives a call to :meth:`run` or :meth:`remeasure`."""


# --------------------------------------------------------------------------- ray


CONNECT_TIMEOUT_S = 10.0
"""Seconds to wait for a TCP connection to a Ray cluster's address before giving up on it (Ray's own
``ray.init`` retries an unreachable address for minutes)."""
DEFAULT_PORTS = {"": 6379, "ray://": 10001}
"""The port of an address given without one: the GCS of ``ray start --head``, or its Ray Client server."""


def check_reachable(address: str, timeout: float = CONNECT_TIMEOUT_S) -> None:
    """Raise ConfigError naming ``address`` unless a TCP connection to it opens within ``timeout``
    seconds. ``"auto"`` (the cluster ``ray start`` recorded on this machine) is left to Ray."""
    if address == "auto":
        return
    scheme = "ray://" if address.startswith("ray://") else ""
    rest = address[len(scheme) :].rstrip("/")
    host, sep, port_text = rest.rpartition(":")
    if not sep or "]" in port_text:  # no port: "host", or "[::1]"
        host, port_text = rest, str(DEFAULT_PORTS[scheme])
    host = host.strip("[]")
    if not host or not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise ConfigError(f"ray address {address!r}: expected auto, HOST:PORT or ray://HOST:PORT")
    try:
        with socket.create_connection((host, int(port_text)), timeout=timeout):
            pass
    except OSError as exc:
        reason = "timed out" if isinstance(exc, TimeoutError) else exc.strerror or str(exc)
        raise ConfigError(
            f"ray address {address!r}: cannot connect to {host}:{port_text} within {timeout:g} s ({reason}); "
            "is a Ray cluster running there (`ray start --head` on that machine)? "
            "Leave the address out to start a local Ray"
        ) from None


def _ray_run_task(task: MeasureTask) -> tuple[MeasureResult, str]:
    """Body of the Ray task: the result and the id of the node it ran on."""
    import ray

    return run_task(task), ray.get_runtime_context().get_node_id()


def _ray_remeasure(tasks: list[MeasureTask], rounds: int) -> tuple[list[list[MeasureResult]], str]:
    """Body of the remeasure Ray task: the results and the id of the node it ran on."""
    import ray

    return remeasure_tasks(tasks, rounds), ray.get_runtime_context().get_node_id()


@register_executor
class RayExecutor(Executor):
    """Ray tasks, at most ``workers`` in flight.

    ``address`` None starts a new local Ray with ``num_cpus=workers`` (stopped
    by :meth:`close`), even when this machine is part of a cluster; ``"auto"``,
    ``"host:port"`` (the GCS) or ``"ray://host:port"`` (Ray Client) connects to a cluster
    and ships the ``autotune`` package to its workers (a ``workload_path`` file
    must exist at the same path on every node). If Ray is already initialised
    it is used as is and left running. Each task asks for 1 CPU, and
    deadlines count from submission, so ``workers`` should not exceed the free
    CPUs of the cluster. :meth:`remeasure` is one task, on one node
    (:attr:`remeasure_node`). Ray's own messages below errors, and the workers' output, are
    shown only when ``verbose``.
    """

    name = "ray"

    def __init__(
        self,
        address: str | None = None,
        workers: int = 2,
        compile_allowance: float = COMPILE_ALLOWANCE_S,
        verbose: bool = False,
    ) -> None:
        _check_workers(workers, compile_allowance)
        import ray

        self.workers = workers
        self.compile_allowance = float(compile_allowance)
        self._ray = ray
        self._started = False
        if not ray.is_initialized():
            if address is not None:
                check_reachable(address)
            where: dict[str, Any] = (
                # "local": always a new Ray, never the cluster that `ray start` recorded in /tmp/ray
                {"address": "local", "num_cpus": workers, "include_dashboard": False}
                if address is None
                else {"address": address, "runtime_env": {"py_modules": [str(PACKAGE_DIR)]}}
            )
            try:
                level = logging.INFO if verbose else logging.ERROR  # ERROR: no token-auth warning per run
                ray.init(**where, log_to_driver=verbose, logging_level=level)
            except (ConnectionError, TimeoutError) as exc:
                raise ConfigError(
                    f"ray address {address!r}: cannot connect to the Ray cluster: {exc}"
                ) from None
            self._started = True
        options: dict[str, Any] = {"num_cpus": 1, "max_calls": 50, "max_retries": 0}
        self._run_remote = ray.remote(**options)(_ray_run_task)
        self._remeasure_remote = ray.remote(**options)(_ray_remeasure)

    def _failure(self, exc: BaseException) -> MeasureResult | None:
        """The result a Ray error stands for: ``crashed`` for a dead worker, ``timeout`` if cancelled."""
        errors = self._ray.exceptions
        if isinstance(exc, errors.TaskCancelledError):
            return MeasureResult.failure("timeout", f"the task was cancelled: {exc}")
        died = (
            errors.WorkerCrashedError,
            errors.OutOfMemoryError,
            errors.NodeDiedError,
            errors.LocalRayletDiedError,
        )
        if isinstance(exc, died):
            return MeasureResult.failure("crashed", f"the worker died: {type(exc).__name__}: {exc}")
        if isinstance(exc, errors.RayTaskError) and isinstance(exc.cause, (SystemExit, KeyboardInterrupt)):
            return MeasureResult.failure(
                "crashed", f"the worker exited: {type(exc.cause).__name__}: {exc.cause}"
            )
        return None

    def _collect(self, ref: Any, index: int, task: MeasureTask | None) -> tuple[Any, str]:
        try:
            return self._ray.get(ref)  # type: ignore[no-any-return]
        except self._ray.exceptions.RayError as exc:
            failure = self._failure(exc)
            if failure is None:
                raise _raised(index, task, str(exc)) from exc
            return failure, UNKNOWN_NODE

    def run(self, tasks: Sequence[MeasureTask]) -> Iterator[tuple[int, MeasureResult, str]]:
        ray = self._ray
        pending = deque(enumerate(tasks))
        inflight: dict[Any, tuple[int, float]] = {}  # ref -> (index, deadline)
        try:
            while pending or inflight:
                while pending and len(inflight) < self.workers:
                    i, task = pending.popleft()
                    deadline = time.monotonic() + task_limit(task, self.workers, self.compile_allowance)
                    inflight[self._run_remote.remote(task)] = (i, deadline)
                wait_s = max(0.0, min(d for _, d in inflight.values()) - time.monotonic())
                ray.wait(list(inflight), num_returns=1, timeout=wait_s)
                # the consumer may have been slow: collect every finished task before judging deadlines
                ready, _ = ray.wait(list(inflight), num_returns=len(inflight), timeout=0)
                for ref in ready:
                    i, _ = inflight.pop(ref)
                    result, node = self._collect(ref, i, tasks[i])
                    yield i, result, node
                now = time.monotonic()
                for ref, (i, deadline) in list(inflight.items()):
                    if deadline <= now:
                        ray.cancel(ref, force=True)
                        del inflight[ref]
                        yield i, _timeout(tasks[i], self.workers, self.compile_allowance), UNKNOWN_NODE
        finally:
            for ref in inflight:
                ray.cancel(ref, force=True)

    def remeasure(self, tasks: Sequence[MeasureTask], rounds: int) -> list[list[MeasureResult]]:
        limit = _remeasure_limit(tasks, rounds, self.compile_allowance)
        self.remeasure_node = UNKNOWN_NODE
        ref = self._remeasure_remote.remote(list(tasks), rounds)
        ready, _ = self._ray.wait([ref], timeout=limit)
        if not ready:
            self._ray.cancel(ref, force=True)
            return _all(tasks, rounds, _remeasure_timeout(limit))
        try:
            results, self.remeasure_node = self._ray.get(ref)
            return results  # type: ignore[no-any-return]
        except self._ray.exceptions.RayError as exc:
            failed = self._failure(exc)
            if failed is None:
                raise _raised(0, None, str(exc)) from exc
            return _all(tasks, rounds, failed)

    def close(self) -> None:
        """Shut Ray down if this executor started it."""
        if self._started and self._ray.is_initialized():
            self._ray.shutdown()
        self._started = False
