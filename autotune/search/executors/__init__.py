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
(``compile_allowance + task.timeout`` when it does not lock), times the machine's load
factor when it was submitted (:func:`~.base.load_factor`: the load average per core, at
least 1; on a machine busy with other work everything takes longer). The allowance
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

- ``"ray"`` (:class:`RayExecutor`, :mod:`.ray_executor`): Ray tasks, at most
  ``workers`` in flight; each worker is reused for :data:`~.base.WORKER_JOBS` tasks, so a
  workload and its reference outputs are built once per worker.
- ``"local"`` (:class:`LocalExecutor`, :mod:`.local_executor`): ``spawn`` processes of this
  machine, for debugging and tests without Ray, reused in the same way (a process that crashed or
  was killed is replaced; a new one pays the imports, about 1–2 s).

The contract, the registry and the deadlines are in :mod:`.base`.

>>> with make_executor("ray", address=None, workers=2) as ex:
...     for index, result, node in ex.run(tasks): ...
...     ex.remeasure(top, rounds=5), ex.remeasure_node
"""

from __future__ import annotations

from .base import (
    COMPILE_ALLOWANCE_S,
    EXECUTORS,
    Executor,
    make_executor,
    register_executor,
    task_cpus,
    task_limit,
)
from .local_executor import LocalExecutor
from .ray_executor import RayExecutor, check_reachable

__all__ = [
    "COMPILE_ALLOWANCE_S",
    "EXECUTORS",
    "Executor",
    "LocalExecutor",
    "RayExecutor",
    "check_reachable",
    "make_executor",
    "register_executor",
    "task_cpus",
    "task_limit",
]
