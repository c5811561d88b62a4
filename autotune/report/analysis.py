"""Figures drawn from a trial table: readable latency units, noisy trials, which knobs mattered.

- :func:`format_ms` / :func:`latency_unit` write milliseconds as µs, ms or s by magnitude.
- :func:`noisy` flags ``ok`` trials whose timing spread is large against their median:
  ``(median - min) / median`` or ``IQR / median`` above :data:`NOISE_THRESHOLD`. A trial timed
  while the machine was busy shows a median far above its minimum (median 2.0 ms, min 0.011 ms).
  The threshold is the measurement's :data:`~autotune.measure.task.RETIME_NOISE`, the spread above
  which a timing is taken a second time (the trial is then ``retimed``): a trial still noisy
  was noisy in both timings, or had no time for a second.
- :func:`contended` flags ``ok`` trials timed while another process had the cores the kernel
  needed: its threads waited for a CPU more than :data:`~autotune.measure.timing.CONTENDED` of the
  timing (the ``contended`` column). A contended timing is taken a second time too; a trial still
  flagged was contended both times, or had no time for a second.
- :func:`knob_importance` is a one-knob-at-a-time variance split over the ``ok`` trials: for each
  knob, the share of the variance of log(median latency) explained by grouping the trials by that
  knob's value (the correlation ratio, eta squared). It is descriptive, not causal: the sampler
  draws knobs together, so the shares of correlated knobs overlap and need not sum to 1, and a
  knob with few trials per value looks more important than it is (the count is shown).
- :func:`cost_model_quality` scores the cost model on held-out trials: every ``ok`` trial's
  ``predicted_ms`` was predicted before it was measured, by a model fitted on the earlier trials
  only, so each prediction is of a trial the model had not seen. Spearman's rank correlation with
  the measured medians, and top-k recall (the share of the k fastest trials that are among the k
  predicted fastest; k a tenth of the trials, at least 1).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from ..measure.task import RETIME_NOISE as NOISE_THRESHOLD
from ..measure.timing import CONTENDED

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "CONTENDED", "NOISE_THRESHOLD", "contended", "cost_model_quality", "format_ms", "knob_importance", "latency_unit", "noise", "noisy",
]  # fmt: skip

_UNITS = (("s", 1000.0), ("ms", 1.0), ("µs", 1e-3), ("ns", 1e-6))


def latency_unit(ms: float) -> tuple[str, float]:
    """The unit to show a latency of ``ms`` milliseconds in, and the milliseconds per unit."""
    magnitude = abs(ms)
    for unit, scale in _UNITS:
        if magnitude >= scale:
            return unit, scale
    return _UNITS[-1]


def format_ms(ms: float | None, digits: int = 4) -> str:
    """``0.0123`` -> ``12.3 µs``, ``4.5`` -> ``4.5 ms``, ``1234`` -> ``1.234 s``; None or NaN -> ``-``."""
    if ms is None or (isinstance(ms, float) and math.isnan(ms)):
        return "-"
    unit, scale = latency_unit(ms)
    return f"{ms / scale:.{digits}g} {unit}"


def noise(df: pd.DataFrame) -> pd.Series:
    """Per row: the larger of ``(median - min) / median`` and ``IQR / median``; NaN without a median."""
    median = df["median_ms"].where(df["median_ms"] > 0)
    spread = (df["median_ms"] - df["min_ms"]).combine(df["iqr_ms"], max)
    return spread / median


def noisy(df: pd.DataFrame) -> pd.Series:
    """Per row: whether the trial is ``ok`` and its :func:`noise` exceeds :data:`NOISE_THRESHOLD`."""
    return (df["status"] == "ok") & (noise(df) > NOISE_THRESHOLD)


def contended(df: pd.DataFrame) -> pd.Series:
    """Per row: whether the trial is ``ok`` and its ``contended`` share exceeds :data:`CONTENDED`
    (False where it is not known)."""
    return (df["status"] == "ok") & (df["contended"] > CONTENDED)


def knob_importance(df: pd.DataFrame) -> pd.DataFrame:
    """One row per knob that takes at least two values among the ``ok`` trials, most important first:
    ``knob``, ``share`` (eta squared of log median latency), ``values`` (distinct values seen),
    ``best`` (the value whose trials have the lowest mean log latency). Empty with fewer than 3 ok trials."""
    import numpy as np
    import pandas as pd

    ok = df[(df["status"] == "ok") & (df["median_ms"] > 0)]
    rows = []
    if len(ok) >= 3:
        y = np.log(ok["median_ms"].astype(float))
        total = float(((y - y.mean()) ** 2).sum())
        for column in (c for c in ok.columns if c.startswith("knob.")):
            values = ok[column].map(str)
            if values.nunique() < 2 or total <= 0:
                continue
            groups = y.groupby(values.to_numpy())
            between = float((groups.count() * (groups.mean() - y.mean()) ** 2).sum())
            best = groups.mean().idxmin()
            rows.append(
                {"knob": column[5:], "share": between / total, "values": values.nunique(), "best": best}
            )
    out = pd.DataFrame(rows, columns=["knob", "share", "values", "best"])
    return out.sort_values(["share", "knob"], ascending=[False, True], kind="stable").reset_index(drop=True)


def cost_model_quality(df: pd.DataFrame) -> dict[str, float] | None:
    """``{"trials", "spearman", "recall", "k"}`` over the ``ok`` trials with a prediction; None
    when fewer than 3 have one (no model, or one that never predicted milliseconds)."""
    from ..search.rank_scores import spearman, top_k, top_k_recall

    ok = df[(df["status"] == "ok") & df["predicted_ms"].notna() & df["median_ms"].notna()]
    if len(ok) < 3:
        return None
    predicted = ok["predicted_ms"].astype(float).to_numpy()
    measured = ok["median_ms"].astype(float).to_numpy()
    k = top_k(len(ok))
    return {
        "trials": float(len(ok)),
        "spearman": spearman(predicted, measured),
        "recall": top_k_recall(predicted, measured, k),
        "k": float(k),
    }
