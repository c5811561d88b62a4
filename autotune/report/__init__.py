"""Reports of a run directory: the trial log as pandas, parquet/CSV tables, plots and ``report.md``.

This is the only layer that imports pandas (inside its functions)::

    df = autotune.load_results("results/pool_chain")   # one row per trial
    print(summary(df))
    write_report("results/pool_chain")                  # tables, PNGs, report.md
"""

from __future__ import annotations

from .analysis import NOISE_THRESHOLD, format_ms, knob_importance, noisy
from .compare import compare_runs
from .document import read_best, result_line, trace_text, write_report
from .plots import plot_convergence, plot_pareto
from .results import load_results, pareto_front, summary, write_tables

__all__ = [
    "NOISE_THRESHOLD",
    "compare_runs",
    "format_ms",
    "knob_importance",
    "load_results",
    "noisy",
    "pareto_front",
    "plot_convergence",
    "plot_pareto",
    "read_best",
    "result_line",
    "summary",
    "trace_text",
    "write_report",
    "write_tables",
]
