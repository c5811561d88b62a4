"""The ``autotune`` command: list the built-in workloads, show their IR and kernels, check them.

::

    autotune workloads                                    the chains, their parameters and figures
    autotune show pool_chain --param height=20 --lowered  IR, lowered IR (--lowered) or kernel (--source)
    autotune check pool_chain --pools dtcm=64KiB,sram=2MiB
    autotune check my_chain.py:blur_max                   a chain of one's own: FILE.py:FUNCTION
    autotune check --all                                  every chain at its default size, one table
    autotune run examples/small.yaml --output out/small   tune a config (see autotune.search.tuner)
    autotune report out/small                             summary; rebuild report.md and its plots
    autotune report out/small/trials.parquet              the summary of a trial table or log only
    autotune train-cost-model out/a out/b --output m.json a ranking cost model from earlier runs' logs

``check`` lowers the default schedule (or one replayed from ``--trace``), plans
memory in the pools, compiles, runs on seeded inputs, compares with the numpy
reference and times the kernel. :func:`main` returns the exit status: 0 when
every check is ok, 1 when an output is wrong or a kernel cannot be built, 2 for
a user error (an :class:`~autotune.errors.AutotuneError`: unknown workload or
parameter, bad pools, pools too small, a trace that does not apply), which is
printed as ``autotune: error: <message>`` without a traceback. Any other
exception is a bug and propagates.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

from .. import workloads
from ..errors import AutotuneError
from .check import (
    DEFAULT_REPEATS,
    DEFAULT_WARMUP,
    _add_workload_args,
    check_lowered,
    cmd_check,
    cmd_show,
    cmd_workloads,
    is_workload_file,
    load_workload_arg,
    parse_param,
    parse_params,
)
from .common import EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, EXIT_WRONG
from .cost_model import add_cost_model_parser
from .run import _add_run_parsers, cmd_report, cmd_run, resume_command

__all__ = [
    "EXIT_INTERRUPTED", "EXIT_OK", "EXIT_USAGE", "EXIT_WRONG", "build_parser", "check_lowered", "cmd_check",
    "cmd_report", "cmd_run", "cmd_show", "cmd_workloads", "is_workload_file", "load_workload_arg", "main",
    "parse_param", "parse_params", "resume_command", "workloads",
]  # fmt: skip


# ---------------------------------------------------------------- parser, main


def build_parser() -> argparse.ArgumentParser:
    """The ``autotune`` argument parser; each subcommand sets ``run`` to its handler."""
    parser = argparse.ArgumentParser(prog="autotune", description="Memory-aware schedule autotuner.")
    _add_verbosity(parser, False)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    p = sub.add_parser("workloads", help="list the built-in chains and their parameters")
    p.set_defaults(run=cmd_workloads)

    p = sub.add_parser("show", help="print a workload's IR, lowered IR or kernel source")
    _add_workload_args(p)
    what = p.add_mutually_exclusive_group()
    what.add_argument(
        "--lowered", action="store_true", help="print the IR after lowering and memory planning"
    )
    what.add_argument("--source", action="store_true", help="print the generated kernel's Python source")
    p.set_defaults(run=cmd_show)

    p = sub.add_parser("check", help="compile a schedule, compare it with numpy, time it")
    _add_workload_args(p, optional=True)
    p.add_argument("--all", action="store_true", help="check every built-in workload at its default size")
    p.add_argument(
        "--repeats", type=int, help=f"timed runs (default: {DEFAULT_REPEATS}, fewer for a slow kernel)"
    )
    p.add_argument("--warmup", type=int, help=f"untimed runs before timing (default: {DEFAULT_WARMUP})")
    p.add_argument("--draw", metavar="PNG", help="also write a picture of the memory plan")
    p.set_defaults(run=cmd_check)
    _add_run_parsers(sub)
    add_cost_model_parser(sub)
    for name, subparser in sub.choices.items():
        if name != "workloads":
            _add_verbosity(subparser, argparse.SUPPRESS)  # also after the command: autotune run X -q
    return parser


def _add_verbosity(p: argparse.ArgumentParser, default: Any) -> None:
    """``-v`` (Ray's own messages and its workers' output) and ``-q`` (no progress bar, only the result
    line), before or after the command."""
    group = p.add_mutually_exclusive_group()
    group.add_argument(
        "-v", "--verbose", action="store_true", default=default, help="also show Ray's own messages"
    )
    group.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        default=default,
        help="no progress bar or tables: the result only",
    )


def main(argv: list[str] | None = None) -> int:
    """Run the ``autotune`` command with ``argv`` (default ``sys.argv[1:]``); return the exit status."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help (0), or a usage error argparse has printed (2)
        return exc.code if isinstance(exc.code, int) else EXIT_OK if exc.code is None else EXIT_USAGE
    handler: Callable[[argparse.Namespace], int] = args.run
    try:
        return handler(args)
    except AutotuneError as exc:
        print(f"autotune: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
