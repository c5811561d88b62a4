"""Ctrl-C in a script that calls ``autotune.tune``: the run stops at once, leaves no worker and no
Ray behind, the KeyboardInterrupt reaches the script, and the trial log is a run that resumes; a
driver ended by SIGTERM or SIGKILL takes its busy local worker with it.

Each run is a script in its own process group (a terminal's Ctrl-C reaches the whole group, which
``os.killpg`` imitates). In the "measuring" case the script holds the run after its first logged
trial until the Ctrl-C comes, so a fast run of cached kernels cannot finish before the signal
lands. Nothing here asserts how long anything takes.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import autotune
from autotune.search.log import TrialLog

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
TRIALS = 8
WAIT_S = 900.0  # an upper bound for a loaded machine, never a measured figure

SCRIPT = """
import json, signal, sys, os
import autotune

config = json.loads(sys.argv[1])
if sys.argv[3] == "start-up":  # Ctrl-C while Ray starts: once its processes run, before tune goes on
    import ray

    real_init = ray.init

    def init(*args, **kwargs):
        started = real_init(*args, **kwargs)
        os.kill(os.getpid(), signal.SIGINT)
        return started

    ray.init = init
if sys.argv[3] == "measuring":  # Ctrl-C once a trial is logged: the run waits for it, never ends first
    import time
    from autotune.search.log import TrialLog

    real_append = TrialLog.append

    def append(self, record):
        real_append(self, record)
        deadline = time.monotonic() + 900.0
        while time.monotonic() < deadline:  # the test's SIGINT ends this wait with a KeyboardInterrupt
            time.sleep(0.05)

    TrialLog.append = append
try:
    autotune.tune(config, executor=sys.argv[2])
except KeyboardInterrupt:
    ray = sys.modules.get("ray")
    print("ray initialized:", ray is not None and ray.is_initialized(), flush=True)
    raise
print("finished", flush=True)
"""


def run_config(out: Path, trials: int = TRIALS) -> dict[str, Any]:
    return {
        "workload": {"name": "pool_chain", "args": {"height": 12, "width": 12, "channels": 4}},
        "memory": {"pools": [{"name": "sram", "size": "1MiB"}]},
        "search": {"space": "cascade", "trials": trials, "cost_model": "none", "seed": 3,
                   "batch": 2, "measure_per_round": 2},
        "measure": {"warmup": 0, "repeats": 2, "timeout": "30s"},
        "ray": {"workers": 2},
        "output": str(out),
    }  # fmt: skip


def start(tmp_path: Path, cfg: dict[str, Any], executor: str, when: str) -> subprocess.Popen[str]:
    script = tmp_path / "script.py"
    script.write_text(SCRIPT, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen(
        [sys.executable, str(script), json.dumps(cfg), executor, when],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )  # fmt: skip


def ctrl_c_after_the_first_trial(proc: subprocess.Popen[str], log: Path) -> None:
    """Wait until ``log`` holds a complete line, then Ctrl-C the script's process group."""
    deadline = time.monotonic() + WAIT_S
    while not (log.exists() and b"\n" in log.read_bytes()):
        assert proc.poll() is None, f"the run ended before its first trial was logged: {proc.communicate()}"
        assert time.monotonic() < deadline, "no trial logged"
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGINT)


def live_members(pgid: int) -> list[str]:
    """The processes of group ``pgid`` that still run (zombies waiting for a reaper do not count)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        fields = text[text.rindex(")") + 2 :].split()  # after "pid (comm) ": state, ppid, pgrp, ...
        if int(fields[2]) == pgid and fields[0] != "Z":
            found.append(text[: text.rindex(")") + 1])
    return found


def assert_group_ends(pgid: int) -> None:
    deadline = time.monotonic() + WAIT_S
    while live_members(pgid):
        assert time.monotonic() < deadline, f"still running after the interrupt: {live_members(pgid)}"
        time.sleep(0.2)


@pytest.mark.timeout(3 * int(WAIT_S))
@pytest.mark.parametrize("executor", ["local", "ray"])
def test_ctrl_c_stops_tune_at_once_and_the_log_resumes(tmp_path: Path, executor: str) -> None:
    out = tmp_path / "out"
    cfg = run_config(out)
    proc = start(tmp_path, cfg, executor, "measuring")
    ctrl_c_after_the_first_trial(proc, out / "trials.jsonl")
    stdout, stderr = proc.communicate(timeout=WAIT_S)
    assert proc.returncode == -signal.SIGINT, (proc.returncode, stderr)  # the interrupt reached the script
    assert "ray initialized: False" in stdout and "finished" not in stdout, stdout
    assert stderr.rstrip().splitlines()[-2 if sys.version_info >= (3, 11) else -1] == "KeyboardInterrupt"
    logged = TrialLog.load(out / "trials.jsonl")
    assert logged and all(r.status in ("ok", "infeasible", "invalid") for r in logged), logged
    if sys.version_info >= (3, 11):  # the note that says what was kept
        note = stderr.rstrip().splitlines()[-1]
        assert note.startswith(f"autotune.tune: interrupted; {len(logged)} trial") and "resume=True" in note
    assert not (out / "best.json").exists()
    assert_group_ends(proc.pid)  # no worker, no Ray process outlives the run

    resumed = autotune.tune(cfg, resume=True, executor="local")
    after = TrialLog.load(out / "trials.jsonl")
    assert after[: len(logged)] == logged
    assert sum(r.status != "infeasible" for r in after) == TRIALS
    keys = [r.key for r in after if r.status != "invalid"]
    assert len(keys) == len(set(keys))  # nothing measured twice
    assert resumed.best["figures"]["status"] == "ok"


@pytest.mark.timeout(2 * int(WAIT_S))
def test_ctrl_c_while_ray_starts_shuts_it_down_and_keeps_nothing(tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = start(tmp_path, run_config(out), "ray", "start-up")
    stdout, stderr = proc.communicate(timeout=WAIT_S)
    assert proc.returncode == -signal.SIGINT, (proc.returncode, stderr)
    assert "ray initialized: False" in stdout, stdout
    if sys.version_info >= (3, 11):
        assert stderr.rstrip().splitlines()[-1] == (
            "autotune.tune: interrupted before the first trial was logged; nothing was kept"
        )
    assert not out.exists()
    assert_group_ends(proc.pid)


DRIVER = """
import sys
from autotune.measure.task import MeasureTask
from autotune.search.executors import LocalExecutor

task = MeasureTask("busy", (), sys.argv[1] + ":busy", "{}", ())
for _ in LocalExecutor(workers=1).run([task]):
    pass
"""

BUSY_WORKLOAD = """
import os, time

def busy():  # a job that holds its worker: the test ends the driver meanwhile
    print(os.getpid(), flush=True)
    time.sleep(900)
"""


@pytest.mark.timeout(2 * int(WAIT_S))
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_a_local_worker_ends_with_a_driver_ended_by_a_signal(tmp_path: Path, sig: signal.Signals) -> None:
    """A busy worker does not outlive its driver (its next read from the driver would be after its job)."""
    (tmp_path / "busy.py").write_text(BUSY_WORKLOAD, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    driver = subprocess.Popen(
        [sys.executable, "-c", DRIVER, str(tmp_path / "busy.py")],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    assert driver.stdout is not None
    worker = int(driver.stdout.readline())  # printed by the worker, inside its job
    try:
        driver.send_signal(sig)
        assert driver.wait(timeout=WAIT_S) == -sig
        assert_group_ends(driver.pid)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(worker, signal.SIGKILL)
