"""The trace loader never raises anything but ScheduleError, whatever the file holds."""

from __future__ import annotations

import contextlib
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autotune import workloads
from autotune.errors import ScheduleError
from autotune.schedule import PRIMITIVES, Schedule

FUNC = workloads.get("pool_chain", height=8, width=6, channels=2).func
NAMES = ["pool1", "pool2", "y", "y_1", "x", "c", "n", "rh", "nope", "", "global"]

scalars = st.one_of(st.none(), st.booleans(), st.integers(-3, 9), st.floats(allow_nan=True), st.sampled_from(NAMES))
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4), max_leaves=8)
arg_names = st.sampled_from(["block", "loop", "loops", "factors", "names", "buffer_index", "access", "region", "scope",
                             "buffer", "pools", "index_map", "name", "bogus"])
steps = st.fixed_dictionaries(
    {"op": st.one_of(st.sampled_from(sorted(PRIMITIVES)), st.text(max_size=5)), "args": st.dictionaries(arg_names, values, max_size=4)},
    optional={"outputs": st.lists(st.sampled_from(NAMES), max_size=2)},
)
documents = st.one_of(
    st.fixed_dictionaries({"version": st.one_of(st.integers(-1, 3), st.text(max_size=2)), "steps": st.lists(steps, max_size=4)}),
    values,
)


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(documents)
def test_replay_raises_only_schedule_errors(doc):
    with contextlib.suppress(ScheduleError):
        Schedule.replay(FUNC, json.dumps(doc))


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=40))
def test_non_json_text_is_a_schedule_error(text):
    with contextlib.suppress(ScheduleError):
        Schedule.replay(FUNC, text)


@pytest.mark.parametrize(
    ("step", "message"),
    [
        ({"op": "split", "args": {"loop": "y", "factors": [2.5, None]}}, "argument 'factors' must be a list of integers (or null), got (2.5, None)"),
        ({"op": "split", "args": {"loop": "y", "factors": [0, None]}}, "factors must be positive integers, got 0"),
        ({"op": "compute_at", "args": {"block": "pool9", "loop": "y_1"}}, "no block named 'pool9'"),
        ({"op": "compute_at", "args": {"block": "pool1"}}, "missing argument 'loop'"),
        ({"op": "reorder", "args": {"loops": ["y"], "speed": 2}}, "unknown argument(s) ['speed']"),
        ({"op": "double_buffer", "args": {"block": "pool1"}}, "block 'pool1' is not inside any loop of its consumer"),
        ({"op": "rolling_buffer", "args": {"block": "pool1", "buffer_index": 0}}, "block 'pool1' is not inside any loop"),
        ({"op": "set_pools", "args": {"block": "pool1", "buffer": "ghost", "pools": ["dtcm"]}}, "block 'pool1' does not access a buffer named 'ghost'"),
    ],
)
def test_bad_trace_steps_give_exact_messages(step, message):
    with pytest.raises(ScheduleError) as info:
        Schedule.replay(FUNC, json.dumps({"version": 1, "steps": [step]}))
    assert str(info.value).startswith(f"{step['op']}: trace step 0 does not apply: {message}")
