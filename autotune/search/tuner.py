"""The tuner: a search strategy proposes knobs, the cost model ranks them, the executor measures the chosen ones.

:func:`tune` runs a whole search for a :class:`~autotune.config.RunConfig`::

    result = tune(load_config("examples/small.yaml"), report=write_report)
    result.speedup, result.best.trace

It sets the run up, runs rounds (:class:`~autotune.search.rounds.Search`: propose, lower, rank,
measure, log, learn) until the search ends, then finishes the run.

Before the first round, :func:`~autotune.search.feasibility.check_fits` makes
sure that some schedule of the space fits the pools and ``peak_limit`` (else a
ConfigError with the smallest peak, and no output directory), and a ``search.storage`` other than
the run's own file is opened and checked (:func:`~autotune.search.strategies.optuna_storage.check_storage`).
The search stops when ``search.trials`` trials that use the budget are logged (``ok``, ``cutoff``,
``wrong``, ``timeout``, ``crashed``, ``error`` and ``invalid``: every status but ``infeasible``), when
``search.time_budget`` has passed (this session's wall time: no round starts after it, the first
always runs, and the run ends as if its trials were used up), when :data:`STALE_ROUNDS` rounds in a
row find nothing new (a small space fully explored), or when :data:`IDLE_ROUNDS` rounds in a row
measure nothing. Then :mod:`autotune.search.best` re-measures the top trials and the default
schedule and writes ``best.json``, ``best_ir.txt`` and ``best_kernel.py``. The report layer sits
below this one, so ``tune`` calls the ``report`` it is given (the CLI passes
``autotune.report.write_report``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..config import RunConfig, load_workload
from ..errors import AutotuneError
from .best import TuneResult, finish, warm_start
from .cost_model import make_cost_model
from .executors import Executor, make_executor
from .feasibility import check_fits
from .log import TrialLog, end_session, log_path_for, start_session, writing_results
from .rounds import CUTOFF_FACTOR, CUTOFF_FLOOR_MS, Search
from .space import load_space
from .stopwatch import Stopwatch
from .strategies.optuna_storage import StudyStorage, check_storage

__all__ = [
    "CUTOFF_FACTOR",
    "CUTOFF_FLOOR_MS",
    "IDLE_ROUNDS",
    "LOG_NAME",
    "STALE_ROUNDS",
    "TuneResult",
    "tune",
]

LOG_NAME = "trials.jsonl"
STALE_ROUNDS = 3
"""The search stops after this many rounds in a row that log nothing new (a small space fully explored)."""
IDLE_ROUNDS = 10
"""... or after this many rounds in a row that measure nothing (every new candidate infeasible:
infeasible trials do not use the budget, so without this a space whose feasible part the sampler
cannot find would run for ever; :func:`~autotune.search.feasibility.check_fits` has shown that
some schedule fits)."""


def tune(
    cfg: RunConfig,
    resume: bool = False,
    progress: bool = True,
    *,
    executor: str | Executor = "ray",
    report: Callable[[Path], object] | None = None,
    stop: Callable[[], bool] | None = None,
    verbose: bool = False,
) -> TuneResult:
    """Search ``cfg``'s space, re-measure the best trials against the default schedule, write the outputs.

    ``executor`` is a registered name (``"ray"`` uses ``cfg.ray``; ``"local"``
    runs ``cfg.ray.workers`` processes) or an executor the caller owns.
    ``report(output)`` runs last. When ``stop()`` turns true the search raises KeyboardInterrupt
    before its next round (the CLI's first Ctrl-C). ``verbose`` shows Ray's own messages.
    ``result.driver`` says where the search
    loop's wall time went: waiting on the executor, or the driver's own parts
    (:class:`~autotune.search.stopwatch.DriverTime`), and the run's before and after it (setting
    up, the fit check, starting and stopping the executor, the re-measure, the report). Raises AutotuneError if
    ``output`` already holds a log and ``resume`` is False, or if no trial is
    ``ok``; ConfigError if ``peak_limit`` is below every schedule of the space, or if
    ``search.storage`` cannot be opened or holds a study of the run's name that another run wrote.
    """
    output = Path(cfg.output)
    clock = Stopwatch()  # the run's parts (RUN_PARTS) and the search loop's (PARTS)
    with clock("setup"):
        wl = load_workload(cfg.workload)
        space = load_space(cfg.search.space, wl, cfg.memory.pools)
    mem = cfg.memory
    with clock("fits"):
        # some schedule must fit: infeasible trials do not use the budget, so none fitting would never end
        check_fits(space, wl, mem.pools, mem.planner, cfg.search.seed, mem.peak_limit)
    with clock("setup"):
        warm = [] if cfg.search.warm_start is None else warm_start(cfg.search.warm_start, space)
        model = make_cost_model(cfg.search.cost_model, cfg.search.seed, cfg.search.pretrained)
        storage = StudyStorage.of(cfg)
        if storage is not None:
            check_storage(storage)  # a shared database is checked before the output directory is made
        # the output directory is made once the checks pass, and before a cluster is started: an unusable
        # one is refused at once (a run that fails before its first trial removes what it made)
        log_path = log_path_for(output, resume)
    owned = isinstance(executor, str)
    if isinstance(executor, str):
        kwargs: dict[str, Any] = {"workers": cfg.ray.workers}
        if executor == "ray":
            kwargs.update(address=cfg.ray.address, verbose=verbose)
        with clock("start"):
            executor = make_executor(executor, **kwargs)  # an unreachable cluster: refused here
    try:
        with TrialLog(log_path) as log:
            with clock("setup"):
                start_session(log, cfg)  # machine, versions, config fingerprint; refuses a changed config
                search = Search(cfg, wl, space, log, model, executor, progress, warm, storage, clock)
            try:
                _run_rounds(search, cfg.search.time_budget, stop)
            finally:
                search.close()
            with clock("finish"), writing_results(output):  # best.json, best_ir.txt, best_kernel.py
                result = finish(cfg, wl, list(log.records), executor, search.cross_validated())
                end_session(log)
    except AutotuneError:
        if report is not None and (output / LOG_NAME).exists():
            # the table of what failed is still worth having, but not in place of the reason
            with contextlib.suppress(OSError, AutotuneError):
                report(output)
        raise
    finally:
        if owned:
            with clock("stop"):
                executor.close()
    if report is not None:
        with clock("report"), writing_results(output):
            report(output)
    return dataclasses.replace(result, driver=clock.snapshot())


def _run_rounds(search: Search, time_budget: float | None, stop: Callable[[], bool] | None) -> None:
    """Run rounds until the trial budget is used, ``time_budget`` seconds have passed, or the
    search goes stale or idle; KeyboardInterrupt before a round once ``stop()`` is true."""
    stale = idle = 0
    deadline = None if time_budget is None else time.monotonic() + time_budget
    while search.remaining > 0 and stale < STALE_ROUNDS and idle < IDLE_ROUNDS:
        if stop is not None and stop():  # every trial of the rounds so far is logged
            raise KeyboardInterrupt
        logged, measured = search.run_round()
        stale = 0 if logged else stale + 1
        idle = 0 if measured else idle + 1
        if deadline is not None and time.monotonic() >= deadline:
            break  # search.time_budget: the trials so far are the run's
