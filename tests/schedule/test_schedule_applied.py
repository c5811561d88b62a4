"""Primitive applications kept by function identity (``schedule._APPLIED``) and the cascade analysis
kept the same way (``chain._ANALYSED``): the same result as applying or analysing anew."""

from __future__ import annotations

import pytest

from autotune import workloads
from autotune.analysis import chain
from autotune.errors import ScheduleError
from autotune.schedule import Schedule
from autotune.schedule import schedule as schedule_module


def _pool() -> Schedule:
    return Schedule(workloads.get("pool_chain", height=16, width=16, channels=8).func)


def _steps(sch: Schedule) -> Schedule:
    sch = sch.split("y_1", [None, 4], names=["oi", "ii"]).split("c_1", [None, 4], names=["oc", "ic"])
    return sch.reorder("oi", "oc", "ii", "x_1").compute_at("pool1", "oc").rolling_buffer("pool1")


def test_a_kept_application_is_the_same_schedule() -> None:
    base = _pool()
    first = _steps(base)
    again = _steps(base)
    assert again.func is first.func  # every step found kept
    assert again.trace == first.trace and again.last == first.last
    schedule_module._APPLIED.clear()
    fresh = _steps(base)
    assert fresh.func is not first.func
    assert str(fresh.func) == str(first.func) and fresh.trace_json() == first.trace_json()
    assert str(Schedule.replay(base.func, first.trace_json()).func) == str(first.func)


def test_a_failing_application_fails_each_time() -> None:
    base = _pool()
    for _ in range(2):
        with pytest.raises(ScheduleError, match="no loop named 'nope'"):
            base.split("nope", [None, 2])


def test_arguments_of_different_types_are_different_keys() -> None:
    key = schedule_module._args_key
    assert key({"factors": (None, 2)}) != key({"factors": [None, 2]})
    assert key({"n": 1}) != key({"n": 1.0}) != key({"n": True})
    assert key({"a": 1, "b": 2}) == key({"b": 2, "a": 1})


def test_cascade_analysis_is_kept_per_function() -> None:
    func = workloads.get("bottleneck", height=8, width=8, cin=4, expand=8).func
    first = chain.analyze_cascade(func)
    assert chain.analyze_cascade(func) is first
    chain._ANALYSED.clear()
    assert chain.analyze_cascade(func) == first
