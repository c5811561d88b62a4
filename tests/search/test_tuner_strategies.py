"""The tuner with each search strategy: the budget counts measured trials, resume learns the log,
and a config names its strategy (or is refused with the file, field and the known names)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from search_runs import POOLS, InProcess, write_run_config

from autotune.config import load_config
from autotune.errors import AutotuneError, ConfigError
from autotune.search.log import TrialLog
from autotune.search.tuner import tune

pytestmark = pytest.mark.slow

WORKLOAD = {"name": "pool_chain", "args": {"height": 20, "width": 20, "channels": 8}}
STRATEGIES = [
    {"strategy": "evolutionary", "cost_model": "xgboost"},
    {"strategy": "random", "cost_model": "none"},
    {"strategy": "optuna", "sampler": "nsga2", "cost_model": "xgboost"},
]


def write_config(tmp_path: Path, name: str, **search: Any) -> Path:
    memory = {"pools": POOLS, "peak_limit": "12KiB"}
    knobs = {"trials": 8, "seed": 3, "batch": 8, "measure_per_round": 3, **search}
    return write_run_config(tmp_path, name, WORKLOAD, memory=memory, **knobs)


def identity(record: Any) -> Any:
    return record.knobs if record.status == "invalid" else record.key


@pytest.mark.parametrize("search", STRATEGIES, ids=lambda s: s.get("sampler", s["strategy"]))
def test_each_strategy_tunes_and_resumes(tmp_path: Path, search: dict[str, Any]) -> None:
    cfg = load_config(write_config(tmp_path, "run", **search))
    assert cfg.search.strategy == search["strategy"]
    result = tune(cfg, progress=False, executor=InProcess())
    logged = TrialLog.load(cfg.output / "trials.jsonl")
    measured = [r for r in logged if r.status != "infeasible"]
    assert len(measured) == 8 and result.best.ok  # infeasible ones are logged, not counted
    assert all(r.peak_bytes for r in logged if r.status == "infeasible")
    assert len({identity(r) for r in logged}) == len(logged)  # nothing measured twice
    picks = {r.picked for r in logged if r.status not in ("infeasible", "invalid")}
    assert "" not in picks  # every measured trial says how its round chose it
    assert ("model" in picks) == (search["cost_model"] != "none")
    # killed after 4 trials: the resumed run measures what is left and repeats none of them
    log = cfg.output / "trials.jsonl"
    lines = log.read_bytes().splitlines(keepends=True)
    log.write_bytes(b"".join(lines[:4]))
    (cfg.output / "best.json").unlink()
    with pytest.raises(AutotuneError, match="already holds a run"):
        tune(cfg, progress=False, executor=InProcess())
    executor = InProcess()
    tune(cfg, resume=True, progress=False, executor=executor)
    after = TrialLog.load(log)
    assert [identity(r) for r in after[:4]] == [identity(r) for r in logged[:4]]
    assert len([r for r in after if r.status != "infeasible"]) == 8
    assert len({identity(r) for r in after}) == len(after)
    assert executor.calls == sum(1 for r in after[4:] if r.status not in ("infeasible", "invalid"))
    # the model scored out of fold on the resumed run's trials (the first 4 lowered again)
    folds = json.loads((cfg.output / "best.json").read_text(encoding="utf-8"))["cost_model"]
    ok = sum(r.status == "ok" for r in after)
    assert folds["kind"] == search["cost_model"]
    if search["cost_model"] == "none" or ok < 8:
        assert folds["cross_validated"] is None
    else:
        assert folds["cross_validated"]["trials"] == ok and folds["cross_validated"]["folds"] == 4


@pytest.mark.parametrize("strategy", ["random", "evolutionary"])
def test_the_same_seed_measures_the_same(tmp_path: Path, strategy: str) -> None:
    """Random search's proposals depend on the seed and on which assignments have a trial, so the
    two runs measure the same knobs; the evolutionary one breeds from the measured latencies (they
    vary with the machine's load), so only its first round, drawn before any, is the same."""
    runs = []
    for name in ("a", "b"):
        cfg = load_config(
            write_config(tmp_path, f"{strategy}-{name}", strategy=strategy, cost_model="none", trials=6)
        )
        tune(cfg, progress=False, executor=InProcess())
        logged = TrialLog.load(cfg.output / "trials.jsonl")
        runs.append([r.knobs for r in logged if strategy == "random" or r.round == 0])
    assert runs[0] == runs[1] and runs[0]


def test_an_unknown_strategy_names_the_file_field_and_choices(tmp_path: Path) -> None:
    path = write_config(tmp_path, "bad", strategy="annealing")
    with pytest.raises(ConfigError) as err:
        load_config(path)
    text = str(err.value)
    assert text.startswith(str(path)) and "search.strategy: expected one of" in text
    assert all(f"'{name}'" in text for name in ("optuna", "evolutionary", "random"))
    assert "got 'annealing'" in text


def test_the_default_strategy_is_optuna_and_is_not_written(tmp_path: Path) -> None:
    cfg = load_config(write_config(tmp_path, "plain"))
    assert cfg.search.strategy == "optuna"
    assert "strategy" not in cfg.to_dict()["search"]  # earlier runs' fingerprints hold
    evo = load_config(write_config(tmp_path, "evo", strategy="evolutionary"))
    data = evo.to_dict()
    assert data["search"]["strategy"] == "evolutionary"
    copy = tmp_path / "copy.yaml"
    copy.write_text(yaml.safe_dump(data), encoding="utf-8")
    assert load_config(copy).search == evo.search
    assert re.search("strategy", yaml.safe_dump(data))
