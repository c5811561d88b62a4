"""Faults during a run: a kernel that segfaults, a worker killed mid-task, an output directory
that is unwritable or full (before the run, in the middle, at the end).

In every case the run either finishes or stops with a one-line message, the
trial log stays valid JSONL, and no trial that was measured is lost.

The worker-kill tests run a real search on a workload of ``fault_workloads.py``
whose first worker writes its pid to a file and sleeps; a thread of the test
``SIGKILL``s that pid. The disk tests mount a small ``tmpfs`` (the sandbox and
CI run as root; a read-only tmpfs is unwritable even for root); where ``mount``
is refused they are skipped, and the monkeypatched variant (the write probe
failing with ENOSPC) and the output-under-a-file case still run. The driver
killed mid-run is in ``test_search_faults_driver.py``.
"""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from fault_workloads import FILE
from search_runs import InProcess, write_run_config

from autotune import cli
from autotune.config import load_config
from autotune.errors import AutotuneError, ScheduleError
from autotune.measure.result import MeasureResult
from autotune.measure.task import MeasureTask
from autotune.report import write_report
from autotune.search import log as log_module
from autotune.search import tuner as tuner_module
from autotune.search.executors import Executor, make_executor
from autotune.search.log import TrialLog
from autotune.search.records import TrialRecord
from autotune.search.tuner import tune

WORKLOAD = {"name": "pool_chain", "args": {"height": 12, "width": 10, "channels": 4}}


def write_config(tmp_path: Path, name: str, workload: dict[str, Any] = WORKLOAD, **search: Any) -> Path:
    """A small pool_chain config with no peak limit (few infeasible trials); ``search`` overrides."""
    knobs = {"trials": 8, "cost_model": "none", "seed": 5, "batch": 2, "measure_per_round": 2, **search}
    return write_run_config(tmp_path, name, workload, repeats=2, **knobs)


def log_lines(out: Path) -> list[dict[str, Any]]:
    """Every line of ``trials.jsonl`` parsed as JSON: the log is valid JSONL, no torn line."""
    data = (out / "trials.jsonl").read_bytes()
    assert data == b"" or data.endswith(b"\n"), "the last line is torn"
    return [json.loads(line) for line in data.decode("utf-8").splitlines()]


class Recording(Executor):
    """Wraps an executor and keeps every result it yields, to check that none is lost."""

    name = "recording"

    def __init__(self, inner: Executor, after_result: Any = None, before_remeasure: Any = None) -> None:
        self.inner, self.workers = inner, inner.workers
        self.after_result = after_result  # called with the number of results so far
        self.before_remeasure = before_remeasure
        self.results: list[tuple[str, MeasureResult]] = []  # (trace, result)

    def run(self, tasks: Sequence[MeasureTask]) -> Iterator[tuple[int, MeasureResult, str]]:
        for index, result, node in self.inner.run(tasks):
            self.results.append((tasks[index].trace, result))
            if self.after_result is not None:
                self.after_result(len(self.results))
            yield index, result, node

    def remeasure(self, tasks: Sequence[MeasureTask], rounds: int) -> list[list[MeasureResult]]:
        if self.before_remeasure is not None:
            self.before_remeasure()
        return self.inner.remeasure(tasks, rounds)

    def close(self) -> None:
        self.inner.close()


def assert_nothing_lost(recorded: list[tuple[str, MeasureResult]], logged: list[TrialRecord]) -> None:
    """Every measured result is a logged trial with the same status (failures: the same reason)."""
    by_trace = {}
    for r in logged:
        by_trace.setdefault(r.trace, []).append(r)
    for trace, result in recorded:
        matches = [r for r in by_trace.get(trace, []) if r.status == result.status]
        assert matches, f"a {result.status} result is not in the log"
        if result.status in ("crashed", "timeout"):
            assert any(r.reason == result.error for r in matches)


# ---------------------------------------------------------------- a kernel that segfaults

RESIZE = (("channels", 2), ("height", 40), ("width", 40))


def annotated_resize_task(row_offset: int) -> MeasureTask:
    """resize_conv with its input cached per 10x10 output tile, the cache region annotated as
    rows ``2h + row_offset - 3 .. 2h + row_offset + 3``: offset 0 is right, 2**36 points the
    kernel's reads of the cache far outside any mapping."""
    from autotune import workloads
    from autotune.schedule import Schedule
    from autotune.schedule.tree import get_block

    def region(n: Any, c: Any, h: Any, w: Any) -> tuple[Any, ...]:
        return (n, c, (h * 2 + row_offset - 3, h * 2 + row_offset + 3), (w * 2 - 3, w * 2 + 3))

    wl = workloads.get("resize_conv", **dict(RESIZE))
    sch = Schedule(wl.func).cache_read("resize", 0, "global")
    _, _, h, w = sch.get_loops("resize")
    sch = sch.split(h, [None, 10])
    ho, hi = sch.last
    sch = sch.split(w, [None, 10])
    wo, wi = sch.last
    sch = sch.reorder(ho, wo, hi, wi)
    cache = [r.buffer.name for r in get_block(sch.func, "resize", "test").reads].index("data_global")
    sch = sch.annotate_buffer_access("resize", cache, "read", region).compute_at("data_global", wo)
    return MeasureTask("resize_conv", RESIZE, None, sch.trace_json(), (), warmup=0, repeats=2)


def test_an_annotation_far_outside_the_buffer_is_refused_before_any_kernel() -> None:
    """The kernel of an annotation 2**36 rows off read far outside any mapping and died of SIGSEGV;
    annotate_buffer_access now refuses a region that lies wholly outside its buffer. (A kernel
    that segfaults all the same is a crashed trial: tests/search/test_search_executors.py.)"""
    with pytest.raises(ScheduleError, match=r"^annotate_buffer_access: the region .* lies outside 'data_global'"):
        annotated_resize_task(2**36)
    assert annotated_resize_task(0).trace  # the right annotation is accepted


# ---------------------------------------------------------------- a worker killed during a task


class Killer(threading.Thread):
    """Waits for ``pidfile`` to appear, then SIGKILLs the pid it names (never this process); gives up
    when ``stop`` is set (the run is over: ``problem`` then says that no worker announced itself)."""

    def __init__(self, pidfile: Path) -> None:
        super().__init__(daemon=True)
        self.pidfile = pidfile
        self.killed: int | None = None
        self.problem = ""
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.wait(0.02):
            if self.pidfile.exists():
                pid = int(self.pidfile.read_text())
                if pid == os.getpid():
                    self.problem = "the announcing workload ran in the test process"
                    return
                os.kill(pid, signal.SIGKILL)
                self.killed = pid
                return
        self.problem = "no worker announced its pid"


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["ray", "local"])
def test_worker_killed_mid_task_is_a_crashed_trial_and_the_run_goes_on(tmp_path: Path, kind: str) -> None:
    pidfile = tmp_path / "worker.pid"
    workload = {
        "path": f"{FILE}:announcing_pool_chain",
        "args": {"pidfile": str(pidfile), **WORKLOAD["args"]},
    }
    cfg = load_config(write_config(tmp_path, f"kill-{kind}", workload, trials=6))
    killer = Killer(pidfile)
    killer.start()
    executor = Recording(make_executor(kind, workers=2))
    try:
        result = tune(cfg, progress=False, executor=executor)
    finally:
        killer.stop.set()
        killer.join()
        executor.close()
    assert killer.problem == "" and killer.killed is not None
    lines = log_lines(cfg.output)
    logged = TrialLog.load(cfg.output / "trials.jsonl")
    assert len(lines) == len(logged) == cfg.search.trials
    assert len({r.trial for r in logged}) == cfg.search.trials
    crashed = [i for i, r in enumerate(logged) if r.status == "crashed"]
    assert len(crashed) == 1, [(r.status, r.reason) for r in logged]
    reason = logged[crashed[0]].reason
    if kind == "ray":
        assert reason.startswith("the worker died: WorkerCrashedError: "), reason
    else:
        assert reason == "the worker died: exit code -9 (killed by SIGKILL)"
    # the run went on: trials after the crash were measured (built, checked and timed by a live
    # worker), in this round and in later ones. From the second round on a trial may be ``cutoff``
    # rather than ``ok``: its one timed run is compared with 4x the best median so far (at least
    # 25 ms), and on a loaded machine a microsecond kernel's run that loses its core takes 10-70 ms
    measured = [i for i, r in enumerate(logged) if r.status in ("ok", "cutoff")]
    assert any(i > crashed[0] for i in measured), [(r.status, r.reason) for r in logged]
    assert any(logged[i].round > logged[crashed[0]].round for i in measured)
    assert_nothing_lost(executor.results, logged)
    assert result.best.ok and result.best.status == "ok"
    assert (cfg.output / "best.json").exists()


# ---------------------------------------------------------------- the output directory


def _mount_tmpfs(directory: Path, options: str) -> None:
    """Mount a tmpfs at ``directory`` or skip the test (mounting needs root and CAP_SYS_ADMIN)."""
    directory.mkdir(parents=True, exist_ok=True)
    try:
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(directory)],
            capture_output=True, text=True, check=False, timeout=30,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as exc:
        pytest.skip(f"cannot mount a tmpfs: {exc}")
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs: {done.stderr.strip()}")


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Any]:
    """``mount(options) -> Path``: a tmpfs below ``tmp_path``, unmounted after the test."""
    mounted: list[Path] = []

    def mount(options: str, name: str = "mnt") -> Path:
        where = tmp_path / name
        _mount_tmpfs(where, options)
        mounted.append(where)
        return where

    yield mount
    for where in mounted:
        subprocess.run(["umount", "-l", str(where)], capture_output=True, check=False, timeout=30)


@pytest.fixture
def no_tuning(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail the test if the run gets as far as starting its workers."""

    def refuse(*args: Any, **kwargs: Any) -> Executor:
        raise AssertionError("tuning started although the output directory is not usable")

    monkeypatch.setattr(tuner_module, "make_executor", refuse)


def run_cli(capsys: pytest.CaptureFixture[str], cfg: Path, out: Path) -> tuple[int, str, str]:
    code = cli.main(["run", str(cfg), "--output", str(out), "--no-progress"])
    printed, err = capsys.readouterr()
    return code, printed, err


def test_output_under_a_file_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], no_tuning: None
) -> None:
    (tmp_path / "file").write_text("")
    out = tmp_path / "file" / "out"
    code, printed, err = run_cli(capsys, write_config(tmp_path, "under-file"), out)
    assert (code, printed) == (2, "")
    assert err == f"autotune: error: cannot create the output directory {out}: Not a directory\n"


@pytest.mark.parametrize("where", ["the directory", "a directory inside it"])
def test_read_only_output_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], no_tuning: None, tmpfs: Any, where: str
) -> None:
    """A read-only filesystem (root may write anywhere else): mkdir or the probe fails with EROFS."""
    mnt = tmpfs("ro,size=64k")
    out = mnt if where == "the directory" else mnt / "run"
    code, printed, err = run_cli(capsys, write_config(tmp_path, "ro"), out)
    assert (code, printed) == (2, "")
    if out == mnt:
        assert err == f"autotune: error: cannot write to the output directory {out}: Read-only file system\n"
    else:
        assert err == f"autotune: error: cannot create the output directory {out}: Read-only file system\n"


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes to a directory without write permission")
def test_directory_without_write_permission_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], no_tuning: None
) -> None:
    out = tmp_path / "locked"
    out.mkdir()
    out.chmod(0o500)
    try:
        code, printed, err = run_cli(capsys, write_config(tmp_path, "locked"), out)
    finally:
        out.chmod(0o700)
    assert (code, printed) == (2, "")
    assert err == f"autotune: error: cannot write to the output directory {out}: Permission denied\n"


def test_full_disk_is_a_clear_error_before_tuning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], no_tuning: None, tmpfs: Any
) -> None:
    """A real full disk: a 16 KiB tmpfs cannot take the 64 KiB write probe (ENOSPC)."""
    out = tmpfs("size=16k") / "run"
    code, printed, err = run_cli(capsys, write_config(tmp_path, "full"), out)
    assert (code, printed) == (2, "")
    assert err == f"autotune: error: cannot write to the output directory {out}: the disk is full\n"
    assert not out.exists()  # the directory the run made is removed with its probe


def test_full_disk_is_a_clear_error_before_tuning_monkeypatched(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], no_tuning: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same without a mount: the probe write (``log._write_probe``) fails with ENOSPC."""

    def full(path: Path, size: int) -> None:
        path.write_bytes(b"")
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(log_module, "_write_probe", full)
    out = tmp_path / "run"
    code, printed, err = run_cli(capsys, write_config(tmp_path, "full"), out)
    assert (code, printed) == (2, "")
    assert err == f"autotune: error: cannot write to the output directory {out}: the disk is full\n"
    assert not out.exists()


def _fill(directory: Path) -> Path:
    """Write to ``directory / "filler"`` until the filesystem is full; return the file."""
    filler = directory / "filler"
    with open(filler, "wb", buffering=0) as f:
        try:
            while True:
                f.write(b"\0" * 4096)
        except OSError as exc:
            assert exc.errno == errno.ENOSPC
    return filler


@pytest.mark.slow
def test_disk_filling_up_mid_run_stops_cleanly_and_resume_completes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], tmpfs: Any
) -> None:
    """The disk fills after the third measured trial: the next append fails. The run stops with
    one line naming the log, the log keeps every trial before (no partial line), and after
    space is freed ``--resume`` completes the budget without measuring anything twice."""
    out = tmpfs("size=256k") / "run"
    cfg = load_config(write_config(tmp_path, "filling"), {"output": out})
    filled: list[Path] = []

    def fill_after_three(n: int) -> None:
        if n == 3 and not filled:
            filled.append(_fill(out))

    executor = Recording(InProcess(), fill_after_three)
    with pytest.raises(AutotuneError) as info:  # not an OSError from the report of the failed run
        tune(cfg, progress=False, executor=executor, report=write_report)
    assert str(info.value) == f"cannot write to the trial log {out / 'trials.jsonl'}: the disk is full"
    lines = log_lines(out)
    before = TrialLog.load(out / "trials.jsonl")
    assert len(lines) == len(before) and 2 <= len(before) < cfg.search.trials
    assert_nothing_lost(executor.results[:2], before)  # the third result had no room: it is measured again
    kept = (out / "trials.jsonl").read_bytes()

    filled[0].unlink()
    again = Recording(InProcess())
    tune(cfg, resume=True, progress=False, executor=again)
    after = TrialLog.load(out / "trials.jsonl")
    assert (out / "trials.jsonl").read_bytes().startswith(kept)
    assert len(log_lines(out)) == len(after) == cfg.search.trials
    assert len({r.trial for r in after}) == cfg.search.trials
    keys = [r.key for r in after if r.status != "invalid"]
    assert len(keys) == len(set(keys)), "a schedule was measured twice"
    assert_nothing_lost(again.results, after)


@pytest.mark.slow
def test_disk_full_when_writing_the_results(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], tmpfs: Any
) -> None:
    """The disk fills after the last trial, before best.json: one line naming the output directory
    (not an OSError traceback); the log is complete, and ``--resume`` only writes the results."""
    out = tmpfs("size=256k") / "run"
    cfg = load_config(write_config(tmp_path, "results-full", trials=4), {"output": out})
    filled: list[Path] = []
    executor = Recording(InProcess(), before_remeasure=lambda: filled.append(_fill(out)))
    with pytest.raises(AutotuneError) as info:
        tune(cfg, progress=False, executor=executor, report=write_report)
    assert str(info.value) == f"cannot write the results to {out}: the disk is full"
    logged = TrialLog.load(out / "trials.jsonl")
    assert len(log_lines(out)) == len(logged) == cfg.search.trials
    assert_nothing_lost(executor.results, logged)

    filled[0].unlink()
    again = Recording(InProcess())
    tune(cfg, resume=True, progress=False, executor=again, report=write_report)
    assert again.results == []  # nothing measured again
    assert TrialLog.load(out / "trials.jsonl") == logged
    assert json.loads((out / "best.json").read_text())["trial"] in {r.trial for r in logged}
