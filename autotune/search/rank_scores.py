"""How well predicted costs order measured latencies: Spearman's rank correlation and top-k recall
(the report's "Cost model" section, ``autotune train-cost-model`` and the held-out experiment)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

__all__ = ["TOP_SHARE", "ranks", "spearman", "top_k", "top_k_recall"]

TOP_SHARE = 0.1
"""Top-k recall looks at the fastest tenth of the trials scored (at least one)."""


def top_k(n: int) -> int:
    """``k`` for ``n`` trials: :data:`TOP_SHARE` of them, at least 1."""
    return max(1, math.ceil(TOP_SHARE * n))


def ranks(x: np.ndarray) -> np.ndarray:
    """Ranks from 1, ties sharing their mean rank."""
    order = np.argsort(x, kind="stable")
    ranks = np.empty(len(x), dtype=np.float64)
    ranks[order] = np.arange(1, len(x) + 1)
    for value in np.unique(x):
        tied = x == value
        if tied.sum() > 1:
            ranks[tied] = ranks[tied].mean()
    return ranks


def spearman(predicted: Sequence[float] | np.ndarray, measured: Sequence[float] | np.ndarray) -> float:
    """Spearman's rank correlation (ties at their mean rank); NaN for fewer than 3 pairs or a
    constant side."""
    p, m = np.asarray(predicted, dtype=np.float64), np.asarray(measured, dtype=np.float64)
    if len(p) != len(m):
        raise ValueError(f"spearman: {len(p)} predictions for {len(m)} measurements")
    if len(p) < 3:
        return float("nan")
    rp, rm = ranks(p), ranks(m)
    if np.ptp(rp) == 0 or np.ptp(rm) == 0:
        return float("nan")
    return float(np.corrcoef(rp, rm)[0, 1])


def top_k_recall(
    predicted: Sequence[float] | np.ndarray, measured: Sequence[float] | np.ndarray, k: int
) -> float:
    """The share of the ``k`` fastest measured that are among the ``k`` lowest predicted (ties by
    position); NaN without data."""
    p, m = np.asarray(predicted, dtype=np.float64), np.asarray(measured, dtype=np.float64)
    k = min(k, len(p))
    if k <= 0:
        return float("nan")
    top_p = set(np.argsort(p, kind="stable")[:k].tolist())
    top_m = set(np.argsort(m, kind="stable")[:k].tolist())
    return len(top_p & top_m) / k
