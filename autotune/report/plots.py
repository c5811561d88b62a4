"""The report's figures: convergence of the search, and latency against peak memory.

Both draw on a bare ``matplotlib.figure.Figure`` with the Agg canvas (no
pyplot state, no display needed); matplotlib is imported inside the functions.
"""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import TYPE_CHECKING

from ..files import write_atomic
from .analysis import latency_unit
from .results import pareto_front

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure

__all__ = ["plot_convergence", "plot_pareto"]

SIZE = (8.0, 4.5)
DPI = 100
_FAILED = {"infeasible": ("x", "0.55"), "invalid": ("|", "0.3"), "wrong": ("v", "C3")}


def _figure() -> Figure:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=SIZE, dpi=DPI)
    FigureCanvasAgg(fig)
    return fig


def _save(fig: Figure, path: str | os.PathLike[str]) -> Path:
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    buf = io.BytesIO()  # rendered in memory, then replaced whole: a failed write keeps the old figure
    fig.savefig(buf, dpi=DPI, format="png", metadata={"Software": None})
    return write_atomic(out, buf.getvalue())


def _unit(ok: pd.DataFrame) -> tuple[str, float]:
    """The latency unit of a plot (µs, ms or s), chosen by the median of the ok trials' medians."""
    return latency_unit(float(ok["median_ms"].median())) if not ok.empty else ("ms", 1.0)


def plot_convergence(df: pd.DataFrame, path: str | os.PathLike[str]) -> Path:
    """Each ``ok`` trial's median latency by trial number, the best so far as a step line, each
    ``cutoff`` trial's first runs as a hollow marker, and a tick along the bottom for every trial that
    has no latency."""
    fig = _figure()
    ax = fig.add_subplot(1, 1, 1)
    ordered = df.sort_values("trial", kind="stable")
    ok = ordered[ordered["status"] == "ok"]
    unit, scale = _unit(ok)
    if not ok.empty:
        ax.scatter(ok["trial"], ok["median_ms"] / scale, s=16, color="C0", label="ok trial", zorder=3)
        best = ok["median_ms"].cummin() / scale
        ax.step(ok["trial"], best, where="post", color="C1", label="best so far", zorder=2)
        ax.set_yscale("log")
    cut = ordered[(ordered["status"] == "cutoff") & ordered["median_ms"].notna()]
    if not cut.empty:  # stopped after one slow run: that run's time
        ax.scatter(cut["trial"], cut["median_ms"] / scale, s=16, facecolors="none", edgecolors="C0",
                   label="cutoff (first runs)", zorder=3)  # fmt: skip
    for status, (marker, colour) in _FAILED.items():
        rows = ordered[ordered["status"] == status]
        if not rows.empty:
            ax.scatter(rows["trial"], [0.02] * len(rows), marker=marker, color=colour, label=status,
                       transform=ax.get_xaxis_transform(), clip_on=False)  # fmt: skip
    others = ordered[~ordered["status"].isin(["ok", "cutoff", *_FAILED])]
    if not others.empty:
        ax.scatter(others["trial"], [0.02] * len(others), marker="s", color="C4", label="crashed/timeout/error",
                   transform=ax.get_xaxis_transform(), clip_on=False)  # fmt: skip
    if len(ordered):
        from matplotlib.ticker import MaxNLocator

        ax.set_xlim(ordered["trial"].min() - 0.5, ordered["trial"].max() + 0.5)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("trial")
    ax.set_ylabel(f"median latency ({unit})")
    ax.set_title(f"convergence: {len(ok)} ok of {len(df)} trials")
    if len(df):
        ax.legend(fontsize=8, loc="upper right")
    return _save(fig, path)


def plot_pareto(df: pd.DataFrame, path: str | os.PathLike[str], peak_limit: int | None = None) -> Path:
    """Latency against peak workspace of the ``ok`` trials, their Pareto front as a step line,
    the infeasible trials' peaks as ticks along the bottom, and ``peak_limit`` as a dashed line."""
    fig = _figure()
    ax = fig.add_subplot(1, 1, 1)
    ok = df[df["status"] == "ok"]
    kib = 1024.0
    unit, scale = _unit(ok)
    if not ok.empty:
        ax.scatter(
            ok["peak_bytes"].astype(float) / kib, ok["median_ms"] / scale, s=16, color="C0", label="ok trial"
        )
        front = pareto_front(df)
        ax.step(front["peak_bytes"].astype(float) / kib, front["median_ms"] / scale, where="post", color="C1",
                marker="o", label="Pareto front")  # fmt: skip
        ax.set_yscale("log")
    bad = df[(df["status"] == "infeasible") & df["peak_bytes"].notna()]
    if not bad.empty:
        ax.scatter(bad["peak_bytes"].astype(float) / kib, [0.02] * len(bad), marker="x", color="0.55",
                   label="infeasible (peak)", transform=ax.get_xaxis_transform(), clip_on=False)  # fmt: skip
    if peak_limit is not None:
        ax.axvline(peak_limit / kib, color="C3", linestyle="--", linewidth=1, label="peak_limit")
    peaks = [float(v) for v in df.loc[df["status"].isin(["ok", "infeasible"]), "peak_bytes"].dropna()]
    right = max([*peaks, peak_limit or 0.0], default=0.0) / kib
    if right > 0:
        ax.set_xlim(0, right * 1.05)
    ax.set_xlabel("peak workspace (KiB)")
    ax.set_ylabel(f"median latency ({unit})")
    ax.set_title("latency against peak memory")
    if len(df):
        ax.legend(fontsize=8, loc="upper right")
    return _save(fig, path)
