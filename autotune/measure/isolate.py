"""Measure in a child process, so a crash or a hang becomes a result instead of killing the tuner.

numba does no bounds checks: a wrong index in a generated kernel may write
anywhere and segfault. :func:`measure_in_subprocess` runs :func:`measure` in a
``spawn``-ed child and turns a child that dies into ``crashed`` (with its exit
code or signal) and one that does not answer in time into ``timeout``. The
child pays for importing numba and loading or compiling the kernel, so keep
one worker per stream of candidates where speed matters (the Ray executor).
"""

from __future__ import annotations

import multiprocessing
import signal
import traceback
from collections.abc import Sequence
from multiprocessing.connection import Connection
from typing import Any

import numpy as np

from .. import ir
from ..memory import MemoryPlan
from .result import MeasureResult
from .run import Reference, measure, reference_outputs

__all__ = ["measure_in_subprocess"]


def _child(conn: Connection, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    try:
        result = measure(*args, **kwargs)
        conn.send(("result", result))
    except BaseException:  # report, do not lose: the parent turns it into an 'error' result
        conn.send(("exception", traceback.format_exc()))
    finally:
        conn.close()


def exit_text(code: int | None) -> str:
    """How a child process ended, naming the signal that killed it."""
    if code is not None and code < 0:
        try:
            return f"exit code {code} (killed by {signal.Signals(-code).name})"
        except ValueError:
            pass
    return f"exit code {code}"


def measure_in_subprocess(
    func_lowered: ir.Func,
    workload_or_reference: Reference,
    inputs: Sequence[np.ndarray],
    plan: MemoryPlan | None = None,
    warmup: int = 2,
    repeats: int = 10,
    check: bool = True,
    timeout: float = 30.0,
    cache_dir: str | None = None,
) -> MeasureResult:
    """:func:`measure` in a fresh ``spawn`` child with a ``timeout`` in seconds (build included).

    The reference outputs are computed here, in the parent, so only arrays and
    the IR cross the process boundary. A child that dies gives ``crashed``, one
    still running after ``timeout`` is killed and gives ``timeout``, and an
    exception in the child gives ``error`` with its traceback.
    """
    refs = reference_outputs(workload_or_reference, inputs) if check else ()
    ctx = multiprocessing.get_context("spawn")
    receiver, sender = ctx.Pipe(duplex=False)
    kwargs = {"plan": plan, "warmup": warmup, "repeats": repeats, "check": check, "cache_dir": cache_dir}
    proc = ctx.Process(
        target=_child,
        args=(sender, (func_lowered, refs, tuple(inputs)), kwargs),
        daemon=True,
        name="autotune-measure",
    )
    proc.start()
    sender.close()
    try:
        if not receiver.poll(timeout):
            proc.kill()
            proc.join()
            return MeasureResult.failure("timeout", f"no result after {timeout:g} s; the worker was killed")
        try:
            kind, payload = receiver.recv()
        except EOFError:
            proc.join()
            return MeasureResult.failure("crashed", f"the worker died: {exit_text(proc.exitcode)}")
    finally:
        receiver.close()
    proc.join()
    if kind == "exception":
        return MeasureResult.failure("error", f"exception in the worker:\n{payload}")
    return payload  # type: ignore[no-any-return]
