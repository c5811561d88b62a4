"""The `autotune` command without compiling: workloads, show, argument and user errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from autotune import workloads
from autotune.cli import check as cli_check
from autotune.cli import main, parse_param, parse_params
from autotune.cli.check import _auto_runs
from autotune.errors import ConfigError, ScheduleError
from autotune.measure import MeasureResult
from autotune.schedule import Schedule

SMALL = ["pool_chain", "--param", "height=10", "--param", "width=9", "--param", "channels=2"]


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_workloads_lists_every_chain_with_its_figures(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "workloads")
    assert code == 0 and err == ""
    for name in ("pool_chain", "resize_conv", "bottleneck", "tiny_cnn", "matmul"):
        assert name in out
    header, *rows = out.splitlines()
    assert header.split()[:3] == ["name", "parameters", "(defaults)"]
    matmul = next(r for r in rows if r.startswith("matmul"))
    assert "m=1024 n=1024 k=1024" in matmul and "2.15G" in matmul  # 2 * 1024^3 flops
    pool = next(r for r in rows if r.startswith("pool_chain"))
    assert "height=132" in pool and workloads.description("pool_chain") in pool


def test_show_prints_the_ir(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "show", *SMALL)
    assert code == 0
    assert out.startswith("@T.prim_func\ndef pool_chain(")
    assert out == str(workloads.get("pool_chain", height=10, width=9, channels=2).func).rstrip("\n") + "\n"
    assert 'T.block("pool1")' in out


def test_show_lowered_has_allocations(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "show", *SMALL, "--lowered")
    assert code == 0
    assert "@T.prim_func" in out and "T.allocate" in out and "T.block" not in out


def test_show_source_is_the_kernel_module(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "show", *SMALL, "--source", "--pools", "dtcm=64KiB")
    assert code == 0
    assert "def pool_chain(" in out and "@numba.njit" in out
    assert "in pool dtcm at offset 0" in out
    compile(out, "<kernel>", "exec")  # valid Python


def test_show_replays_a_trace(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    func = workloads.get("pool_chain", height=10, width=9, channels=2).func
    sch = Schedule(func).split("y", [None, 4])
    path = tmp_path / "best.json"
    path.write_text(json.dumps({"trace": json.loads(sch.trace_json()), "median_ms": 1.0}))
    code, out, _ = run(capsys, "show", *SMALL, "--trace", str(path))
    assert code == 0
    assert out == str(sch.func).rstrip("\n") + "\n"


def test_unknown_workload_exits_2_with_the_registry_message(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ConfigError) as info:
        workloads.get("pool_chian")
    code, out, err = run(capsys, "check", "pool_chian")
    assert code == 2 and out == ""
    assert err == f"autotune: error: {info.value}\n"
    assert err.startswith("autotune: error: unknown workload 'pool_chian' (did you mean 'pool_chain'?)")


@pytest.mark.parametrize(
    ("param", "message"),
    [
        ("depth=3", "workload 'pool_chain' has no parameter 'depth'"),
        ("height=2.5", "workload 'pool_chain': parameter 'height' must be a positive integer, got 2.5"),
        ("height", "--param: expected KEY=VALUE such as height=20, got 'height'"),
        ("height=big", "--param height: expected a number, got 'big'"),
    ],
)
def test_bad_param_exits_2(capsys: pytest.CaptureFixture[str], param: str, message: str) -> None:
    code, _, err = run(capsys, "show", "pool_chain", "--param", param)
    assert code == 2
    assert err.startswith(f"autotune: error: {message}")
    assert "Traceback" not in err


def test_parse_param() -> None:
    assert parse_param("height=20") == ("height", 20)
    assert parse_param(" scale = 0.5 ") == ("scale", 0.5)
    assert isinstance(parse_param("h=20")[1], int)
    assert parse_params(["a=1", "b=2.0"]) == {"a": 1, "b": 2.0}
    with pytest.raises(ConfigError, match="given twice"):
        parse_params(["a=1", "a=2"])


def test_bad_pools_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "check", *SMALL, "--pools", "dtcm")
    assert code == 2 and out == ""
    assert err == "autotune: error: pools[0]: expected NAME=SIZE such as dtcm=64KiB, got 'dtcm'\n"


def test_unknown_planner_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "show", *SMALL, "--lowered", "--planner", "best_fit")
    assert code == 2
    assert err.startswith("autotune: error: planner: unknown algorithm 'best_fit'")


def test_pools_too_small_exit_2_naming_the_pool(capsys: pytest.CaptureFixture[str]) -> None:
    # pool1 is 1 x 8 x 7 x 2 float32 = 448 bytes
    code, out, err = run(capsys, "check", *SMALL, "--pools", "dtcm=256B")
    assert code == 2 and out == ""
    assert err.startswith("autotune: error: allocation ")
    assert "does not fit pool 'dtcm'" in err and "pool has 256" in err and "would fit" in err
    assert "Traceback" not in err


def test_trace_that_does_not_apply_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    steps = {"version": 1, "steps": [{"op": "split", "args": {"loop": "nowhere", "factors": [None, 4]}}]}
    path = tmp_path / "trace.json"
    path.write_text(json.dumps(steps))
    func = workloads.get("pool_chain", height=10, width=9, channels=2).func
    with pytest.raises(ScheduleError) as info:
        Schedule.replay(func, json.dumps(steps))
    code, out, err = run(capsys, "check", *SMALL, "--trace", str(path))
    assert code == 2 and out == ""
    assert err == f"autotune: error: {info.value}\n"
    assert err.startswith("autotune: error: split: trace step 0 does not apply")


@pytest.mark.parametrize(("text", "message"), [(None, "cannot read"), ("{not json", "not valid JSON")])
def test_unreadable_trace_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str | None, message: str
) -> None:
    path = tmp_path / "best.json"
    if text is not None:
        path.write_text(text)
    code, _, err = run(capsys, "show", *SMALL, "--trace", str(path))
    assert code == 2
    assert err.startswith(f"autotune: error: trace: {path}: ") and message in err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["check"], "check: give one WORKLOAD or --all"),
        (["check", "matmul", "--all"], "check: give one WORKLOAD or --all"),
        (["check", "--all", "--param", "height=3"], "check --all takes no --param"),
        (["check", *SMALL, "--repeats", "0"], "--repeats: expected an integer >= 1, got 0"),
    ],
)
def test_check_argument_errors(capsys: pytest.CaptureFixture[str], argv: list[str], message: str) -> None:
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == ""
    assert err.startswith(f"autotune: error: {message}")


def test_usage_errors_return_2(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "frobnicate")
    assert code == 2 and "invalid choice" in err
    code, _, err = run(capsys, "show", "pool_chain", "--lowered", "--source")
    assert code == 2 and "not allowed with" in err
    code, out, _ = run(capsys, "--help")
    assert code == 0 and "workloads" in out and "check" in out


def test_auto_runs_fit_the_time_budget() -> None:
    assert _auto_runs(1.0, None) == (2, 10)
    assert _auto_runs(1.0, 5) == (5, 10)
    assert _auto_runs(500.0, None) == (0, 6)
    assert _auto_runs(5000.0, None) == (0, 1)  # the probe run is the measurement
    assert _auto_runs(5000.0, 1) == (1, 1)


def test_python_dash_m_runs_the_command() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "autotune", "show", "pool_chain", "--param", "height=8", "--param", "width=8"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("@T.prim_func")


def test_kernel_that_cannot_be_built_exits_1(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    failed = MeasureResult.failure("error", "kernel pool_chain: numba failed to compile k.py:\nTypingError")
    monkeypatch.setattr(cli_check, "measure", lambda *a, **k: failed)
    code, out, err = run(capsys, "check", *SMALL)
    assert code == 1
    assert out.startswith("pool_chain(height=10, width=9, channels=2): error\n")
    assert err == "autotune: pool_chain: the kernel could not be built:\n" + failed.error + "\n"
