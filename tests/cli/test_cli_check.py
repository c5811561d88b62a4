"""`autotune check` on small instances: compiles (one small kernel, shared through the kernel cache)."""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest

from autotune import cli, workloads
from autotune.workloads import Workload

pytestmark = pytest.mark.slow

SMALL = ["pool_chain", "--param", "height=10", "--param", "width=9", "--param", "channels=2"]
FAST = ["--repeats", "3", "--warmup", "0"]


def test_check_small_instance_is_ok(capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(["check", *SMALL, *FAST])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert out.startswith("pool_chain(height=10, width=9, channels=2): ok\n")
    assert re.search(r"max abs error\s+0\n", out)
    assert "  workspace peak  448 B\n" in out  # pool1: 1 x 8 x 7 x 2 float32
    assert re.search(r"latency\s+median \d+\.\d{3} ms, min \d+\.\d{3} ms, IQR \d+\.\d{3} ms \(3 runs", out)
    assert re.search(r"compile\s+\d+\.\d\d s", out)
    assert "memory plan" not in out  # only with --pools


def test_check_with_pools_prints_the_plan(capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(["check", *SMALL, *FAST, "--pools", "dtcm=1KiB,sram=2MiB"])
    out, _ = capsys.readouterr()
    assert code == 0
    assert ": ok\n" in out
    assert "memory plan (greedy_by_size): total peak 448 B" in out
    assert "pool 'dtcm': size 1,024 B (1.0 KiB), peak 448 B" in out


def test_check_auto_repeats(capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(["check", *SMALL])
    out, _ = capsys.readouterr()
    assert code == 0
    assert "(10 runs," in out  # a tiny kernel gets the default number of runs


def test_wrong_output_exits_1(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    real_get = workloads.get

    def off_by_one(name: str, **params: int) -> Workload:
        wl = real_get(name, **params)
        return dataclasses.replace(
            wl, reference=lambda *xs: tuple(o + np.float32(1) for o in wl.reference(*xs))
        )

    monkeypatch.setattr(cli.workloads, "get", off_by_one)
    code = cli.main(["check", *SMALL, *FAST])
    out, _ = capsys.readouterr()
    assert code == 1
    assert out.startswith("pool_chain(height=10, width=9, channels=2): wrong\n")
    assert re.search(r"max abs error\s+1\n", out)
    assert "  latency         -\n" in out


SMALL_PARAMS = {
    "pool_chain": {"height": 10, "width": 9, "channels": 2},
    "bottleneck": {"height": 4, "width": 4, "cin": 2, "expand": 4},
}


@pytest.fixture
def small_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    """`check --all` over two small instances instead of every chain at its default size."""
    real_get = workloads.get
    monkeypatch.setattr(cli.workloads, "names", lambda: sorted(SMALL_PARAMS))
    monkeypatch.setattr(cli.workloads, "get", lambda name, **p: real_get(name, **{**SMALL_PARAMS[name], **p}))


@pytest.mark.usefixtures("small_registry")
def test_check_all_prints_one_table(capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(["check", "--all", *FAST])
    out, err = capsys.readouterr()
    assert code == 0, err
    header, *rows = out.splitlines()
    assert header.split()[:4] == ["workload", "status", "max", "err"]
    assert [r.split()[:2] for r in rows] == [["bottleneck", "ok"], ["pool_chain", "ok"]]
    assert rows[1].split()[3:5] == ["448", "B"]


@pytest.mark.usefixtures("small_registry")
def test_check_all_pools_too_small_go_on_and_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(["check", "--all", "--pools", "dtcm=64B"])
    out, err = capsys.readouterr()
    assert code == 2
    assert [r.split()[:2] for r in out.splitlines()[1:]] == [
        ["bottleneck", "infeasible"],
        ["pool_chain", "infeasible"],
    ]
    assert err.count("autotune: error: ") == 2
    assert "autotune: error: pool_chain: allocation 'pool1' (448 bytes) does not fit pool 'dtcm'" in err
