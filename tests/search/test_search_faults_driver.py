"""The driver killed with SIGKILL mid-run, then ``autotune run --resume`` to the end.

``autotune run`` runs as a subprocess in a session of its own (it starts a
local Ray: raylet, GCS and workers, all in that session). Once a few trials
are logged the whole process group is SIGKILLed; the test then waits until no
process of the session is left (Ray's workers are in process groups of their
own and exit when their raylet dies). ``--resume`` must finish the budget:
every trial id once, as many trials as the config asks for, a valid JSONL
log, and the trials logged before the kill unchanged at its start.
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

import pandas as pd
import pytest
import yaml

from autotune.search.records import trace_key

pytestmark = pytest.mark.slow

TRIALS = 12
KILL_AFTER = 3  # complete lines in trials.jsonl


def autotune_command() -> list[str]:
    script = Path(sys.executable).with_name("autotune")
    return [str(script)] if script.exists() else [sys.executable, "-m", "autotune"]


def write_config(tmp_path: Path) -> Path:
    """pool_chain on a 20x20x8 image, 12 trials of 3 per round, xgboost ranking, 2 Ray workers."""
    cfg = {
        "name": "killed",
        "workload": {"name": "pool_chain", "args": {"height": 20, "width": 20, "channels": 8}},
        "memory": {"pools": [{"name": "dtcm", "size": "8KiB"}, {"name": "sram", "size": "2MiB"}],
                   "peak_limit": "12KiB"},
        "search": {"space": "cascade", "trials": TRIALS, "sampler": "tpe", "cost_model": "xgboost",
                   "seed": 3, "batch": 8, "measure_per_round": 3},
        "measure": {"warmup": 1, "repeats": 3, "timeout": "10s", "check": True},
        "ray": {"address": None, "workers": 2},
        "output": "unused",
    }  # fmt: skip
    path = tmp_path / "killed.yaml"
    path.write_text(yaml.safe_dump(cfg), encoding="utf-8")
    return path


def session_processes(sid: int) -> list[tuple[int, str]]:
    """Live (not zombie) processes of session ``sid``: (pid, command line)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue  # exited meanwhile
        state, _ppid, _pgrp, session = stat.rsplit(")", 1)[1].split()[:4]
        if int(session) == sid and state != "Z":
            found.append((int(entry.name), cmdline.strip()))
    return found


def wait_session_gone(sid: int, limit_s: float = 60.0) -> list[tuple[int, str]]:
    """Wait for every process of session ``sid`` to exit; return those still alive after ``limit_s``."""
    deadline = time.monotonic() + limit_s
    left = session_processes(sid)
    while left and time.monotonic() < deadline:
        time.sleep(0.2)
        left = session_processes(sid)
    return left


def kill_session(sid: int) -> None:
    """SIGKILL what is left of a session this test started, pid by pid."""
    for pid, _ in session_processes(sid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def complete_lines(path: Path) -> bytes:
    """The bytes of ``path`` up to and including its last newline (a torn last line is left out)."""
    data = path.read_bytes() if path.exists() else b""
    return data[: data.rfind(b"\n") + 1]


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads the process table from /proc")
def test_driver_killed_mid_run_resumes_to_the_full_budget(tmp_path: Path) -> None:
    cfg, out = write_config(tmp_path), tmp_path / "out"
    log = out / "trials.jsonl"
    argv = [*autotune_command(), "run", str(cfg), "--output", str(out), "--no-progress"]
    stderr = tmp_path / "first.err"
    with open(stderr, "wb") as err:
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err, start_new_session=True)
    sid = proc.pid  # start_new_session: the child leads a new session and process group
    try:
        deadline = time.monotonic() + 180
        while complete_lines(log).count(b"\n") < KILL_AFTER:
            assert proc.poll() is None, f"the run ended before the kill:\n{stderr.read_text()}"
            assert time.monotonic() < deadline, "no trials logged in 180 s"
            time.sleep(0.02)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        assert proc.returncode == -signal.SIGKILL
        left = wait_session_gone(sid)
        assert left == [], f"processes of the killed run are still alive: {left}"
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        kill_session(sid)
    before = complete_lines(log)
    measured_before = sum(json.loads(line)["status"] != "infeasible" for line in before.decode("utf-8").splitlines())
    assert before.count(b"\n") >= KILL_AFTER and measured_before < TRIALS, "the run was not killed mid-run"

    resumed = subprocess.Popen(
        [*argv, "--resume"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        printed, errors = resumed.communicate(timeout=600)
    finally:
        if resumed.poll() is None:
            os.killpg(resumed.pid, signal.SIGKILL)
            resumed.wait()
    assert resumed.returncode == 0, errors
    assert printed.splitlines()[-1] == f"results: {out}"
    left = wait_session_gone(resumed.pid)
    kill_session(resumed.pid)
    assert left == [], f"the resumed run left processes behind: {left}"

    data = log.read_bytes()
    assert data.startswith(before), "a trial logged before the kill changed"
    assert data.endswith(b"\n")
    records = [json.loads(line) for line in data.decode("utf-8").splitlines()]  # valid JSONL
    # search.trials counts measured trials; infeasible ones are logged too, and use no budget
    assert sum(r["status"] != "infeasible" for r in records) == TRIALS
    ids = [r["trial"] for r in records]
    assert len(set(ids)) == len(records)
    keys = [trace_key(r["trace"]) for r in records if r["status"] != "invalid"]
    assert len(keys) == len(set(keys)), "a schedule was tried twice"

    df = pd.read_parquet(out / "trials.parquet")
    assert len(df) == len(records) and df["trial"].is_unique
    assert sorted(df["trial"]) == sorted(ids)
    assert (out / "best.json").exists() and (out / "report.md").exists()
