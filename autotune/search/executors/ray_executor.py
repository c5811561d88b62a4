"""The ``"ray"`` executor: Ray tasks on a local Ray or a cluster; and the reachability check of a
cluster's address."""

from __future__ import annotations

import contextlib
import logging
import signal
import socket
import threading
import time
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from ...errors import ConfigError
from ...measure.result import MeasureResult
from ...measure.task import MeasureTask, remeasure_tasks, run_task
from . import base
from .base import (
    COMPILE_ALLOWANCE_S,
    UNKNOWN_NODE,
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

__all__ = ["CONNECT_TIMEOUT_S", "DEFAULT_PORTS", "PACKAGE_DIR", "RayExecutor", "check_reachable"]

PACKAGE_DIR = Path(__file__).resolve().parents[2]
"""The ``autotune`` package directory, shipped to the workers of a Ray cluster."""

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


def _largest_node_cpus(ray: Any) -> int:
    """The CPUs of the cluster's largest live node (a task cannot book more)."""
    cpus = [node["Resources"].get("CPU", 0) for node in ray.nodes() if node.get("Alive")]
    return max(1, int(max(cpus, default=1)))


@contextlib.contextmanager
def _sigint_deferred() -> Iterator[None]:
    """Hold a SIGINT that arrives during the body until the body has ended, then deliver it to the
    handler that was in place (KeyboardInterrupt by default).

    Starting Ray launches its processes and then connects to them; a KeyboardInterrupt between the
    two would leave processes that no ``ray.shutdown()`` reaches (or crash the interpreter at exit),
    so the caller shuts down a Ray that did start instead. Only the main thread receives signals:
    elsewhere this does nothing, nor when the handler in place was not installed from Python."""
    previous = signal.getsignal(signal.SIGINT)
    if threading.current_thread() is not threading.main_thread() or previous is None:
        yield  # no signal reaches this thread, or a handler Python did not install is left alone
        return
    caught: list[int] = []
    signal.signal(signal.SIGINT, lambda signum, frame: caught.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if caught:
            signal.raise_signal(signal.SIGINT)


@register_executor
class RayExecutor(Executor):
    """Ray tasks, at most ``workers`` in flight.

    ``address`` None starts a new local Ray with ``num_cpus=workers`` (stopped
    by :meth:`close`), even when this machine is part of a cluster; ``"auto"``,
    ``"host:port"`` (the GCS) or ``"ray://host:port"`` (Ray Client) connects to a cluster
    and ships the ``autotune`` package to its workers (a ``workload_path`` file
    must exist at the same path on every node). If Ray is already initialised
    it is used as is and left running. Each task asks Ray for 1 CPU, or for a kernel with a
    parallel loop timed without the machine's locks one per thread it runs (:func:`task_cpus`, at
    most :attr:`capacity`), and at most ``workers`` CPUs are booked at once: on a 2-core machine
    with 2 workers, such a kernel runs alone (with the locks, its timed part excludes the others'
    compiles and timings on its machine, and its compile runs beside theirs). Deadlines count from submission, so ``workers`` should not exceed the free
    CPUs of the cluster. :meth:`remeasure` is one task, on one node
    (:attr:`remeasure_node`), booking what its most demanding candidate needs. Ray's own messages below errors, and the workers' output, are
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
        check_workers(workers, compile_allowance)
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
                with _sigint_deferred():  # a Ctrl-C while Ray starts is acted on once it has started
                    self._init(ray, where, address, verbose)
            except BaseException:
                self.close()  # Ray is shut down again if it started
                raise
        self.capacity = min(workers, _largest_node_cpus(ray))
        """The most CPUs one task may book: ``workers``, or fewer if no node of the cluster has as many."""
        options: dict[str, Any] = {"num_cpus": 1, "max_calls": WORKER_JOBS, "max_retries": 0}
        self._run_remote = ray.remote(**options)(_ray_run_task)
        self._remeasure_remote = ray.remote(**options)(_ray_remeasure)

    def _init(self, ray: Any, where: dict[str, Any], address: str | None, verbose: bool) -> None:
        try:
            level = logging.INFO if verbose else logging.ERROR  # ERROR: no token-auth warning per run
            ray.init(**where, log_to_driver=verbose, logging_level=level)
        except (ConnectionError, TimeoutError) as exc:
            raise ConfigError(f"ray address {address!r}: cannot connect to the Ray cluster: {exc}") from None
        self._started = True

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
                raise raised_error(index, task, str(exc)) from exc
            return failure, UNKNOWN_NODE

    def _fits(self, task: MeasureTask, inflight: Iterable[tuple[int, float, int, float]]) -> bool:
        """Whether ``task`` may be submitted beside ``inflight``: its CPUs are free (or nothing runs)."""
        booked = [cpus for _, _, cpus, _ in inflight]
        return not booked or sum(booked) + task_cpus(task, self.capacity) <= self.workers

    def run(self, tasks: Sequence[MeasureTask]) -> Iterator[tuple[int, MeasureResult, str]]:
        ray = self._ray
        pending = deque(enumerate(tasks))
        inflight: dict[Any, tuple[int, float, int, float]] = {}  # ref -> (index, deadline, cpus, load)
        try:
            while pending or inflight:
                while pending and self._fits(pending[0][1], inflight.values()):
                    i, task = pending.popleft()
                    load = base.load_factor()
                    deadline = time.monotonic() + task_limit(task, self.workers, self.compile_allowance, load)
                    cpus = task_cpus(task, self.capacity)
                    inflight[self._run_remote.options(num_cpus=cpus).remote(task)] = (i, deadline, cpus, load)
                wait_s = max(0.0, min(d for _, d, _, _ in inflight.values()) - time.monotonic())
                ray.wait(list(inflight), num_returns=1, timeout=wait_s)
                # the consumer may have been slow: collect every finished task before judging deadlines
                ready, _ = ray.wait(list(inflight), num_returns=len(inflight), timeout=0)
                for ref in ready:
                    i, _, _, _ = inflight.pop(ref)
                    result, node = self._collect(ref, i, tasks[i])
                    yield i, result, node
                now = time.monotonic()
                for ref, (i, deadline, _, load) in list(inflight.items()):
                    # a task that has just finished is not cancelled: it is collected next time round
                    if deadline <= now and self._cancel([ref]):
                        del inflight[ref]
                        yield i, timeout_result(tasks[i], self.workers, self.compile_allowance, load), UNKNOWN_NODE
        finally:
            self._abandon(list(inflight))

    def remeasure(self, tasks: Sequence[MeasureTask], rounds: int) -> list[list[MeasureResult]]:
        limit = remeasure_limit(tasks, rounds, self.compile_allowance, base.load_factor())
        self.remeasure_node = UNKNOWN_NODE
        cpus = max((task_cpus(t, self.capacity) for t in tasks), default=1)
        ref = self._remeasure_remote.options(num_cpus=cpus).remote(list(tasks), rounds)
        try:
            ready, _ = self._ray.wait([ref], timeout=limit)
        except BaseException:  # KeyboardInterrupt: the remeasure does not go on without the driver
            self._abandon([ref])
            raise
        if not ready and self._cancel([ref]):
            return every_round(tasks, rounds, remeasure_timeout(limit))
        try:
            results, self.remeasure_node = self._ray.get(ref)
            return results  # type: ignore[no-any-return]
        except self._ray.exceptions.RayError as exc:
            failed = self._failure(exc)
            if failed is None:
                raise raised_error(0, None, str(exc)) from exc
            return every_round(tasks, rounds, failed)

    def _cancel(self, refs: list[Any]) -> list[Any]:
        """Force-cancel the tasks of ``refs`` that have not finished; return those cancelled.

        Ray 2.60 aborts the driver (``Check failed: ... Tried to complete task that was not
        pending``) when a task is cancelled, with or without ``force``, while its result is on its
        way back: a loop that started two 20 ms tasks and cancelled the second once the first had
        finished died in 5 of 7 runs of 300 rounds (one after 33 rounds), among them 1 of the 2 that
        checked readiness first, as here. The check leaves alone the tasks that are done; a task that
        finishes between the check and the cancel (just as its deadline passes) still meets the race."""
        if not refs:
            return []
        _, pending = self._ray.wait(refs, num_returns=len(refs), timeout=0)
        for ref in pending:
            self._ray.cancel(ref, force=True)
        return list(pending)

    def _abandon(self, refs: list[Any]) -> None:
        """Stop the tasks of ``refs``, whose results nobody will read (the run was interrupted or
        failed). A Ray this executor started is shut down by :meth:`close`, which stops its workers
        without the race of :meth:`_cancel` (25 of 25 shutdowns with a task finishing survived):
        they are left to it. On a Ray it did not start they are cancelled."""
        if not self._started:
            self._cancel(refs)

    def close(self) -> None:
        """Shut Ray down if this executor started it."""
        if self._started and self._ray.is_initialized():
            self._ray.shutdown()
        self._started = False
