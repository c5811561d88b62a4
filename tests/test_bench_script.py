"""Smoke test of experiments/bench_vs_baselines.py on tiny shapes (torch rows only when torch imports)."""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "experiments" / "bench_vs_baselines.py"
SYSTEMS = {
    "autotune",
    "autotune-default",
    "numpy",
    "torch-eager",
    "torch-eager-channels_last",
    "torch.compile",
}
THREAD_VARS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS")


@pytest.fixture
def bench(monkeypatch: pytest.MonkeyPatch) -> Any:
    """The script as a module (importing it sets the thread variables: restored after the test)."""
    for var in THREAD_VARS:  # the script sets these on import: restore them after the test
        if var in os.environ:
            monkeypatch.setenv(var, os.environ[var])
        else:
            monkeypatch.delenv(var, raising=False)
    spec = importlib.util.spec_from_file_location("bench_vs_baselines", SCRIPT)
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, bench)  # dataclasses look their module up there
    spec.loader.exec_module(bench)
    return bench


@pytest.mark.parametrize(
    ("probe_ms", "expected"),
    [
        (0.14, (143, 715)),  # a short kernel: 20 ms of warm-up, 100 ms of timed runs
        (6.0, (4, 20)),  # --repeats rules
        (300.0, (1, 16)),  # cut to the budget
        (6000.0, (0, 1)),  # slower than the budget: no warm-up, one run
    ],
)
def test_runs_for(bench: Any, probe_ms: float, expected: tuple[int, int]) -> None:
    assert bench.runs_for(probe_ms, repeats=20, budget_ms=5000.0, min_ms=100.0, warmup_ms=20.0) == expected


@pytest.mark.slow
def test_small_pool_chain_writes_rows(bench: Any, tmp_path: Path) -> None:
    argv = [
        "--small",
        "--rounds",
        "1",
        "--repeats",
        "2",
        "--workloads",
        "pool_chain",
        "--output",
        str(tmp_path),
    ]
    assert bench.main(argv) == 0

    rows = json.loads((tmp_path / "bench.json").read_text(encoding="utf-8"))
    assert rows, "no row was timed"
    for row in rows:
        assert set(row) == {"workload", "system", "median_ms", "workspace_bytes"}
        assert row["system"] in SYSTEMS
        assert row["workload"] == "pool_chain"
        assert row["median_ms"] > 0
    assert {"numpy", "autotune-default"} <= {r["system"] for r in rows}
    assert (tmp_path / "bench.md").exists() and (tmp_path / "bench.parquet").exists()
