"""run_task in process, and the executor contract over every executor: results, crashes, hangs, remeasure.

One executor per kind for the whole module (a local Ray takes about 3 s and
1 GB to start). The failing workloads live in ``search_workloads.py`` and are
loaded by path, as a user's ``workload: {path: file.py:function}`` would be.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from search_workloads import FILE

from autotune import workloads
from autotune.errors import ConfigError, MeasureError
from autotune.measure.task import MeasureTask, load_workload, load_workload_file, run_task
from autotune.schedule import Schedule
from autotune.search.executors import EXECUTORS, Executor, make_executor, task_limit
from autotune.search.executors import base as executors_base

pytestmark = pytest.mark.slow

ARGS = (("height", 12), ("width", 10), ("channels", 4))
ALLOWANCE = 6.0  # seconds beyond a task's timeout: worker start, imports, compile
HANG_TIMEOUT = 2.0


def pool_task(tile: int, **fields: object) -> MeasureTask:
    """pool_chain with pool1 computed at a ``tile``-row tile of pool2, as a rolling buffer."""
    wl = workloads.get("pool_chain", **dict(ARGS))
    sch = Schedule(wl.func)
    sch = sch.split(sch.get_loops("pool2")[1], [None, tile])
    sch = sch.compute_at("pool1", sch.last[0]).rolling_buffer("pool1", 0)
    task = {"pools": (("dtcm", 4096),), "repeats": 3, **fields}
    return MeasureTask("pool_chain", ARGS, None, sch.trace_json(), **task)  # type: ignore[arg-type]


def file_task(name: str, **fields: object) -> MeasureTask:
    """A workload of search_workloads.py with the unscheduled trace."""
    path = f"{FILE}:{name}"
    trace = Schedule(load_workload(name, (), path).func).trace_json()
    return MeasureTask(name, (), path, trace, (), **{"repeats": 3, **fields})  # type: ignore[arg-type]


# ---------------------------------------------------------------- run_task, in this process


def test_run_task_times_a_rolling_pool_chain() -> None:
    result = run_task(pool_task(4))
    assert result.status == "ok", result.error
    assert result.max_abs_err == 0.0 and result.repeats == 3
    assert 0 < result.min_ms <= result.median_ms < 1000  # type: ignore[operator]
    # the rolling window of pool1: (4 + 2) rows x 8 columns x 4 channels of float32
    assert result.workspace_bytes == 6 * 8 * 4 * 4


def test_run_task_turns_schedule_and_lowering_errors_into_results() -> None:
    bad_trace = pool_task(4).trace.replace('"pool1"', '"nope"', 1)
    result = run_task(MeasureTask("pool_chain", ARGS, None, bad_trace, ()))
    assert result.status == "error" and "ScheduleError" in result.error and "nope" in result.error
    result = run_task(pool_task(4, pools=(("dtcm", 100),)))
    assert result.status == "error" and "PoolOverflowError" in result.error and "'dtcm'" in result.error


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"repeats": 0}, "repeats must be >= 1"),
        ({"warmup": -1}, "warmup must be an int >= 0"),
        ({"timeout": 0}, "timeout must be a positive number"),
        ({"trace": None}, "trace must be the JSON text"),
    ],
)
def test_measure_task_validation(fields: dict[str, object], message: str) -> None:
    with pytest.raises(MeasureError, match=message):
        MeasureTask(
            **{
                "workload": "w",
                "workload_args": (),
                "workload_path": None,
                "trace": "",
                "pools": (),
                **fields,
            }
        )  # type: ignore[arg-type]


def test_workload_file_errors_name_the_file() -> None:
    with pytest.raises(ConfigError, match="no function 'absent'"):
        load_workload_file(f"{FILE}:absent", {})
    with pytest.raises(ConfigError, match="no file"):
        load_workload_file("/nowhere/wl.py:double", {})
    with pytest.raises(ConfigError, match=r"expected 'file\.py:function'"):
        load_workload_file(FILE, {})
    assert load_workload_file(f"{FILE}:double", {"n": 8}).params == {"n": 8}


def test_make_executor_names_the_known_executors() -> None:
    assert set(EXECUTORS) == {"local", "ray"}
    with pytest.raises(ConfigError, match="unknown executor 'dask'; known executors: local, ray"):
        make_executor("dask")
    with pytest.raises(ConfigError, match="workers must be an int >= 1"):
        make_executor("local", workers=0)


# ---------------------------------------------------------------- the contract, for every executor


@pytest.fixture(scope="module", params=sorted(EXECUTORS))
def executor(request: pytest.FixtureRequest) -> Iterator[Executor]:
    ex = make_executor(request.param, workers=2, compile_allowance=ALLOWANCE)
    yield ex
    ex.close()


def test_every_task_yields_once(executor: Executor) -> None:
    tasks = [pool_task(2), pool_task(4), file_task("double"), file_task("double", seed=1)]
    seen = {}
    for index, result, node in executor.run(tasks):
        assert index not in seen
        seen[index] = (result, node)
    assert sorted(seen) == [0, 1, 2, 3]
    for index, (result, node) in seen.items():
        assert result.status == "ok", (index, result.error)
        assert node == "local" if executor.name == "local" else len(node) > 8
    assert seen[0][0].workspace_bytes == 4 * 8 * 4 * 4  # pool_task(2): a 4-row window


def test_crash_and_hang_become_results_and_the_run_goes_on(executor: Executor, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(executors_base, "load_factor", lambda: 1.5)  # the machine's load, as the driver reads it
    tasks = [
        file_task("segfault"),
        file_task("hang", timeout=HANG_TIMEOUT, check=False),
        file_task("double"),
        file_task("double", seed=2),
    ]
    results = {index: result for index, result, _ in executor.run(tasks)}
    assert results[0].status == "crashed"
    assert ("SIGSEGV" if executor.name == "local" else "WorkerCrashedError") in results[0].error
    assert results[1].status == "timeout" and "the worker was killed" in results[1].error
    assert results[2].status == "ok" and results[3].status == "ok", (results[2].error, results[3].error)
    # the hang is given up at its limit from submission (its timeout once per worker timing in turn,
    # plus the allowance, times the machine's load), whatever else the run does meanwhile
    limit = task_limit(tasks[1], 2, ALLOWANCE, 1.5)
    assert results[1].error == (
        f"no result after {limit:g} s (timeout {HANG_TIMEOUT:g} s x 2 workers timing in turn + {ALLOWANCE:g} s "
        "to start and compile, x 1.5 for the machine's load); the worker was killed"
    ), results[1].error


def test_deadlines_grow_with_the_machines_load(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(executors_base, "usable_cores", lambda: 2)
    monkeypatch.setattr(executors_base.os, "getloadavg", lambda: (6.0, 4.0, 2.0))
    assert executors_base.load_factor() == 3.0  # six runnable processes on two cores
    monkeypatch.setattr(executors_base.os, "getloadavg", lambda: (0.5, 0.5, 0.5))
    assert executors_base.load_factor() == 1.0  # an idle machine: never shorter than the limit as made

    def no_load_average() -> tuple[float, float, float]:
        raise OSError("no load average")

    monkeypatch.setattr(executors_base.os, "getloadavg", no_load_average)
    assert executors_base.load_factor() == 1.0
    task = file_task("double", timeout=2.0)
    assert task_limit(task, 2, 10.0, 3.0) == (10.0 + 2.0 * 2) * 3.0


def test_remeasure_alternates_on_one_worker(executor: Executor) -> None:
    tasks = [pool_task(2), pool_task(4)]
    results = executor.remeasure(tasks, rounds=3)
    assert [len(r) for r in results] == [3, 3]
    assert all(r.status == "ok" for row in results for r in row), results
    assert {r.workspace_bytes for r in results[1]} == {6 * 8 * 4 * 4}


def test_remeasure_with_a_crash_reports_it_for_every_task(executor: Executor) -> None:
    results = executor.remeasure([file_task("double"), file_task("segfault")], rounds=2)
    assert [[r.status for r in row] for row in results] == [["crashed", "crashed"]] * 2


def test_an_exception_in_the_worker_raises(executor: Executor) -> None:
    task = file_task("double")
    broken = MeasureTask("absent", (), f"{FILE}:absent", task.trace, ())
    with pytest.raises(
        MeasureError, match=r"task 1 \(absent\) raised in the worker:(.|\n)*no function 'absent'"
    ):
        list(executor.run([task, broken]))


def test_ray_executor_leaves_a_session_it_did_not_start(executor: Executor) -> None:
    if executor.name != "ray":
        pytest.skip("Ray only")
    import ray

    second = make_executor("ray", workers=1)
    assert [r.status for _, r, _ in second.run([file_task("double")])] == ["ok"]
    second.close()
    assert ray.is_initialized()


# ---------------------------------------------------------------- local workers and Ctrl-C


@pytest.mark.timeout(900)
def test_local_workers_ignore_sigint() -> None:
    """A Ctrl-C reaches the whole process group: the local worker goes on (the driver decides),
    whether it arrives while the worker starts up or while it measures."""
    import os
    import signal
    import time

    from autotune.search.executors import LocalExecutor

    executor = LocalExecutor(workers=1)
    child = executor._start(0, None, "run", (pool_task(4),), 800.0)
    os.kill(child.proc.pid, signal.SIGINT)  # during start-up: blocked, then ignored
    time.sleep(0.3)
    os.kill(child.proc.pid, signal.SIGINT)
    assert child.conn.poll(800.0)
    kind, result = child.collect()
    child.kill()
    assert kind == "value" and result.status == "ok", result


def test_local_workers_are_kept_replaced_after_a_crash_and_ended_by_close() -> None:
    """One worker process runs task after task; a crash or a kill at the deadline replaces it."""
    from autotune.search.executors import LocalExecutor

    executor = LocalExecutor(workers=1, compile_allowance=ALLOWANCE)
    try:
        first = [r.status for _, r, _ in executor.run([file_task("double"), file_task("double", seed=1)])]
        assert first == ["ok", "ok"] and len(executor._idle) == 1
        kept = executor._idle[0].proc
        assert [r.status for _, r, _ in executor.run([file_task("double", seed=2)])] == ["ok"]
        assert executor._idle[0].proc is kept and kept.is_alive()
        results = [r.status for _, r, _ in executor.run([file_task("segfault"), file_task("double")])]
        assert results == ["crashed", "ok"] and not kept.is_alive()
        replaced = executor._idle[0].proc
        assert replaced is not kept and replaced.is_alive()
        assert [[r.status for r in row] for row in executor.remeasure([file_task("double")], 2)] == [
            ["ok", "ok"]
        ]
        assert executor._idle[0].proc is replaced  # the remeasure ran on the kept worker
    finally:
        executor.close()
    assert executor._idle == [] and not replaced.is_alive()
