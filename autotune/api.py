"""The Python API: tune a config from a script or a notebook, and load the best kernel of a run.

::

    import autotune
    run = autotune.tune("examples/small.yaml", trials=8, output="out/small", executor="local")
    run.trials          # pandas DataFrame, one row per trial (autotune.load_results)
    run.best_ms, run.speedup, run.best["knobs"]
    kernel = autotune.load_best("out/small")   # or out/small/best.json
    out = kernel(x)     # numpy in, numpy out

:func:`tune` takes a config file, a dict of the same fields (paths relative to the
current directory) or a :class:`~autotune.config.RunConfig`. It needs no
``if __name__ == "__main__":`` guard: the local executor's worker processes never
import the calling script, and the Ray executor ships only the ``autotune``
package. A run that stops before its first trial is logged (a bad config, a
reference that does not match, a peak limit no schedule meets, an interrupt)
removes the output directory it created, or the files it wrote into one that
was already there, as ``autotune run`` does.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from . import report
from .config import RunConfig, WorkloadConfig, config_from_data, load_config, load_workload
from .errors import AutotuneError, ConfigError
from .lowering import lower
from .memory import Pool
from .schedule import Schedule
from .search.log import TrialLog, check_resume, finished_message, load_sessions
from .search.tuner import LOG_NAME, TuneResult
from .search.tuner import tune as _tune
from .workloads.arrays import aligned_array

if TYPE_CHECKING:
    import pandas as pd

    from .codegen import Kernel
    from .search.executors import Executor

__all__ = ["BestKernel", "Tuned", "load_best", "resolve_config", "tune", "undo_on_failure"]


@dataclass(frozen=True)
class Tuned:
    """What :func:`tune` returns: the run's directory, its trials and its best schedule.

    ``trials`` is one row per logged trial (:func:`autotune.load_results`); ``best`` is the
    contents of ``best.json`` (trace, knobs, figures of the best and of the default schedule);
    ``result`` the tuner's own record, None when a resumed run had nothing left to do.
    """

    output: Path
    trials: pd.DataFrame = field(repr=False)
    best: dict[str, Any] = field(repr=False)
    result: TuneResult | None = field(default=None, repr=False)

    @property
    def best_ms(self) -> float | None:
        """The best schedule's re-measured median latency in milliseconds."""
        return self.best["figures"]["median_ms"]  # type: ignore[no-any-return]

    @property
    def speedup(self) -> float | None:
        """The default schedule's median over the best's (same worker, same re-measure)."""
        return self.best.get("speedup")

    def kernel(self) -> BestKernel:
        """The best schedule compiled: :func:`load_best` of this run."""
        return load_best(self.output)


def resolve_config(
    config: str | os.PathLike[str] | Mapping[str, Any] | RunConfig, **overrides: Any
) -> RunConfig:
    """A RunConfig from a config file, a dict of its fields or a RunConfig, with ``overrides``
    (``trials``, ``output``, ``seed``, ``workers``, ``ray_address``; None: not given)."""
    if isinstance(config, RunConfig):
        again = config_from_data(config.to_dict(), overrides, base=Path(config.source).parent)
        return replace(again, source=config.source)
    if isinstance(config, Mapping):
        return config_from_data(_plain(config), overrides)
    if isinstance(config, (str, os.PathLike)):
        return load_config(os.fspath(config), overrides)
    raise ConfigError(
        f"autotune.tune: expected a config file path, a dict or a RunConfig, got {type(config).__name__}"
    )


def _plain(value: Any) -> Any:
    """``value`` with paths as text, as a YAML file would hold them."""
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return str(value) if isinstance(value, os.PathLike) else value


def tune(
    config: str | os.PathLike[str] | Mapping[str, Any] | RunConfig,
    *,
    trials: int | None = None,
    output: str | os.PathLike[str] | None = None,
    resume: bool = False,
    seed: int | None = None,
    executor: str | Executor = "ray",
    workers: int | None = None,
    ray_address: str | None = None,
    progress: bool = False,
    stop: Callable[[], bool] | None = None,
    verbose: bool = False,
) -> Tuned:
    """Search the config's schedule space, re-measure the best, write the run directory; return it.

    ``executor``: ``"ray"`` (a local Ray, or the cluster at ``ray_address``/``ray.address``),
    ``"local"`` (``workers`` processes of its own, each reused for up to 50 measurements), or an
    :class:`~autotune.search.executors.Executor` the caller owns. ``trials``, ``output``,
    ``seed``, ``workers`` and ``ray_address`` override the config. ``resume`` continues the run
    logged in the output directory (a changed config is refused; a finished run is returned as it
    is). ``stop()`` turning true stops the search before its next round (KeyboardInterrupt, the
    trials so far logged); ``verbose`` shows Ray's own messages. Raises AutotuneError (ConfigError for a bad config) with the reason.

    Ctrl-C (a KeyboardInterrupt anywhere in the run, Ray's start-up included) stops the run at
    once: the measurements in flight are cancelled and not logged, the workers are stopped, a Ray
    that this call started is shut down, and the KeyboardInterrupt reaches the caller with a note
    saying how many trials the log keeps. The log stays a resumable run: ``resume=True`` with the
    same config measures what is left. Interrupted before its first trial, the run keeps nothing.
    """
    overrides = {
        "trials": trials,
        "output": output,
        "seed": seed,
        "workers": workers,
        "ray_address": ray_address,
    }
    cfg = resolve_config(config, **overrides)
    out = Path(cfg.output)
    if resume and holds_trials(out):
        sessions = load_sessions(out)
        check_resume(sessions, cfg)
        if finished_message(sessions, cfg, len(TrialLog.load(out / LOG_NAME))) is not None:
            return _tuned(out, None)
    try:
        with undo_on_failure(out):
            result = _tune(
                cfg,
                resume,
                progress,
                executor=executor,
                report=report.write_report,
                stop=stop,
                verbose=verbose,
            )
    except KeyboardInterrupt as exc:
        _note_interrupt(exc, out)
        raise
    return _tuned(out, result)


def _note_interrupt(exc: KeyboardInterrupt, out: Path) -> None:
    """Add to the traceback of an interrupted :func:`tune` what was kept and how to continue."""
    try:
        logged = len(TrialLog.load(out / LOG_NAME)) if holds_trials(out) else 0
    except (AutotuneError, OSError):
        logged = 0
    if logged:
        note = (
            f"autotune.tune: interrupted; {logged} trial{'s' * (logged != 1)} logged in {out / LOG_NAME}; "
            "tune(..., resume=True) with the same config continues the run"
        )
    else:
        note = "autotune.tune: interrupted before the first trial was logged; nothing was kept"
    add_note = getattr(exc, "add_note", None)  # Python 3.11+
    if add_note is not None:
        add_note(note)


def _tuned(out: Path, result: TuneResult | None) -> Tuned:
    best = report.read_best(out)
    if best is None:
        raise AutotuneError(f"{out}: the run has no best.json")
    return Tuned(out, report.load_results(out), best, result)


# ---------------------------------------------------------------- a run that stops early leaves nothing


def holds_trials(output: Path) -> bool:
    """Whether ``output`` has a trial log with at least one record (an unreadable log counts)."""
    log = output / LOG_NAME
    try:
        return log.exists() and bool(TrialLog.load(log))
    except (AutotuneError, OSError):
        return True


def _new_directory(path: Path) -> Path | None:
    """The outermost directory of ``path`` that does not exist yet (``path`` itself or a parent);
    None if ``path`` exists."""
    created = None
    for candidate in (path, *path.parents):
        if candidate.exists():
            break
        created = candidate
    return created


def _remove_new(output: Path, created: Path | None, existing: set[str]) -> None:
    """Remove the directory a run created, or else the entries of ``output`` not in ``existing``."""
    if created is not None:
        shutil.rmtree(created, ignore_errors=True)
        return
    if not output.is_dir():
        return
    for entry in output.iterdir():
        if entry.name not in existing:
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                entry.unlink(missing_ok=True)


@contextmanager
def undo_on_failure(output: Path) -> Iterator[None]:
    """On any exception (KeyboardInterrupt too) before a trial is logged in ``output``, remove what
    the run wrote there (see :func:`_remove_new`); the exception propagates."""
    created = _new_directory(output)
    existing = {p.name for p in output.iterdir()} if output.is_dir() else set()
    try:
        yield
    except BaseException:
        if not holds_trials(output):
            _remove_new(output, created, existing)
        raise


# ---------------------------------------------------------------- the best kernel of a run


class BestKernel:
    """A run's best schedule, compiled: ``kernel(*inputs)`` returns the output array (a tuple of
    them for a chain with several outputs). Inputs are numpy arrays of the chain's input shapes,
    in order; a dtype that casts safely (``same_kind``) is converted."""

    def __init__(
        self,
        kernel: Kernel,
        inputs: tuple[tuple[str, tuple[int, ...], str], ...],
        outputs: tuple[tuple[tuple[int, ...], str], ...],
        best: dict[str, Any],
    ) -> None:
        self._kernel = kernel
        self._inputs = inputs
        self._outputs = outputs
        self.best = best
        """The contents of the run's ``best.json``."""

    @property
    def source(self) -> str:
        """The generated kernel's Python source."""
        return self._kernel.source

    def __call__(self, *arrays: Any) -> np.ndarray | tuple[np.ndarray, ...]:
        if len(arrays) != len(self._inputs):
            names = ", ".join(name for name, _, _ in self._inputs)
            raise AutotuneError(
                f"{self}: expected {len(self._inputs)} input arrays ({names}), got {len(arrays)}"
            )
        args = []
        for k, (value, (name, shape, dtype)) in enumerate(zip(arrays, self._inputs)):
            a = np.asarray(value)
            if a.shape != shape or not np.can_cast(a.dtype, dtype, "same_kind"):
                raise AutotuneError(
                    f"{self}: input {k} ({name}) must be {dtype} of shape {list(shape)}, got {a.dtype} {list(a.shape)}"
                )
            args.append(aligned_array(a.astype(dtype, copy=False)))
        outs = [aligned_array(np.zeros(shape, dtype)) for shape, dtype in self._outputs]
        self._kernel(*args, *outs)
        return outs[0] if len(outs) == 1 else tuple(outs)

    def __repr__(self) -> str:
        return f"BestKernel({self.best.get('name')!r}, trial {self.best.get('trial')})"


def _read_best_json(path: Path) -> dict[str, Any]:
    if path.is_dir():
        path = path / "best.json"
        if not path.is_file():
            raise AutotuneError(
                f"{path.parent}: no best.json (the run has not finished, or this is not a run directory)"
            )
    elif not path.is_file():
        raise AutotuneError(f"{path}: no such file or directory; expected a run directory or its best.json")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise AutotuneError(f"{path}: not a best.json ({exc})") from None
    missing = [
        k
        for k in ("workload", "trace", "pools", "planner", "seed")
        if not isinstance(data, dict) or k not in data
    ]
    if missing:
        raise AutotuneError(f"{path}: not a best.json of autotune run (no {', '.join(missing)})")
    return data  # type: ignore[no-any-return]


def load_best(path: str | os.PathLike[str]) -> BestKernel:
    """The best schedule of a run (its directory, or its ``best.json``), replayed on its workload,
    lowered with the run's pools and compiled. AutotuneError names the path when it is not one."""
    from .codegen import build

    best = _read_best_json(Path(path))
    wl_cfg = best["workload"]
    workload = load_workload(
        WorkloadConfig(wl_cfg.get("name"), wl_cfg.get("path"), tuple((wl_cfg.get("args") or {}).items()))
    )
    sch = Schedule.replay(workload.func, json.dumps(best["trace"]))
    pools = tuple(Pool(p["name"], p["size"]) for p in best["pools"])
    lowered = lower(sch.func, pools=pools, planner=best["planner"], seed=best["seed"])
    kernel = build(lowered.func, lowered.plan)
    func = lowered.func
    inputs = tuple((b.name, tuple(b.const_shape()), str(b.dtype)) for b in func.inputs)
    outputs = tuple((tuple(b.const_shape()), str(b.dtype)) for b in func.outputs)
    return BestKernel(kernel, inputs, outputs, best)
