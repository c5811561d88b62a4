"""Cheaper measurements through the executors: a parallel kernel timed without the machine's locks
books one CPU per thread (with them, one, and its compile runs beside the others'), a candidate over its cutoff is recorded as ``cutoff`` and never crowned best, a re-timed trial is
flagged in the log.

Nothing here asserts how long anything takes: a cutoff of 1e-9 ms stops every kernel, one of
1e9 ms none.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from autotune import workloads
from autotune.measure import task as task_module
from autotune.measure.result import MeasureResult
from autotune.measure.task import SLOWER_ONE_ROUND, MeasureTask, remeasure_tasks, run_task
from autotune.measure.timing import CUTOFF_RUNS, MIN_SAMPLE_S
from autotune.schedule import Schedule
from autotune.search.best import top_trials
from autotune.search.executors import Executor, LocalExecutor, make_executor, task_cpus
from autotune.search.executors.base import usable_cores
from autotune.search.log import TrialLog
from autotune.search.records import TrialRecord

ARGS = (("height", 12), ("width", 10), ("channels", 4))
ALLOWANCE = 60.0  # seconds beyond a task's timeout: worker start, imports, compile on a busy machine
SLOW = 1e-9  # a cutoff every kernel's first timed run is over


def task(parallel: bool = False, seed: int = 0, **fields: Any) -> MeasureTask:
    """pool_chain with pool2's rows split in tiles of 2; ``parallel``: the tile loop on threads."""
    wl = workloads.get("pool_chain", **dict(ARGS))
    sch = Schedule(wl.func)
    sch = sch.split(sch.get_loops("pool2")[1], [None, 2])
    if parallel:
        sch = sch.parallel(sch.last[0])
    return MeasureTask("pool_chain", ARGS, None, sch.trace_json(), (), repeats=3, seed=seed, **fields)


# ---------------------------------------------------------------- the records


def cutoff_result() -> MeasureResult:
    return MeasureResult("cutoff", 0.0, 9.0, 9.0, 0.0, 1, error="first timed run 9 ms over the cutoff 3 ms")


def record(number: int, result: MeasureResult, tile: int) -> TrialRecord:
    return TrialRecord.from_measure(number, 0, (("tile", tile),), result, trace=f'{{"tile": {tile}}}')


def test_a_cutoff_trial_keeps_its_runs_and_reason_through_the_log(tmp_path: Path) -> None:
    cut = record(0, cutoff_result(), 1)
    assert cut.status == "cutoff" and not cut.ok
    assert (cut.median_ms, cut.min_ms, cut.iqr_ms) == (9.0, 9.0, 0.0)
    assert cut.reason == "first timed run 9 ms over the cutoff 3 ms"
    retimed = record(1, MeasureResult("ok", 0.0, 2.0, 1.9, 0.1, 10, retimed=True), 2)
    plain = record(2, MeasureResult("ok", 0.0, 2.0, 1.9, 0.1, 10), 3)
    assert retimed.retimed and "retimed" not in plain.to_json()  # written only when True
    with TrialLog(tmp_path / "trials.jsonl") as log:
        for r in (cut, retimed, plain):
            log.append(r)
    assert TrialLog.load(tmp_path / "trials.jsonl") == [cut, retimed, plain]
    assert json.loads((tmp_path / "trials.jsonl").read_text().splitlines()[1])["retimed"] is True


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"median_ms": None}, "a 'cutoff' trial needs median_ms, min_ms and iqr_ms"),
        ({"reason": ""}, "a 'cutoff' trial needs a reason"),
        ({"retimed": True}, "a 'cutoff' trial is not retimed"),
        ({"status": "wrong", "retimed": False}, "a 'wrong' trial is not timed"),
        ({"retimed": "yes"}, "retimed must be a bool"),
    ],
)
def test_malformed_cutoff_and_retimed_records_are_refused(fields: dict[str, Any], message: str) -> None:
    good = record(0, cutoff_result(), 1).to_json()
    with pytest.raises(ValueError, match=message):
        TrialRecord.from_json({**good, **fields})


def test_a_cutoff_trial_is_never_crowned_best() -> None:
    """Even with the lowest time of the log (its first runs), a cutoff trial is not among the best."""
    fast_cut = MeasureResult("cutoff", 0.0, 0.5, 0.5, 0.0, 1, error="over the cutoff")
    records = [record(0, fast_cut, 1), record(1, MeasureResult("ok", 0.0, 2.0, 1.9, 0.1, 10), 2)]
    assert [r.trial for r in top_trials(records)] == [1]
    assert top_trials(records[:1]) == []


# ---------------------------------------------------------------- the cutoff in the worker


@pytest.mark.slow
def test_run_task_stops_a_candidate_over_its_cutoff_after_checking_it() -> None:
    result = run_task(task(cutoff_ms=SLOW))
    assert result.status == "cutoff" and result.repeats == min(CUTOFF_RUNS, 3) and result.max_abs_err == 0.0, result
    assert run_task(task(cutoff_ms=1e9)).status == "ok"


@pytest.mark.slow
def test_the_final_remeasure_times_every_candidate_in_full() -> None:
    (rounds,) = remeasure_tasks([task(cutoff_ms=SLOW)], rounds=2)
    assert [r.status for r in rounds] == ["ok", "ok"] and all(r.repeats == 3 for r in rounds)


def test_a_remeasured_task_far_slower_than_the_fastest_is_timed_in_the_first_round_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Its rounds cannot bring it near the fastest; the others keep every round, and so does a
    failed task (its failure is the figure)."""
    medians = {0: 1.0, 1: SLOWER_ONE_ROUND * 1.0 + 0.5, 2: SLOWER_ONE_ROUND * 1.0, 3: None}
    assert SLOWER_ONE_ROUND * 1.0 + 0.5 > MIN_SAMPLE_S * 1e3  # task 1 is not timed in batches
    timed: list[int] = []

    def fake(task: MeasureTask, prepared: Any, lowered: Any) -> MeasureResult:
        timed.append(task.seed)
        median = medians[task.seed]
        if median is None:
            return MeasureResult("wrong", 1.0, error="max_abs_err 1.0")
        return MeasureResult("ok", 0.0, median, median, 0.0, 3)

    monkeypatch.setattr(task_module, "_measure_lowered", fake)
    results = remeasure_tasks([task(seed=s) for s in medians], rounds=3)
    assert [len(rs) for rs in results] == [3, 1, 3, 3]
    assert timed == [0, 1, 2, 3, 0, 2, 3, 0, 2, 3]
    assert [r.status for r in results[3]] == ["wrong"] * 3


def test_a_remeasured_task_quicker_than_its_sample_keeps_every_round(monkeypatch: pytest.MonkeyPatch) -> None:
    """A kernel timed in batches of ``min_sample_s`` costs the same per round whatever its speed:
    a first round far over the fastest (a busy moment of a microsecond kernel) does not drop it."""
    sample_ms = MIN_SAMPLE_S * 1e3
    medians = {0: sample_ms / 100, 1: sample_ms / 2, 2: sample_ms * 2}

    def fake(task: MeasureTask, prepared: Any, lowered: Any) -> MeasureResult:
        median = medians[task.seed]
        return MeasureResult("ok", 0.0, median, median, 0.0, 3)

    monkeypatch.setattr(task_module, "_measure_lowered", fake)
    results = remeasure_tasks([task(seed=s) for s in medians], rounds=3)
    assert [len(rs) for rs in results] == [3, 3, 1]
    unbatched = remeasure_tasks([task(seed=s, min_sample_s=None) for s in medians], rounds=3)
    assert [len(rs) for rs in unbatched] == [3, 1, 1]


# ---------------------------------------------------------------- CPUs booked per thread


def test_a_parallel_trace_books_one_cpu_per_thread_up_to_the_executors() -> None:
    serial, parallel = task(lock_timing=False), task(parallel=True, lock_timing=False)
    assert not serial.parallel and parallel.parallel
    assert not MeasureTask("w", (), None, "not json", ()).parallel
    assert [task_cpus(serial, n) for n in (1, 2, 8)] == [1, 1, 1]
    assert [task_cpus(parallel, n) for n in (1, 2, 8)] == [1, min(2, usable_cores()), min(8, usable_cores())]


def test_a_parallel_trace_timed_under_the_machines_locks_books_one_cpu() -> None:
    # its timed part holds the cpu lock exclusive: booking its threads would only keep compiles apart
    locked = task(parallel=True)
    assert locked.parallel and locked.lock_timing
    assert [task_cpus(locked, n) for n in (1, 2, 8)] == [1, 1, 1]


def booked_at_each_start(events: list[tuple[str, int]], tasks: list[MeasureTask], capacity: int) -> list[int]:
    """From ("start", i) and ("done", i) events in order: the CPUs booked just after each start."""
    inflight: set[int] = set()
    booked = []
    for kind, i in events:
        if kind == "start":
            inflight.add(i)
            booked.append(sum(task_cpus(tasks[j], capacity) for j in inflight))
        else:
            inflight.discard(i)
    return booked


def assert_parallel_runs_alone(events: list[tuple[str, int]], tasks: list[MeasureTask]) -> None:
    assert max(booked_at_each_start(events, tasks, 2)) <= 2
    if usable_cores() >= 2:  # a 2-thread kernel books both CPUs: nothing else runs beside it
        inflight: set[int] = set()
        for kind, i in events:
            if kind == "start":
                inflight.add(i)
                assert not (len(inflight) > 1 and any(tasks[j].parallel for j in inflight)), events
            else:
                inflight.discard(i)


# two parallel kernels and two serial ones, timed without the machine's locks: the serial pair may
# share the CPUs, a parallel one may not
MIX = [task(parallel=True, lock_timing=False), task(parallel=True, seed=1, lock_timing=False)]
MIX += [task(seed=2, lock_timing=False), task(seed=3, lock_timing=False)]
# the same under the locks: every task books one CPU, two parallel ones may compile side by side
LOCKED = [task(parallel=True), task(parallel=True, seed=1), task(seed=2), task(seed=3)]


def run_local(monkeypatch: pytest.MonkeyPatch, tasks: list[MeasureTask]) -> list[tuple[str, int]]:
    """Run ``tasks`` on a local executor of 2 workers; the ("start", i) and ("done", i) events in order."""
    events: list[tuple[str, int]] = []
    start = LocalExecutor._start

    def recording_start(self: LocalExecutor, index: int, *args: Any) -> Any:
        events.append(("start", index))
        return start(self, index, *args)

    monkeypatch.setattr(LocalExecutor, "_start", recording_start)
    executor = LocalExecutor(workers=2, compile_allowance=ALLOWANCE)
    for index, result, _ in executor.run(tasks):
        assert result.status == "ok", result.error
        events.append(("done", index))
    assert sorted(i for kind, i in events if kind == "done") == list(range(len(tasks)))
    return events


@pytest.mark.slow
def test_the_local_executor_runs_two_parallel_kernels_side_by_side_under_the_locks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    events = run_local(monkeypatch, LOCKED)
    # both parallel kernels in flight from the start, one CPU each: they compile together
    assert events[:2] == [("start", 0), ("start", 1)]
    assert booked_at_each_start(events, LOCKED, 2)[:2] == [1, 2]


@pytest.mark.slow
def test_the_local_executor_runs_a_parallel_kernel_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    events = run_local(monkeypatch, MIX)
    assert_parallel_runs_alone(events, MIX)
    if usable_cores() >= 2:
        assert booked_at_each_start(events, MIX, 2).count(2) >= 3  # each parallel kernel, and the serial pair


class Recording:
    """Stands in for a Ray remote function: records the CPUs each submission asks for."""

    def __init__(self, remote: Any, tasks: list[MeasureTask], events: list[tuple[str, int]]) -> None:
        self.remote, self.tasks, self.events = remote, tasks, events
        self.cpus: dict[int, int] = {}

    def options(self, **options: Any) -> Any:
        booked, inner = self, self.remote.options(**options)

        class Submit:
            def remote(self, task: MeasureTask) -> Any:
                index = booked.tasks.index(task)
                booked.cpus[index] = options["num_cpus"]
                booked.events.append(("start", index))
                return inner.remote(task)

        return Submit()


@pytest.fixture(scope="module")
def ray_executor() -> Iterator[Executor]:
    ex = make_executor("ray", workers=2, compile_allowance=ALLOWANCE)
    yield ex
    ex.close()


def run_ray(ray_executor: Any, tasks: list[MeasureTask]) -> tuple[Recording, list[tuple[str, int]]]:
    """Run ``tasks`` (each must be ``ok``) with each submission's CPUs recorded; the recording and the
    ("start", i) and ("done", i) events in order."""
    events: list[tuple[str, int]] = []
    recording = Recording(ray_executor._run_remote, tasks, events)
    ray_executor._run_remote = recording
    try:
        for index, result, _ in ray_executor.run(tasks):
            assert result.status == "ok", result.error
            events.append(("done", index))
    finally:
        ray_executor._run_remote = recording.remote
    return recording, events


@pytest.mark.slow
def test_ray_books_a_cpu_per_thread_and_runs_a_parallel_kernel_alone(ray_executor: Any) -> None:
    recording, events = run_ray(ray_executor, MIX)
    assert recording.cpus == {i: task_cpus(t, ray_executor.capacity) for i, t in enumerate(MIX)}
    assert recording.cpus[0] == min(2, usable_cores()) and recording.cpus[2] == 1
    assert_parallel_runs_alone(events, MIX)


@pytest.mark.slow
def test_ray_books_one_cpu_for_a_parallel_kernel_timed_under_the_locks(ray_executor: Any) -> None:
    recording, events = run_ray(ray_executor, LOCKED)
    assert recording.cpus == {0: 1, 1: 1, 2: 1, 3: 1}
    assert events[:2] == [("start", 0), ("start", 1)]


@pytest.mark.slow
def test_ray_measures_the_cutoff_and_remeasures_a_parallel_kernel(ray_executor: Executor) -> None:
    results = {i: r for i, r, _ in ray_executor.run([task(cutoff_ms=SLOW), task(parallel=True, seed=1)])}
    assert results[0].status == "cutoff" and results[0].max_abs_err == 0.0, results[0]
    assert results[1].status == "ok", results[1].error
    rounds = ray_executor.remeasure([task(), task(parallel=True, seed=1)], rounds=2)
    assert [[r.status for r in row] for row in rounds] == [["ok", "ok"], ["ok", "ok"]]
