"""``autotune run`` and ``autotune report``: tune a config; summarise, rebuild or compare runs."""

from __future__ import annotations

import argparse
import shlex
import signal
import sys
import threading
from pathlib import Path
from types import FrameType
from typing import Any

from .. import report
from ..api import holds_trials, undo_on_failure
from ..config import load_config
from ..search.log import TrialLog, check_resume, finished_message, load_sessions
from ..search.tuner import LOG_NAME, tune
from .common import EXIT_INTERRUPTED, EXIT_OK

# ---------------------------------------------------------------- run, report


class _StopOnInterrupt:
    """While active, the first Ctrl-C (SIGINT) asks the tuner to stop before its next round, once
    the trials in flight are logged; a second one raises KeyboardInterrupt at once. Calling the
    object says whether a stop was asked. Outside the main thread it changes nothing."""

    def __init__(self) -> None:
        self.asked = False
        self._previous: Any = None

    def __call__(self) -> bool:
        return self.asked

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.asked:
            raise KeyboardInterrupt
        self.asked = True
        print(
            "\nautotune: stopping once the trials in flight are logged (Ctrl-C again stops at once)",
            file=sys.stderr,
            flush=True,
        )

    def __enter__(self) -> _StopOnInterrupt:
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)


def resume_command(args: argparse.Namespace, output: Path) -> str:
    """The ``autotune run ... --resume`` command that continues the run ``args`` started."""
    argv = ["autotune", "run", args.config, "--output", str(output), "--resume"]
    for flag in ("trials", "workers", "ray_address", "seed"):
        value = getattr(args, flag)
        if value is not None:
            argv += [f"--{flag.replace('_', '-')}", str(value)]
    return shlex.join(argv)


def cmd_run(args: argparse.Namespace) -> int:
    """Tune a config: the search, the re-measure of the best, the report; print the outcome.

    A run that stops before its first trial is logged removes the output directory it created
    (or, in a directory that was there, the files it wrote).
    Ctrl-C stops the search once the trials in flight are logged (a second Ctrl-C at once) and
    prints the command that resumes it; the exit status is then 130.
    ``--resume`` refuses a config whose fields differ from the logged run's, and does nothing
    (exit 0) when that run finished with at least this trial budget.
    """
    overrides = {
        "trials": args.trials, "workers": args.workers, "ray_address": args.ray_address,
        "output": args.output, "seed": args.seed,
    }  # fmt: skip
    cfg = load_config(args.config, overrides)
    output = Path(cfg.output)
    if args.resume and holds_trials(output):
        sessions = load_sessions(output)
        check_resume(sessions, cfg)  # a changed config: refused, naming the fields, before anything starts
        done = finished_message(sessions, cfg, len(TrialLog.load(output / LOG_NAME)))
        if done is not None:
            print(f"{done}\n{report.summary(report.load_results(output))}")
            return EXIT_OK
    try:
        with _StopOnInterrupt() as stop, undo_on_failure(output):
            progress = not (args.no_progress or args.quiet)
            tune(cfg, args.resume, progress, report=report.write_report, stop=stop, verbose=args.verbose)
    except KeyboardInterrupt:
        if not holds_trials(output):
            print("autotune: interrupted before the first trial; nothing was kept", file=sys.stderr)
        else:
            logged = len(TrialLog.load(output / LOG_NAME))
            print(
                f"autotune: interrupted; {logged} trial{'s' * (logged != 1)} logged in {output / LOG_NAME}\n"
                f"to continue: {resume_command(args, output)}",
                file=sys.stderr,
            )
        return EXIT_INTERRUPTED
    best = report.read_best(cfg.output)
    if not args.quiet:
        print(report.summary(report.load_results(cfg.output)))
    if best is not None:
        if not args.quiet:
            print(f"best trace (trial {best['trial']}):\n{report.trace_text(best['trace'])}")
        print(report.result_line(best))
    print(f"results: {cfg.output}")
    return EXIT_OK


def cmd_report(args: argparse.Namespace) -> int:
    """Print a run's summary. For a run directory, also rebuild its tables, plots and report.md;
    a ``trials.jsonl`` or ``trials.parquet`` file is only summarised (nothing is written).
    Two or more paths: one table with a column per run (nothing is written)."""
    if len(args.paths) > 1:
        print(report.compare_runs(args.paths))
        return EXIT_OK
    path = Path(args.paths[0])
    df = report.load_results(path)  # a clear error for anything else
    if not args.quiet:
        print(report.summary(df))
    if not path.is_dir():
        return EXIT_OK
    written = report.write_report(path)
    best = report.read_best(path)
    if best is not None:
        print(report.result_line(best))
    print(f"report: {written}")
    return EXIT_OK


def _add_run_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("run", help="search a config's schedule space; write trials, best schedule, report")
    p.add_argument("config", metavar="CONFIG.yaml", help="the run configuration")
    p.add_argument("--trials", type=int, metavar="N", help="trials to log (overrides search.trials)")
    p.add_argument("--workers", type=int, metavar="N", help="Ray workers (overrides ray.workers)")
    p.add_argument("--ray-address", metavar="ADDR", help="Ray cluster to join (default: start a local one)")
    p.add_argument("--output", metavar="DIR", help="output directory (overrides output)")
    p.add_argument("--resume", action="store_true", help="continue the run logged in the output directory")
    p.add_argument("--seed", type=int, metavar="S", help="seed of the search (overrides search.seed)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(run=cmd_run)
    p = sub.add_parser(
        "report", help="summarise a run directory, rebuild report.md and its plots; or compare runs"
    )
    p.add_argument(
        "paths",
        nargs="+",
        metavar="PATH",
        help="the output directory of `autotune run` (report.md rebuilt), or a trials.jsonl or trials.parquet; "
        "two or more: the runs side by side",
    )
    p.set_defaults(run=cmd_report)
