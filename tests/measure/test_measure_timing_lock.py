"""The per-machine timing lock: two processes never time at once, a killed holder frees it, and
``measure`` holds it for the timed runs only.

The processes are plain ``python -c`` children that import the lock and meet at
a start file, so they contend from the same moment. Every test uses its own
lock file in ``tmp_path`` (never the machine's, which a tuner may be holding).
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

SLEEPER = """
import sys, time
from pathlib import Path
from autotune.measure.timing import timing_lock

with timing_lock(True, sys.argv[1]):
    Path(sys.argv[2]).write_text("held")
    time.sleep(120)
"""


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


def _held(path: Path) -> bool:
    """Whether another open file description holds an exclusive flock on ``path``."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


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


def test_a_killed_holder_releases_it(tmp_path: Path) -> None:
    lock, held = tmp_path / "timing.lock", tmp_path / "held"
    proc = subprocess.Popen([sys.executable, "-c", SLEEPER, str(lock), str(held)])
    try:
        deadline = time.monotonic() + 20
        while not held.exists():
            assert proc.poll() is None and time.monotonic() < deadline, "the holder did not start"
            time.sleep(0.01)
        assert _held(lock)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    assert proc.returncode == -signal.SIGKILL
    assert not _held(lock)
    with timing.timing_lock(True, lock):  # and it can be taken again, at once
        assert _held(lock)


def test_disabled_takes_nothing(tmp_path: Path) -> None:
    lock = tmp_path / "timing.lock"
    with timing.timing_lock(False, lock):
        assert not lock.exists()


def test_the_default_lock_is_per_user_in_the_temp_dir() -> None:
    path = timing.lock_path()
    assert path.name == f"autotune-timing-{os.getuid()}.lock"
    assert path.parent == Path(tempfile.gettempdir())


def test_measure_task_keeps_the_switch_and_pickles() -> None:
    task = MeasureTask("w", (), None, "{}", ())
    assert task.lock_timing is True
    off = MeasureTask("w", (), None, "{}", (), lock_timing=False)
    assert pickle.loads(pickle.dumps(off)) == off


@pytest.mark.slow
@pytest.mark.parametrize("locked", [True, False])
def test_measure_holds_it_for_the_timed_runs_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, locked: bool
) -> None:
    """Not while building, compiling or checking (``compare``); during warm-up and repeats when asked."""
    from autotune.measure import run

    lock = tmp_path / "timing.lock"
    monkeypatch.setattr(timing, "lock_path", lambda: lock)
    seen: dict[str, bool] = {}
    compare, time_kernel = run.compare, run.time_kernel

    def checking_compare(*args: object) -> object:
        seen["check"] = _held(lock)
        return compare(*args)  # type: ignore[arg-type]

    def checking_time_kernel(fn: object, warmup: int, repeats: int) -> object:
        seen["timing"] = _held(lock)
        return time_kernel(fn, warmup, repeats)  # type: ignore[arg-type]

    monkeypatch.setattr(run, "compare", checking_compare)
    monkeypatch.setattr(run, "time_kernel", checking_time_kernel)
    result = measure(axpy(), axpy_reference, [np.arange(N, dtype=np.float32)], repeats=2, lock_timing=locked)
    assert result.status == "ok", result.error
    assert seen == {"check": False, "timing": locked}
    assert not _held(lock)
