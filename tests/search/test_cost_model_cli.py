"""``autotune train-cost-model`` on two runs' logs, a run that starts from the model it wrote, and
the cost model's section of report.md."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from search_runs import POOLS, InProcess, write_run_config

from autotune import cli
from autotune.config import load_config
from autotune.report import write_report
from autotune.search.features import FEATURE_NAMES
from autotune.search.log import TrialLog
from autotune.search.tuner import tune

pytestmark = pytest.mark.slow


def run(tmp_path: Path, name: str, height: int, **search: object) -> Path:
    workload = {"name": "pool_chain", "args": {"height": height, "width": 20, "channels": 8}}
    knobs = {"trials": 12, "cost_model": "xgboost", "seed": 1, "batch": 8, "measure_per_round": 3, **search}
    cfg = load_config(write_run_config(tmp_path, name, workload, memory={"pools": POOLS}, **knobs))
    tune(cfg, progress=False, executor=InProcess(), report=write_report)
    return cfg.output


def test_train_a_model_and_start_a_run_from_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = run(tmp_path, "a", 20), run(tmp_path, "b", 24)
    report = (a / "report.md").read_text()
    assert "## Cost model" in report and "Spearman rank correlation" in report and "top-" in report
    model = tmp_path / "model.json"
    assert cli.main(["train-cost-model", str(a), str(b / "trials.jsonl"), "--output", str(model)]) == 0
    printed = capsys.readouterr().out
    assert "spearman" in printed and f"wrote {model}" in printed
    doc = json.loads(model.read_text())
    assert doc["features"] == list(FEATURE_NAMES) and doc["objective"] == "reg:squarederror"
    assert [t["ok_trials"] for t in doc["trained_on"]] == [
        sum(r.ok for r in TrialLog.load(d / "trials.jsonl")) for d in (a, b)
    ]
    assert {h["name"] for h in doc["held_out"]} == {"a", "b"}
    # a run that starts from it ranks its first round with it (its proposals come from the batch)
    c = run(tmp_path, "c", 16, cost_model={"kind": "xgboost", "pretrained": str(model)}, trials=6)
    assert sum(r.status != "infeasible" for r in TrialLog.load(c / "trials.jsonl")) == 6
    # a directory that is not a run is refused with its name
    assert cli.main(["train-cost-model", str(tmp_path / "nothing"), "--output", str(model)]) == 2
    assert "nothing" in capsys.readouterr().err
