"""Two or more runs side by side: ``autotune report A B [C...]``.

One column per run: the workload, the best latency and peak (from ``best.json``,
re-measured; for a run without one, the fastest ``ok`` trial of its log, marked
``(search)``), the trials by status, the noisy ``ok`` trials, and then every knob of
the best schedules whose value differs between the runs (``-`` where a run's
space has no such knob).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..search.records import TRIAL_STATUSES
from .analysis import NOISE_THRESHOLD, format_ms, noisy
from .document import read_best
from .results import load_results

__all__ = ["compare_runs"]


def _best_of(path: Path, df: Any) -> tuple[str, str, dict[str, Any]]:
    """(latency, peak, knobs) of a run's best schedule: best.json's, else the fastest ok trial's."""
    best = read_best(path) if path.is_dir() else None
    if best is not None:
        fig = best["figures"]
        return format_ms(fig["median_ms"]), f"{fig['peak_bytes']:,} B", dict(best["knobs"])
    ok = df[df["status"] == "ok"].sort_values(["median_ms", "trial"], kind="stable")
    if ok.empty:
        return "-", "-", {}
    row = ok.iloc[0]
    knobs = {c[5:]: row[c] for c in ok.columns if c.startswith("knob.") and row[c] is not None}
    return f"{format_ms(row['median_ms'])} (search)", f"{int(row['peak_bytes']):,} B", knobs


def _workload(path: Path) -> str:
    best = read_best(path) if path.is_dir() else None
    if best is None:
        return "-"
    wl = best["workload"]
    args = ",".join(f"{k}={v}" for k, v in (wl.get("args") or {}).items())
    return f"{wl.get('name') or Path(str(wl.get('path'))).name}({args})"


def compare_runs(paths: Sequence[str | os.PathLike[str]]) -> str:
    """The side-by-side table of the runs at ``paths`` (run directories, trials.jsonl or parquet)."""
    columns: list[list[str]] = []
    knob_sets: list[dict[str, Any]] = []
    names = [str(p) for p in paths]
    for p in paths:
        path = Path(p)
        df = load_results(path)
        latency, peak, knobs = _best_of(path, df)
        counts = df["status"].value_counts()
        by_status = ", ".join(f"{s} {int(counts[s])}" for s in TRIAL_STATUSES if s in counts.index)
        flagged = int(noisy(df).sum())
        ok = int(counts.get("ok", 0))
        columns.append([_workload(path), latency, peak, f"{len(df)} ({by_status})", f"{flagged} of {ok}"])
        knob_sets.append(knobs)
    labels = ["workload", "best latency", "best peak", "trials", "noisy ok trials"]
    every = sorted({k for knobs in knob_sets for k in knobs})
    differing = [k for k in every if len({repr(knobs.get(k, "-")) for knobs in knob_sets}) > 1]
    for k in differing:
        labels.append(f"knob {k}")
        for column, knobs in zip(columns, knob_sets):
            column.append(str(knobs.get(k, "-")))
    if not differing:
        labels.append("best knobs")
        for column in columns:
            column.append("the same in every run")
    return _table(["", *names], [[label, *(c[i] for c in columns)] for i, label in enumerate(labels)]) + (
        f"\nnoisy: an ok trial whose median - min or IQR exceeds {NOISE_THRESHOLD:.0%} of its median"
    )


def _table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in [header, *rows])
