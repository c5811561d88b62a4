"""A picture of a memory plan: one panel per pool, program order across,
byte offset up, one labelled rectangle per allocation.

matplotlib is imported inside :func:`draw`, so importing
:mod:`autotune.memory` stays cheap.
"""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import TYPE_CHECKING

from autotune.files import write_atomic
from autotune.memory.plan import MemoryPlan
from autotune.memory.pools import format_size

if TYPE_CHECKING:
    from matplotlib.axes import Axes

__all__ = ["DPI", "PANEL_HEIGHT", "WIDTH", "draw"]

#: Figure width and height of one pool's panel in inches, and the resolution.
WIDTH = 10.0
PANEL_HEIGHT = 3.0
DPI = 100


def draw(plan: MemoryPlan, path: str | os.PathLike[str]) -> Path:
    """Write ``plan`` as a PNG of ``WIDTH x PANEL_HEIGHT * len(pools)`` inches at
    ``DPI`` and return its path.

    Each pool's panel shows its size as a dashed line (or a note when the size
    is far above the peak) and its high-water mark as a solid line; the title
    names the algorithm and the total peak.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig = Figure(figsize=(WIDTH, PANEL_HEIGHT * len(plan.pools)), dpi=DPI)
    FigureCanvasAgg(fig)
    axes = fig.subplots(len(plan.pools), 1, squeeze=False, sharex=True)[:, 0]
    first = min((p.start for p in plan.placements), default=0)
    last = max((p.end for p in plan.placements), default=0) + 1
    peaks = plan.pool_peaks
    for index, (ax, pool) in enumerate(zip(axes, plan.pools, strict=True)):
        _draw_pool(ax, plan, pool.name, pool.size, peaks[pool.name])
        ax.set_xlim(first, last)
        if index == len(plan.pools) - 1:
            ax.set_xlabel("program order")
    fig.suptitle(f"memory plan ({plan.algorithm}): total peak {format_size(plan.total_peak)}")
    fig.tight_layout()
    buf = io.BytesIO()  # rendered in memory, then replaced whole: a failed write keeps the old picture
    fig.savefig(buf, dpi=DPI, format="png", metadata={"Software": None})
    return write_atomic(out, buf.getvalue())


def _draw_pool(ax: Axes, plan: MemoryPlan, pool: str, size: int, peak: int) -> None:
    """Draw one pool's allocations, size and peak on ``ax`` (a matplotlib Axes)."""
    from matplotlib.patches import Rectangle

    colours = [f"C{k % 10}" for k in range(len(plan.placements))]
    for colour, p in zip(colours, plan.placements, strict=True):
        if p.pool != pool:
            continue
        width = p.end + 1 - p.start
        ax.add_patch(
            Rectangle((p.start, p.offset), width, p.size, facecolor=colour, edgecolor="black", alpha=0.7)
        )
        ax.text(p.start + width / 2, p.offset + p.size / 2, p.name, ha="center", va="center", fontsize=8)
    top = size if peak == 0 or size <= 2 * peak else int(peak * 1.3)
    if size <= top:
        ax.axhline(size, color="black", linestyle="--", linewidth=1)
    else:
        ax.text(
            0.99,
            0.97,
            f"pool size {format_size(size)} (off scale)",
            transform=ax.transAxes,
            ha="right",
            va="top",
            fontsize=8,
        )
    if peak:
        ax.axhline(peak, color="red", linewidth=1)
        ax.text(
            0.01,
            peak,
            f"peak {format_size(peak)}",
            color="red",
            va="bottom",
            fontsize=8,
            transform=ax.get_yaxis_transform(),
        )
    ax.set_ylim(0, top * 1.05)
    ax.set_ylabel("offset (bytes)")
    ax.set_title(f"{pool}: {format_size(size)}", fontsize=10)
