"""MeasureResult: every status is representable, and malformed results are refused when made."""

from __future__ import annotations

import math

import pytest

from autotune.errors import MeasureError
from autotune.measure import STATUSES, MeasureResult

OK = {"status": "ok", "max_abs_err": 0.0, "median_ms": 1.0, "min_ms": 0.9, "iqr_ms": 0.1, "repeats": 10}


def test_every_status_can_be_made() -> None:
    assert MeasureResult(**OK).ok
    assert MeasureResult("wrong", max_abs_err=3.0).status == "wrong"
    assert math.isnan(MeasureResult("wrong", max_abs_err=math.nan).max_abs_err)
    for status in ("crashed", "timeout", "error"):
        result = MeasureResult.failure(status, "why\ntraceback", compile_s=0.5)
        assert result.status == status and not result.ok and result.error.startswith("why")
    cut = MeasureResult("cutoff", 0.0, 9.0, 9.0, 0.0, 1, error="first timed run 9 ms over the cutoff 3 ms")
    assert cut.status == "cutoff" and not cut.ok and cut.median_ms == 9.0
    assert MeasureResult(**OK, retimed=True).retimed
    assert set(STATUSES) == {"ok", "cutoff", "wrong", "crashed", "timeout", "error"}


def test_round_trip_through_dict() -> None:
    result = MeasureResult(**OK, compile_s=0.7, workspace_bytes=4096)
    assert MeasureResult.from_dict(result.to_dict()) == result


def test_results_are_frozen() -> None:
    result = MeasureResult(**OK)
    with pytest.raises(AttributeError):
        result.status = "wrong"  # type: ignore[misc]


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"status": "fast"}, "status must be one of"),
        ({"median_ms": None}, "needs median_ms"),
        ({"repeats": 0}, "needs median_ms, min_ms, iqr_ms and repeats >= 1"),
        ({"repeats": -1}, "repeats must be an int >= 0"),
        ({"repeats": True}, "repeats must be an int"),
        ({"min_ms": 2.0}, "min_ms 2.0 exceeds median_ms 1.0"),
        ({"median_ms": math.nan}, "median_ms must not be NaN"),
        ({"iqr_ms": -0.1}, "iqr_ms must be >= 0"),
        ({"compile_s": "1s"}, "compile_s must be a number"),
        ({"workspace_bytes": 1.5}, "workspace_bytes must be an int"),
        ({"error": "boom"}, "'ok' result carries no error text"),
        ({"error": None}, "error must be a str"),
    ],
)
def test_invalid_ok_results(changes: dict, message: str) -> None:
    with pytest.raises(MeasureError, match=message):
        MeasureResult(**{**OK, **changes})


def test_a_cutoff_result_is_timed_once_and_says_why() -> None:
    cut = {
        "status": "cutoff",
        "max_abs_err": 0.0,
        "median_ms": 9.0,
        "min_ms": 9.0,
        "iqr_ms": 0.0,
        "repeats": 1,
    }
    with pytest.raises(MeasureError, match="'cutoff' result needs the reason in error"):
        MeasureResult(**cut)
    with pytest.raises(MeasureError, match="'cutoff' result needs median_ms"):
        MeasureResult(**{**cut, "median_ms": None}, error="slow")
    with pytest.raises(MeasureError, match="'cutoff' result is not retimed"):
        MeasureResult(**cut, error="slow", retimed=True)
    with pytest.raises(MeasureError, match="retimed must be a bool"):
        MeasureResult(**OK, retimed=1)  # type: ignore[arg-type]
    result = MeasureResult(**cut, error="slow")
    assert MeasureResult.from_dict(result.to_dict()) == result


def test_failures_are_not_timed_and_say_why() -> None:
    with pytest.raises(MeasureError, match="'wrong' result is not timed"):
        MeasureResult("wrong", max_abs_err=1.0, median_ms=1.0)
    with pytest.raises(MeasureError, match="'wrong' result needs max_abs_err"):
        MeasureResult("wrong")
    with pytest.raises(MeasureError, match="'timeout' result needs the error text"):
        MeasureResult("timeout")
    with pytest.raises(MeasureError, match="'crashed' result is not timed"):
        MeasureResult("crashed", error="died", repeats=3)
