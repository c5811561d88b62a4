"""The Python API: README's "Python API" block run as a script, load_best, and the errors of both."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import autotune
from autotune.api import resolve_config
from autotune.errors import AutotuneError, ConfigError
from autotune.search import tuner as tuner_module

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"

SMALL = {"name": "pool_chain", "args": {"height": 12, "width": 12, "channels": 4}}


def section(title: str) -> str:
    text = README.read_text(encoding="utf-8")
    start = text.index(f"## {title}\n")
    return text[start : text.index("\n## ", start + 1)]


def config(tmp_path: Path, **memory: Any) -> dict[str, Any]:
    return {
        "workload": SMALL,
        "memory": {"pools": [{"name": "sram", "size": "64KiB"}], **memory},
        "search": {"space": "cascade", "trials": 2, "cost_model": "none", "batch": 2, "measure_per_round": 2},
        "measure": {"warmup": 0, "repeats": 1},
        "output": str(tmp_path / "out" / "run"),
    }


@pytest.mark.slow
@pytest.mark.timeout(1800)  # 10-20 s on a quiet machine; 280 s was not enough with two suites running
def test_readme_block_runs_as_a_script_without_a_main_guard(tmp_path: Path) -> None:
    """The block as written, as a script with no ``__main__`` guard, on the local executor (its
    spawned workers would run the script again if they imported it: the tune would recurse)."""
    (block,) = re.findall(r"```python\n(.*?)```", section("Python API"), re.S)
    assert "__main__" not in block and 'executor="local"' in block
    script = tmp_path / "script.py"
    script.write_text(block, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=1700
    )
    assert done.returncode == 0, done.stderr
    assert re.search(r"^best \d+\.\d{4} ms, \d+\.\d\dx the default schedule$", done.stdout, re.M), done.stdout
    assert re.search(r"trial +status +median_ms +peak_bytes", done.stdout)
    best = json.loads((tmp_path / "out" / "api_demo" / "best.json").read_text())
    assert best["name"] == "api_demo" and best["figures"]["status"] == "ok"
    assert done.stdout.count("best ") == 1  # tuned once: no worker ran the script again


def test_tune_refuses_a_bad_config_and_writes_nothing(tmp_path: Path) -> None:
    cfg = config(tmp_path)
    cfg["search"]["trails"] = 3
    with pytest.raises(
        ConfigError, match=r"^<config dict>: search.trails: unknown field; did you mean 'trials'\?"
    ):
        autotune.tune(cfg, executor="local")
    with pytest.raises(ConfigError, match="expected a config file path, a dict or a RunConfig, got int"):
        autotune.tune(3, executor="local")  # type: ignore[arg-type]
    assert not (tmp_path / "out").exists()


def test_no_output_directory_before_the_checks_pass(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A peak limit nothing meets is refused before the output directory is made (also when the
    tuner is called directly, without the API's clean-up)."""

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the executor was started")

    monkeypatch.setattr(tuner_module, "make_executor", refuse)
    space = tmp_path / "space.yaml"  # 2 tiles x 3 placements: the check lowers each of them
    space.write_text(
        "family: cascade\nknobs: {tile_rows: [1, 2], strip: {value: 0}, parallel: {value: none}}\n"
    )
    data = config(tmp_path, peak_limit=16)
    data["search"]["space"] = str(space)
    cfg = resolve_config(data)
    with pytest.raises(ConfigError, match="no schedule of the space fits the memory"):
        tuner_module.tune(cfg, progress=False)
    assert not (tmp_path / "out").exists()
    with pytest.raises(ConfigError, match="no schedule of the space fits the memory"):
        autotune.tune(data, executor="local")
    assert not (tmp_path / "out").exists()


def test_a_run_config_and_a_file_give_the_same_config(tmp_path: Path) -> None:
    import yaml

    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(config(tmp_path)), encoding="utf-8")
    from_file = resolve_config(path, trials=5)
    from_dict = resolve_config(config(tmp_path), trials=5)
    again = resolve_config(from_file)
    assert from_file.search.trials == from_dict.search.trials == again.search.trials == 5
    assert from_file.to_dict() == again.to_dict()
    assert {**from_file.to_dict(), "name": "config"} == from_dict.to_dict()


def test_load_best_refuses_what_is_not_a_run(tmp_path: Path) -> None:
    with pytest.raises(
        AutotuneError, match=r"no such file or directory; expected a run directory or its best.json"
    ):
        autotune.load_best(tmp_path / "nowhere")
    with pytest.raises(AutotuneError, match=r"no best.json \(the run has not finished"):
        autotune.load_best(tmp_path)
    bad = tmp_path / "best.json"
    bad.write_text("{not json")
    with pytest.raises(AutotuneError, match=r"best.json: not a best.json \("):
        autotune.load_best(bad)
    bad.write_text(json.dumps({"trace": {}}))
    with pytest.raises(
        AutotuneError, match=r"not a best.json of autotune run \(no workload, pools, planner, seed\)"
    ):
        autotune.load_best(tmp_path)


def test_load_best_compiles_the_trace_and_checks_its_inputs(tmp_path: Path) -> None:
    """A best.json written by hand from a default schedule: the kernel equals the reference."""
    from autotune.schedule import Schedule

    wl = autotune.workloads.get("pool_chain", **SMALL["args"])
    best = {
        "name": "hand", "trial": 0, "workload": {"name": "pool_chain", "path": None, "args": SMALL["args"]},
        "trace": json.loads(Schedule(wl.func).trace_json()), "pools": [{"name": "sram", "size": 65536}],
        "planner": "greedy_by_size", "seed": 0,
    }  # fmt: skip
    (tmp_path / "best.json").write_text(json.dumps(best))
    kernel = autotune.load_best(tmp_path)
    x = np.random.default_rng(1).standard_normal((1, 12, 12, 4))  # float64: cast to float32
    (expected,) = wl.reference(x.astype(np.float32))
    np.testing.assert_allclose(kernel(x), expected)
    with pytest.raises(
        AutotuneError, match=r"input 0 \(data\) must be float32 of shape \[1, 12, 12, 4\], got"
    ):
        kernel(np.zeros((1, 12, 12, 3), np.float32))
    with pytest.raises(AutotuneError, match=r"expected 1 input arrays \(data\), got 2"):
        kernel(x, x)
