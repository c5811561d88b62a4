"""The per-machine locks of measurement.

The timing lock: two processes never time at once, a killed holder frees it,
and ``measure`` holds it for the timed runs only. The cpu lock: any number of
shared holders (compiles) side by side, the timing of a parallel kernel waits
for them (a serial one does not), a killed holder frees it, and ``measure``
holds it shared while compiling and exclusive while timing a parallel kernel.

The processes are plain ``python -c`` children that import the locks and meet
at a start file, so they contend from the same moment. Every test uses its own
lock files in ``tmp_path`` (never the machine's, which a tuner may be holding).
Times are ``time.monotonic()``, one clock for every process on Linux.
"""

from __future__ import annotations

import fcntl
import json
import os
import pickle
import signal
import subprocess
import sys
import tempfile
import time
from itertools import pairwise
from pathlib import Path

import numpy as np
import pytest
from measure_funcs import N, axpy, axpy_reference

from autotune.codegen import Kernel
from autotune.errors import MeasureError
from autotune.measure import measure, timing
from autotune.measure.task import MeasureTask

HOLDER = """
import json, sys, time
from pathlib import Path
from autotune.measure.timing import timing_lock

lock, out, go, spans, hold, enabled = sys.argv[1:7]
while not Path(go).exists():
    time.sleep(0.005)
with open(out, "w") as f:
    for _ in range(int(spans)):
        with timing_lock(enabled == "1", lock):
            start = time.monotonic()
            time.sleep(float(hold))
            end = time.monotonic()
        f.write(json.dumps([start, end]) + "\\n")
        f.flush()
        time.sleep(0.01)  # give the other process a chance to take it
"""

SECTION = """
import json, sys, time
from pathlib import Path
from autotune.measure.timing import cpu_lock, timing_section

kind, timing_file, cpu_file, start_after, held, out, hold = sys.argv[1:8]
while not Path(start_after).exists():
    time.sleep(0.005)
asked = time.monotonic()
if kind in ("shared", "exclusive"):
    section = cpu_lock(kind, True, cpu_file)
else:
    section = timing_section(kind == "parallel", True, timing_file, cpu_file)
with section:
    start = time.monotonic()
    Path(held).write_text("held")
    if hold.startswith("until:"):  # hold until that file exists (at most 60 s)
        while not Path(hold[6:]).exists() and time.monotonic() < start + 60:
            time.sleep(0.005)
    else:
        time.sleep(float(hold))
    end = time.monotonic()
Path(out).write_text(json.dumps([asked, start, end]))
"""
"""Holds one section once ``start_after`` exists, for ``hold`` seconds or, with ``hold`` given as
``until:PATH``, until PATH exists: the cpu lock ``shared`` or ``exclusive``, or the timing section
of a ``parallel`` or ``serial`` kernel. Writes ``held`` on entry and ``[asked, acquired, released]``
to ``out``."""


def _spans(tmp_path: Path, enabled: bool, spans: int = 3, hold: float = 0.15) -> list[tuple[float, float]]:
    """Run two holders at once; return every (acquired, released) span of both, sorted."""
    lock, go = tmp_path / "timing.lock", tmp_path / "go"
    outs = [tmp_path / f"spans{k}.jsonl" for k in range(2)]
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                HOLDER,
                str(lock),
                str(out),
                str(go),
                str(spans),
                str(hold),
                str(int(enabled)),
            ]
        )
        for out in outs
    ]
    time.sleep(0.1)
    go.write_text("go")
    for proc in procs:
        assert proc.wait(timeout=30) == 0
    found = [tuple(json.loads(line)) for out in outs for line in out.read_text().splitlines()]
    assert len(found) == 2 * spans
    return sorted(found)  # type: ignore[arg-type]


def _mode(path: Path) -> str | None:
    """How other open file descriptions hold ``path``: ``"exclusive"``, ``"shared"`` or None (free)."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT)
    try:
        for op, held_as in ((fcntl.LOCK_SH, "exclusive"), (fcntl.LOCK_EX, "shared")):
            try:
                fcntl.flock(fd, op | fcntl.LOCK_NB)
            except BlockingIOError:
                return held_as
        return None
    finally:
        os.close(fd)


def _start(
    tmp_path: Path, name: str, kind: str, start_after: Path, hold: float | str
) -> subprocess.Popen[bytes]:
    """Start a :data:`SECTION` process; it writes ``<name>.held`` and ``<name>.json`` in ``tmp_path``."""
    files = (tmp_path / "timing.lock", tmp_path / "cpu.lock", start_after)
    outs = (tmp_path / f"{name}.held", tmp_path / f"{name}.json")
    return subprocess.Popen([sys.executable, "-c", SECTION, kind, *map(str, (*files, *outs)), str(hold)])


def _finish(tmp_path: Path, name: str, proc: subprocess.Popen[bytes]) -> tuple[float, float, float]:
    """Wait for a :data:`SECTION` process; return when it asked, acquired and released."""
    assert proc.wait(timeout=30) == 0
    asked, start, end = json.loads((tmp_path / f"{name}.json").read_text())
    return asked, start, end


def _wait_held(tmp_path: Path, name: str, proc: subprocess.Popen[bytes]) -> None:
    """Wait until a :data:`SECTION` process holds its lock."""
    deadline = time.monotonic() + 20
    while not (tmp_path / f"{name}.held").exists():
        assert proc.poll() is None and time.monotonic() < deadline, f"{name} did not take its lock"
        time.sleep(0.01)


def test_two_processes_never_hold_it_at_once(tmp_path: Path) -> None:
    spans = _spans(tmp_path, enabled=True)
    for (_, end), (start, _) in pairwise(spans):
        assert end <= start, spans
    # they did contend: the spans cover the whole time the two took together
    assert spans[-1][1] - spans[0][0] >= 6 * 0.15


def test_without_the_lock_the_spans_overlap(tmp_path: Path) -> None:
    """The check above can fail: unlocked, the two processes hold their spans at the same time."""
    spans = _spans(tmp_path, enabled=False)
    assert any(end > start for (_, end), (start, _) in pairwise(spans)), spans


@pytest.mark.parametrize(
    ("kind", "lock_name"),
    [pytest.param("serial", "timing.lock", id="timing"), pytest.param("exclusive", "cpu.lock", id="cpu")],
)
def test_a_killed_holder_releases_it(tmp_path: Path, kind: str, lock_name: str) -> None:
    lock = tmp_path / lock_name
    proc = _start(tmp_path, "holder", kind, tmp_path, hold=120)
    try:
        _wait_held(tmp_path, "holder", proc)
        assert _mode(lock) == "exclusive"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    assert proc.returncode == -signal.SIGKILL
    assert _mode(lock) is None
    again = timing.timing_lock(True, lock) if kind == "serial" else timing.cpu_lock("exclusive", True, lock)
    with again:  # and it can be taken again, at once
        assert _mode(lock) == "exclusive"


@pytest.mark.parametrize("parallel", [True, False])
def test_a_parallel_timing_waits_for_a_compile(tmp_path: Path, parallel: bool) -> None:
    """While a process holds the cpu lock shared (compiling), a parallel kernel's timing section
    does not start; a serial one does."""
    timer = _start(tmp_path, "timer", "parallel" if parallel else "serial", tmp_path / "compiler.held", 0.05)
    compiler = _start(tmp_path, "compiler", "shared", tmp_path, hold=1.0)
    _, compile_start, compile_end = _finish(tmp_path, "compiler", compiler)
    asked, timing_start, _ = _finish(tmp_path, "timer", timer)
    assert compile_start <= asked < compile_end  # the timer did ask during the compile
    if parallel:
        assert timing_start >= compile_end
    else:
        assert timing_start < compile_end


def test_shared_holders_overlap(tmp_path: Path) -> None:
    """Two compiles (shared) hold the cpu lock side by side: the first holds it until the second
    has taken it too (were the lock exclusive, the first would give up waiting after 60 s)."""
    first = _start(tmp_path, "a", "shared", tmp_path, hold=f"until:{tmp_path / 'b.held'}")
    second = _start(tmp_path, "b", "shared", tmp_path / "a.held", hold=0.01)
    _, _, first_end = _finish(tmp_path, "a", first)
    _, second_start, _ = _finish(tmp_path, "b", second)
    assert second_start < first_end


def test_exclusive_holders_take_turns(tmp_path: Path) -> None:
    go = tmp_path / "go"
    procs = {name: _start(tmp_path, name, "exclusive", go, hold=0.6) for name in ("a", "b")}
    time.sleep(0.3)
    go.write_text("go")
    (_, first_end), (second_start, _) = sorted(_finish(tmp_path, n, p)[1:] for n, p in procs.items())
    assert first_end <= second_start


def test_disabled_takes_nothing(tmp_path: Path) -> None:
    lock, cpu = tmp_path / "timing.lock", tmp_path / "cpu.lock"
    with timing.timing_lock(False, lock), timing.cpu_lock("shared", False, cpu):
        assert not lock.exists() and not cpu.exists()
    with timing.timing_section(True, False, lock, cpu):
        assert not lock.exists() and not cpu.exists()


def test_the_default_locks_are_per_user_in_the_temp_dir() -> None:
    path, cpu = timing.lock_path(), timing.cpu_lock_path()
    assert path.name == f"autotune-timing-{os.getuid()}.lock"
    assert cpu.name == f"autotune-cpu-{os.getuid()}.lock"
    assert path.parent == cpu.parent == Path(tempfile.gettempdir())


def test_cpu_lock_rejects_an_unknown_mode(tmp_path: Path) -> None:
    unknown = timing.cpu_lock("read", True, tmp_path / "cpu.lock")  # type: ignore[arg-type]
    with (
        pytest.raises(MeasureError, match="cpu_lock: mode must be 'shared' or 'exclusive', got 'read'"),
        unknown,
    ):
        pass
    assert not (tmp_path / "cpu.lock").exists()


def test_measure_task_keeps_the_switch_and_pickles() -> None:
    task = MeasureTask("w", (), None, "{}", ())
    assert task.lock_timing is True
    off = MeasureTask("w", (), None, "{}", (), lock_timing=False)
    assert pickle.loads(pickle.dumps(off)) == off


@pytest.mark.slow
@pytest.mark.parametrize(("locked", "parallel"), [(True, False), (True, True), (False, True)])
def test_measure_holds_the_locks_while_it_should(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, locked: bool, parallel: bool
) -> None:
    """The cpu lock shared while building and checking (``compare``); the timing lock, and the cpu
    lock exclusive for a parallel kernel, during warm-up and repeats; nothing with ``lock_timing=False``."""
    from autotune.measure import run

    lock, cpu = tmp_path / "timing.lock", tmp_path / "cpu.lock"
    monkeypatch.setattr(timing, "lock_path", lambda: lock)
    monkeypatch.setattr(timing, "cpu_lock_path", lambda: cpu)
    seen: dict[str, object] = {}
    build, compare, time_candidate = run.build, run.compare, run.time_candidate

    def checking_build(*args: object) -> Kernel:
        seen["build"] = (_mode(lock), _mode(cpu))
        kernel = build(*args)  # type: ignore[arg-type]
        seen["parallel"] = kernel.parallel
        return kernel

    def checking_compare(*args: object) -> object:
        seen["check"] = (_mode(lock), _mode(cpu))
        return compare(*args)  # type: ignore[arg-type]

    def checking_time_candidate(fn: object, *args: object) -> object:
        seen["timing"] = (_mode(lock), _mode(cpu))
        return time_candidate(fn, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(run, "build", checking_build)
    monkeypatch.setattr(run, "compare", checking_compare)
    monkeypatch.setattr(run, "time_candidate", checking_time_candidate)
    func = axpy(parallel=parallel)
    result = measure(func, axpy_reference, [np.arange(N, dtype=np.float32)], repeats=2, lock_timing=locked)
    assert result.status == "ok", result.error
    compiling = (None, "shared" if locked else None)
    timed = ("exclusive" if locked else None, "exclusive" if locked and parallel else None)
    assert seen == {"build": compiling, "parallel": parallel, "check": compiling, "timing": timed}
    assert _mode(lock) is None and _mode(cpu) is None


@pytest.mark.slow
def test_measure_waits_to_compile_while_a_parallel_kernel_times(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another worker times a parallel kernel (the cpu lock exclusive) for 1 s: ``measure`` builds
    and compiles only once it is done, and then measures normally."""
    from autotune.measure import run

    monkeypatch.setattr(timing, "lock_path", lambda: tmp_path / "timing.lock")
    monkeypatch.setattr(timing, "cpu_lock_path", lambda: tmp_path / "cpu.lock")
    built: list[float] = []
    build = run.build

    def timed_build(*args: object) -> Kernel:
        built.append(time.monotonic())
        return build(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(run, "build", timed_build)
    other = _start(tmp_path, "other", "parallel", tmp_path, hold=1.0)
    _wait_held(tmp_path, "other", other)
    called = time.monotonic()
    result = measure(axpy(parallel=True), axpy_reference, [np.arange(N, dtype=np.float32)], repeats=2)
    _, _, other_end = _finish(tmp_path, "other", other)
    assert result.status == "ok", result.error
    assert called < other_end  # measure was called while the other worker was timing
    assert len(built) == 1 and built[0] >= other_end
