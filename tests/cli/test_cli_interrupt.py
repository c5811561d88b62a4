"""Ctrl-C during `autotune run`: the search stops once the trials in flight are logged, the
command that resumes it is printed (no traceback, exit 130), and that command completes the run."""

from __future__ import annotations

import os
import re
import shlex
import signal
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
import yaml

from autotune import cli
from autotune.measure.result import MeasureResult
from autotune.measure.task import MeasureTask, remeasure_tasks, run_task
from autotune.search import tuner as tuner_module
from autotune.search.executors import Executor
from autotune.search.log import TrialLog

pytestmark = pytest.mark.slow

TRIALS = 6
PER_ROUND = 2


class Interrupting(Executor):
    """Measures in this process; while measuring the ``at``-th task it runs, the user presses
    Ctrl-C ``presses`` times (SIGINT to this process)."""

    name = "test-interrupting"
    workers = 1

    def __init__(self, at: int | None, presses: int = 1) -> None:
        self.at, self.presses, self.started = at, presses, 0

    def run(self, tasks: Sequence[MeasureTask]) -> Iterator[tuple[int, MeasureResult, str]]:
        for i, task in enumerate(tasks):
            if self.started == self.at:
                for _ in range(self.presses):
                    os.kill(os.getpid(), signal.SIGINT)
            self.started += 1
            yield i, run_task(task), "test"

    def remeasure(self, tasks: Sequence[MeasureTask], rounds: int) -> list[list[MeasureResult]]:
        return remeasure_tasks(tasks, rounds)

    def close(self) -> None:
        pass


def write_config(tmp_path: Path) -> Path:
    cfg = {
        "workload": {"name": "pool_chain", "args": {"height": 12, "width": 12, "channels": 4}},
        "memory": {"pools": [{"name": "sram", "size": "1MiB"}]},
        "search": {"space": "cascade", "trials": TRIALS, "cost_model": "none", "seed": 2,
                   "batch": PER_ROUND, "measure_per_round": PER_ROUND},
        "measure": {"warmup": 0, "repeats": 2, "timeout": "10s"},
    }  # fmt: skip
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(cfg), encoding="utf-8")
    return path


def use(monkeypatch: pytest.MonkeyPatch, executor: Executor) -> None:
    monkeypatch.setattr(tuner_module, "make_executor", lambda *args, **kwargs: executor)


def test_ctrl_c_stops_after_the_round_in_flight_and_prints_the_resume_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    config, out = write_config(tmp_path), tmp_path / "out"
    use(monkeypatch, Interrupting(at=0))
    code = cli.main(["run", str(config), "--output", str(out), "--no-progress"])
    printed, err = capsys.readouterr()
    assert (code, printed) == (130, "")
    assert "Traceback" not in err
    logged = TrialLog.load(out / "trials.jsonl")
    assert 1 <= len(logged) <= PER_ROUND  # the round in flight, and nothing after it
    assert {r.round for r in logged} == {0} and all(r.status != "crashed" for r in logged)
    lines = err.splitlines()
    assert "autotune: stopping once the trials in flight are logged (Ctrl-C again stops at once)" in lines
    assert (
        f"autotune: interrupted; {len(logged)} trial{'s' * (len(logged) != 1)} logged in {out / 'trials.jsonl'}"
        in lines
    )
    command = lines[-1].removeprefix("to continue: ")
    assert command == f"autotune run {config} --output {out} --resume"
    assert not (out / "best.json").exists()
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # the handler is put back

    use(monkeypatch, Interrupting(at=None))
    argv = shlex.split(command)[1:]
    assert cli.main([*argv, "--no-progress"]) == 0
    after = TrialLog.load(out / "trials.jsonl")
    assert len(after) == TRIALS and after[: len(logged)] == logged
    keys = [r.key for r in after if r.status != "invalid"]
    assert len(keys) == len(set(keys))  # nothing measured twice
    assert re.search(r"^results: ", capsys.readouterr().out, re.M)


def test_a_second_ctrl_c_stops_at_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    config, out = write_config(tmp_path), tmp_path / "out"
    use(monkeypatch, Interrupting(at=1, presses=2))
    code = cli.main(
        ["run", str(config), "--output", str(out), "--no-progress", "--trials", "5", "--seed", "7"]
    )
    _, err = capsys.readouterr()
    assert code == 130 and "Traceback" not in err
    logged = TrialLog.load(out / "trials.jsonl")
    assert len(logged) == 1  # the first trial; the second was stopped while it ran
    assert err.splitlines()[-1] == (
        f"to continue: autotune run {config} --output {out} --resume --trials 5 --seed 7"
    )
