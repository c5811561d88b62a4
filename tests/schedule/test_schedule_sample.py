"""``sample``: a decision recorded in the trace, the function unchanged; each bad decision refused."""

from __future__ import annotations

import pytest

from autotune.errors import ScheduleError
from autotune.schedule import Schedule
from autotune.workloads import get


def _sch() -> Schedule:
    return Schedule(get("pool_chain", height=8, width=8, channels=4).func)


def test_a_decision_is_recorded_and_changes_nothing() -> None:
    sch = _sch()
    decided = sch.sample("tile_rows", "tile", (1, 2, 4), 2).sample("at_pool1", "location", ["tile", "root"], "root")
    assert str(decided.func) == str(sch.func)
    assert decided.decisions() == {"tile_rows": 2, "at_pool1": "root"}
    replayed = Schedule.replay(sch.func, decided.trace_json())
    assert replayed.decisions() == decided.decisions() and str(replayed.func) == str(sch.func)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("", "tile", (1, 2), 1), "sample: the decision needs a name, got ''"),
        (("t", "speed", (1, 2), 1), "sample: decision 't': kind must be one of tile, location, .*, got 'speed'"),
        (("t", "tile", (1,), 1), r"sample: decision 't': candidates must be two or more ints, strings or booleans, got \(1,\)"),
        (("t", "tile", (1, 2.5), 1), r"candidates must be two or more ints, strings or booleans, got \(1, 2.5\)"),
        (("t", "tile", (1, 2, 1), 1), r"sample: decision 't': candidates \[1, 2, 1\] repeat a value"),
        (("t", "tile", (1, 2), 3), r"sample: decision 't': 3 is not one of its candidates \[1, 2\]"),
        (("v", "vectorize", (False, True), 1), r"sample: decision 'v': 1 is not one of its candidates \[False, True\]"),
    ],
)
def test_a_bad_decision_is_refused(args: tuple, message: str) -> None:
    with pytest.raises(ScheduleError, match=message):
        _sch().sample(*args)


def test_a_decision_is_taken_once() -> None:
    with pytest.raises(ScheduleError, match="sample: decision 't' is already taken in this trace"):
        _sch().sample("t", "tile", (1, 2), 1).sample("t", "tile", (1, 2), 2)


def test_schedules_that_branch_off_one_chain_keep_their_own_decisions() -> None:
    """A chain's decisions are stored once; a schedule that branches off an earlier point of it
    sees its own, and the chain it left keeps its own."""
    base = _sch().sample("a", "tile", (1, 2), 1)
    split = base.sample("b", "tile", (1, 2), 2).split(base.get_loops("pool1")[1], [None, 2])
    long = split.sample("c", "pool", ("x", "y"), "y")
    branch = base.sample("c", "pool", ("x", "y"), "x")
    again = base.sample("b", "tile", (1, 2), 1)
    assert long.decisions() == {"a": 1, "b": 2, "c": "y"}
    assert branch.decisions() == {"a": 1, "c": "x"}
    assert again.decisions() == {"a": 1, "b": 1}
    assert base.decisions() == {"a": 1}
    assert branch.sample("b", "tile", (1, 2), 2).decisions() == {"a": 1, "c": "x", "b": 2}
    with pytest.raises(ScheduleError, match="sample: decision 'c' is already taken in this trace"):
        branch.sample("c", "pool", ("x", "y"), "y")
    replayed = Schedule.replay(base.original, long.trace_json())
    assert replayed.decisions() == long.decisions()
    with pytest.raises(ScheduleError, match="sample: decision 'b' is already taken in this trace"):
        replayed.sample("b", "tile", (1, 2), 1)
