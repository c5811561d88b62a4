"""Comparing a kernel's outputs with the numpy reference."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["compare", "tolerance"]

_TOLERANCES: dict[str, tuple[float, float]] = {
    "float16": (1e-2, 1e-2),
    "float32": (1e-4, 1e-4),
    "float64": (1e-9, 1e-9),
}


def tolerance(dtype: str | np.dtype) -> tuple[float, float]:
    """``(rtol, atol)`` for outputs of ``dtype``; integers and bools compare exactly.

    ``atol`` is relative to the reference's scale: :func:`compare` multiplies it
    by ``max(1, max|reference|)``.
    """
    name = np.dtype(dtype).name
    if name in _TOLERANCES:
        return _TOLERANCES[name]
    if np.issubdtype(np.dtype(dtype), np.floating):
        return 1e-4, 1e-4
    return 0.0, 0.0


def _max_abs_err(out: np.ndarray, ref: np.ndarray) -> float:
    if out.size == 0:
        return 0.0
    a, b = out.astype(np.float64), ref.astype(np.float64)
    if np.isnan(a).any() or np.isnan(b).any():
        return float("nan")
    same = a == b  # also equal infinities, whose difference would be NaN
    with np.errstate(invalid="ignore"):
        diff = np.where(same, 0.0, np.abs(a - b))
    return float(diff.max())


def compare(outputs: Sequence[np.ndarray], references: Sequence[np.ndarray]) -> tuple[bool, float]:
    """``(ok, max_abs_err)`` of outputs against references, pairwise.

    An output matches when its shape equals the reference's and every element
    satisfies ``|out - ref| <= atol * max(1, max|ref|) + rtol * |ref|`` with the
    output dtype's :func:`tolerance` (infinities must match exactly). A NaN in an
    output or a reference is never ok (``max_abs_err`` is then NaN); a shape or
    count mismatch is not ok with an infinite error.
    """
    if len(outputs) != len(references):
        return False, float("inf")
    ok, worst = True, 0.0
    for out, ref in zip(outputs, references):
        out, ref = np.asarray(out), np.asarray(ref)
        if out.shape != ref.shape:
            return False, float("inf")
        err = _max_abs_err(out, ref)
        if np.isnan(err):
            return False, float("nan")
        rtol, atol = tolerance(out.dtype)
        finite = ref[np.isfinite(ref)]
        scale = max(1.0, float(np.abs(finite).max())) if finite.size else 1.0
        with np.errstate(invalid="ignore"):
            close = np.isclose(out, ref, rtol=rtol, atol=atol * scale, equal_nan=False)
        ok = ok and bool(close.all())
        worst = max(worst, err)
    return ok, worst
