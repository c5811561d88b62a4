"""One measurement as plain data: :class:`MeasureTask`, and :func:`run_task` that performs it.

A task names its workload (a registry name, or ``"file.py:function"``), the
schedule's trace, the memory pools and the measurement settings; it holds no IR,
so it pickles cheaply to a worker process or a Ray node. :func:`run_task` runs
in the worker: it builds the workload (once per process, see
:func:`load_workload`), replays the trace, lowers with the pools and times the
kernel with :func:`~autotune.measure.measure`::

    task = MeasureTask("pool_chain", (("height", 20),), None, trace=sch.trace_json(),
                       pools=(("dtcm", 65536),))
    run_task(task).status   # 'ok'

:func:`remeasure_tasks` times several tasks alternately in one process, so that
their figures share the machine's state (compare only inside one run).
"""

from __future__ import annotations

import difflib
import hashlib
import importlib.util
import inspect
import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from ..errors import ConfigError, LoweringError, MeasureError, ScheduleError
from ..lowering import DEFAULT_POOLS, Lowered, lower
from ..memory import Pool
from ..schedule import Schedule
from ..workloads import Chain, Workload, get, intermediate_bytes
from .result import MeasureResult
from .run import measure, reference_outputs
from .timing import MIN_SAMPLE_S, check_optional_positive

__all__ = [
    "RETIME_NOISE", "SLOWER_ONE_ROUND", "MeasureTask", "check_reference", "load_workload",
    "load_workload_file", "remeasure_tasks", "run_task",
]  # fmt: skip


RETIME_NOISE = 0.5
"""The default ``MeasureTask.retime_noise``: a timing whose runs spread more than half its median
is timed again."""


@dataclass(frozen=True)
class MeasureTask:
    """Everything a worker needs to measure one schedule.

    ``workload_path`` is ``None`` for a registered workload ``workload``, or
    ``"path/to/file.py:function"`` whose function, called with
    ``workload_args``, returns a :class:`~autotune.workloads.Workload` (then
    ``workload`` is only a label). ``trace`` is ``Schedule.trace_json()``;
    ``pools`` are ``(name, bytes)`` pairs (empty: one unbounded pool).
    ``timeout`` bounds the timed part in seconds; executors add an allowance
    for starting the worker and compiling. ``lock_timing`` (on by default)
    takes both of the machine's locks (:mod:`autotune.measure.timing`): workers
    on one machine compile side by side under the shared cpu lock but time one
    at a time under the timing lock, and a kernel with a parallel loop times
    only while nobody compiles. ``False`` takes neither.

    ``cutoff_ms`` (None: every candidate is timed in full) lets a clearly slow candidate stop
    early. When set, in milliseconds, the candidate is built, run once and checked against the
    reference as always; then, after the warm-up, the fastest of its first
    :data:`~autotune.measure.timing.CUTOFF_RUNS` timed runs is compared with ``cutoff_ms``: if
    even that run took longer, timing stops there and the result has status ``cutoff``, with those
    runs as its figures and the reason in ``error``; a checking run that shows the candidate over by
    itself (:func:`~autotune.measure.timing.over_at_once`: seconds long, at least twice the cutoff)
    is its one timing, without warm-up. A
    ``cutoff`` result is never ``ok``: it is never re-measured at the end of a run nor chosen as
    the best. A search sets it to a few times the best median measured so far (a candidate slower
    than that is not worth its repeats); :func:`remeasure_tasks` ignores it.

    ``retime_noise``: an ``ok`` timing whose spread over its median
    (:func:`~autotune.measure.timing.noise`) exceeds it is timed a second time at once, if both
    timings fit in ``timeout``, and the result is marked ``retimed`` (None: never re-timed). The
    default, 0.5, is the threshold above which the report calls a trial noisy.

    ``min_sample_s``: a kernel quicker than this is timed in batches of calls lasting about this
    long (:data:`~autotune.measure.timing.MIN_SAMPLE_S`; None: one call per timed run).
    """

    workload: str
    workload_args: tuple[tuple[str, Any], ...]
    workload_path: str | None
    trace: str
    pools: tuple[tuple[str, int], ...]
    planner: str = "greedy_by_size"
    warmup: int = 2
    repeats: int = 10
    check: bool = True
    seed: int = 0
    timeout: float = 30.0
    lock_timing: bool = True
    cutoff_ms: float | None = None
    retime_noise: float | None = RETIME_NOISE
    min_sample_s: float | None = MIN_SAMPLE_S

    def __post_init__(self) -> None:
        if not isinstance(self.trace, str):
            raise MeasureError(
                f"MeasureTask: trace must be the JSON text of a trace, got {type(self.trace).__name__}"
            )
        for name in ("warmup", "repeats", "seed"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise MeasureError(f"MeasureTask: {name} must be an int >= 0, got {value!r}")
        if self.repeats < 1:
            raise MeasureError(f"MeasureTask: repeats must be >= 1, got {self.repeats}")
        if not isinstance(self.lock_timing, bool):
            raise MeasureError(f"MeasureTask: lock_timing must be a bool, got {self.lock_timing!r}")
        if (
            isinstance(self.timeout, bool)
            or not isinstance(self.timeout, (int, float))
            or not self.timeout > 0
        ):
            raise MeasureError(
                f"MeasureTask: timeout must be a positive number of seconds, got {self.timeout!r}"
            )
        check_optional_positive("MeasureTask", "cutoff_ms", self.cutoff_ms)
        check_optional_positive("MeasureTask", "retime_noise", self.retime_noise)
        check_optional_positive("MeasureTask", "min_sample_s", self.min_sample_s)

    @property
    def parallel(self) -> bool:
        """Whether the trace has a ``parallel`` step: the kernel then runs a loop on numba's threads,
        one per usable core of the machine that measures it. False for a trace that is not JSON."""
        try:
            steps = json.loads(self.trace).get("steps", [])
        except (ValueError, AttributeError):
            return False
        return any(isinstance(s, dict) and s.get("op") == "parallel" for s in steps)


@dataclass(frozen=True)
class _Prepared:
    """A workload with its seeded inputs and their reference outputs."""

    workload: Workload
    inputs: tuple[np.ndarray, ...]
    references: tuple[np.ndarray, ...]


_WORKLOADS: dict[tuple[Any, ...], Workload] = {}
"""(name, args, path) -> the workload built in this process."""
_INPUTS: dict[tuple[Any, ...], _Prepared] = {}
"""(name, args, path, seed, check) -> inputs and reference outputs made in this process."""


def _split_spec(spec: str) -> tuple[Path, str]:
    """``"dir/file.py:function"`` -> (the absolute file, the function name)."""
    path_text, sep, func_name = spec.rpartition(":")
    if not sep or not path_text or not func_name.isidentifier():
        raise ConfigError(f"workload path {spec!r}: expected 'file.py:function'")
    return Path(path_text).expanduser().resolve(), func_name


def _import_file(path: Path) -> ModuleType:
    """Import ``path`` as a module registered in ``sys.modules`` under a name made of its path, size
    and modification time: imported once per process, again when the file changes."""
    try:
        stat = path.stat()
    except OSError:
        raise ConfigError(f"workload file {str(path)!r} does not exist") from None
    key = f"{path}:{stat.st_size}:{stat.st_mtime_ns}"
    module_name = "autotune_workload_" + hashlib.sha256(key.encode()).hexdigest()[:16]
    module = sys.modules.get(module_name)
    if module is not None:
        return module
    module_spec = importlib.util.spec_from_file_location(module_name, path)
    if module_spec is None or module_spec.loader is None:
        raise ConfigError(f"workload file {str(path)!r} cannot be imported as a Python module")
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[module_name] = module
    try:
        module_spec.loader.exec_module(module)
    except (Exception, SystemExit) as err:
        del sys.modules[module_name]
        raise ConfigError(
            f"workload file {str(path)!r} raised {type(err).__name__} on import: {err}"
        ) from err
    return module


def _load_function(path: Path, func_name: str) -> Callable[..., Any]:
    module = _import_file(path)
    builder = getattr(module, func_name, None)
    if not callable(builder):
        public = [n for n in dir(module) if not n.startswith("_") and callable(getattr(module, n))]
        close = difflib.get_close_matches(func_name, public, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise ConfigError(f"workload file {str(path)!r} has no function {func_name!r}{hint}")
    return builder  # type: ignore[no-any-return]


def _from_chain(chain: Chain, builder: Callable[..., Any], args: dict[str, Any]) -> Workload:
    """The :class:`Workload` of a chain that ``builder(**args)`` returned: named after the function,
    its parameters its defaults overridden by ``args``, its description the docstring's first line."""
    try:
        defaults = {
            name: p.default
            for name, p in inspect.signature(builder).parameters.items()
            if p.default is not inspect.Parameter.empty
        }
    except (TypeError, ValueError):
        defaults = {}
    doc = (inspect.getdoc(builder) or "").strip().splitlines()
    return Workload(
        name=builder.__name__,
        params={**defaults, **args},
        func=chain.func,
        reference=chain.reference,
        description=doc[0] if doc else "",
        flops=chain.flops,
        intermediate_bytes=intermediate_bytes(chain.func),
        input_scales=chain.input_scales,
    )


def check_reference(workload: Workload, where: str, seed: int = 0) -> None:
    """Run the workload's reference once on its seeded inputs and compare what it returns with the
    function's outputs: one array per output, of the output's shape and dtype.

    Raises ConfigError starting with ``where`` (say ``"workload file.py:function"``) and saying
    which output differs and how.
    """
    outputs = workload.func.outputs
    names = ", ".join(repr(b.name) for b in outputs)
    try:
        got = workload.reference(*workload.make_inputs(seed))
    except Exception as err:
        raise ConfigError(f"{where}: the reference raised {type(err).__name__}: {err}") from err
    arrays = (got,) if isinstance(got, np.ndarray) else got
    if not isinstance(arrays, (tuple, list)) or not all(isinstance(a, np.ndarray) for a in arrays):
        raise ConfigError(
            f"{where}: the reference must return a numpy array or a tuple of them, one per output "
            f"({names}); it returned {type(got).__name__}"
        )
    if len(arrays) != len(outputs):
        raise ConfigError(
            f"{where}: the reference returned {len(arrays)} array{'s' * (len(arrays) != 1)}, "
            f"the chain has {len(outputs)} output{'s' * (len(outputs) != 1)} ({names})"
        )
    for i, (array, buf) in enumerate(zip(arrays, outputs)):
        shape = tuple(buf.const_shape())
        if array.shape != shape:
            raise ConfigError(
                f"{where}: reference output {i} has shape {array.shape}, expected {shape} "
                f"(the shape of the chain's output {buf.name!r})"
            )
        if array.dtype != np.dtype(buf.dtype):
            raise ConfigError(
                f"{where}: reference output {i} has dtype {array.dtype}, expected {buf.dtype} "
                f"(the dtype of the chain's output {buf.name!r}; cast with .astype(np.{buf.dtype}))"
            )


def load_workload_file(spec: str, args: dict[str, Any], check: bool = False) -> Workload:
    """Call ``function(**args)`` from ``"file.py:function"`` and return its :class:`Workload`.

    The function returns a :class:`Workload`, or a :class:`~autotune.workloads.Chain` that
    becomes one named after the function (see :func:`_from_chain`). With ``check``, a chain's
    reference is run once and compared with the outputs' shapes and dtypes
    (:func:`check_reference`); a finished ``Workload`` is used as it is. The file is imported
    once per process (again if it changes). Raises ConfigError naming the file and function when
    the file is missing or fails to import, lacks the function, the function raises or returns
    something else, or the reference does not match.
    """
    path, func_name = _split_spec(spec)
    if not path.is_file():
        raise ConfigError(f"workload path {spec!r}: no file {path}")
    builder = _load_function(path, func_name)
    where = f"workload {path}:{func_name}"
    shown = ", ".join(f"{k}={v!r}" for k, v in args.items())
    try:
        result = builder(**args)
    except ConfigError as err:
        raise ConfigError(f"{where}: {err}") from err
    except Exception as err:
        raise ConfigError(f"{where}: {func_name}({shown}) raised {type(err).__name__}: {err}") from err
    if isinstance(result, Workload):
        return result
    if not isinstance(result, Chain):
        raise ConfigError(
            f"{where}: {func_name}({shown}) must return a Workload or a Chain, got {type(result).__name__}"
        )
    workload = _from_chain(result, builder, args)
    if check:
        check_reference(workload, where)
    return workload


def load_workload(name: str, args: tuple[tuple[str, Any], ...] = (), path: str | None = None) -> Workload:
    """The workload ``name`` (or the one ``path`` builds) with ``args``, built once per process."""
    key = (name, repr(args), path)  # repr: a path workload's arguments may be unhashable JSON
    workload = _WORKLOADS.get(key)
    if workload is None:
        workload = get(name, **dict(args)) if path is None else load_workload_file(path, dict(args))
        _WORKLOADS[key] = workload
    return workload


def _prepare(task: MeasureTask) -> _Prepared:
    key = (task.workload, repr(task.workload_args), task.workload_path, task.seed, task.check)
    prepared = _INPUTS.get(key)
    if prepared is None:
        workload = load_workload(task.workload, task.workload_args, task.workload_path)
        inputs = workload.make_inputs(task.seed)
        refs = reference_outputs(workload, inputs) if task.check else ()
        prepared = _INPUTS[key] = _Prepared(workload, inputs, refs)
    return prepared


def lower_task(task: MeasureTask, workload: Workload) -> Lowered:
    """Replay the task's trace on the workload and lower it with the task's pools and planner.

    Raises ScheduleError (the trace does not apply) or LoweringError (e.g. the
    pools cannot hold the allocations).
    """
    sch = Schedule.replay(workload.func, task.trace)
    pools = tuple(Pool(name, size) for name, size in task.pools) or DEFAULT_POOLS
    return lower(sch.func, pools=pools, planner=task.planner, seed=task.seed)


def _measure_lowered(task: MeasureTask, prepared: _Prepared, lowered: Lowered) -> MeasureResult:
    return measure(
        lowered.func,
        prepared.references,
        prepared.inputs,
        plan=lowered.plan,
        warmup=task.warmup,
        repeats=task.repeats,
        check=task.check,
        lock_timing=task.lock_timing,
        cutoff_ms=task.cutoff_ms,
        retime_noise=task.retime_noise,
        min_sample_s=task.min_sample_s,
        time_budget_s=task.timeout,
    )


def run_task(task: MeasureTask) -> MeasureResult:
    """Measure ``task`` in this process: build, replay, lower, compile, check, time.

    A trace that does not apply or a function that cannot be lowered gives an
    ``error`` result with the reason; any other exception (a workload that
    cannot be built, a bug) propagates. Crashes and hangs need another process:
    run tasks through an executor (``autotune.search.executors``).
    """
    prepared = _prepare(task)
    try:
        lowered = lower_task(task, prepared.workload)
    except (ScheduleError, LoweringError) as exc:
        return MeasureResult.failure("error", f"{type(exc).__name__}: {exc}")
    return _measure_lowered(task, prepared, lowered)


SLOWER_ONE_ROUND = 10.0
"""A re-measured task whose first round's median is over this many times the fastest first-round
median of its call, and over its ``min_sample_s``, is timed in that round only. The rounds are there
to average the machine's moments (a core's speed varies by about 30 % from one to the next), which
cannot bring such a task near the fastest; an unscheduled chain, re-timed beside the best for the
speedup, takes seconds a run and its later rounds would be most of the re-measure's time. A kernel
quicker than ``min_sample_s`` is timed in batches of about that length, so its rounds cost the same
whatever its speed and it keeps them all (on a busy machine a microsecond kernel's median can be
inflated tenfold in one round)."""


def remeasure_tasks(tasks: Sequence[MeasureTask], rounds: int) -> list[list[MeasureResult]]:
    """Time every task ``rounds`` times, alternating between them: round 1 of each, then round 2...

    Each task is lowered and compiled once (later rounds reuse the compiled
    kernel) and checked in every round. ``result[i]`` holds task ``i``'s
    results; a task that cannot be lowered gets ``rounds`` copies of its error.
    A task over :data:`SLOWER_ONE_ROUND` times the fastest in round 1 (and slower
    than its ``min_sample_s``) has that round's result only. Every task is timed in
    full: ``cutoff_ms`` is ignored.
    """
    if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 1:
        raise MeasureError(f"remeasure: rounds must be an int >= 1, got {rounds!r}")
    tasks = [replace(task, cutoff_ms=None) for task in tasks]
    prepared: list[tuple[_Prepared, Lowered | MeasureResult]] = []
    for task in tasks:
        inputs = _prepare(task)
        try:
            prepared.append((inputs, lower_task(task, inputs.workload)))
        except (ScheduleError, LoweringError) as exc:
            prepared.append((inputs, MeasureResult.failure("error", f"{type(exc).__name__}: {exc}")))
    results: list[list[MeasureResult]] = [[] for _ in tasks]
    timed = list(range(len(tasks)))
    for round_ in range(rounds):
        for i in timed:
            task, (inputs, lowered) = tasks[i], prepared[i]
            if isinstance(lowered, MeasureResult):
                results[i].append(lowered)
            else:
                results[i].append(_measure_lowered(task, inputs, lowered))
        if round_ == 0:
            timed = _within_one_round(tasks, results)
    return results


def _within_one_round(tasks: Sequence[MeasureTask], results: Sequence[Sequence[MeasureResult]]) -> list[int]:
    """The tasks timed again after round 1: all but the ``ok`` ones over :data:`SLOWER_ONE_ROUND`
    times the fastest ``ok`` median of that round and over their ``min_sample_s`` (a failed task
    keeps its rounds: its error repeats without a timing)."""
    medians = [rs[0].median_ms if rs[0].ok else None for rs in results]
    fastest = min((m for m in medians if m is not None), default=None)

    def kept(task: MeasureTask, median: float | None) -> bool:
        if median is None or fastest is None:
            return True
        return median <= SLOWER_ONE_ROUND * fastest or median <= (task.min_sample_s or 0.0) * 1e3

    return [i for i, (task, m) in enumerate(zip(tasks, medians, strict=True)) if kept(task, m)]
