"""load_config on good files: every field, defaults, paths, overrides, the round trip; load_workload."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from autotune.config import (
    REPO_ROOT,
    MeasureConfig,
    MemoryConfig,
    RayConfig,
    RunConfig,
    SearchConfig,
    WorkloadConfig,
    load_config,
    load_workload,
    parse_duration,
)
from autotune.errors import ConfigError
from autotune.memory import Pool

GOOD = """\
name: demo
workload: {name: pool_chain, args: {height: 20, width: 20, channels: 4}}
memory:
  pools: [{name: dtcm, size: 64KiB}, {name: sram, size: 2MiB, read_cost: 2.5}]
  peak_limit: 512KiB
  planner: hill_climb
search: {space: cascade, trials: 40, sampler: nsga2, cost_model: none, seed: 7, batch: 32, measure_per_round: 4, epsilon: 0.1}
measure: {warmup: 1, repeats: 5, timeout: 500ms, check: false}
ray: {address: "ray://head:10001", workers: 4}
output: out/demo
"""

MINIMAL = """\
workload: {name: matmul}
memory: {pools: [{name: sram, size: 1048576}]}
search: {space: gemm.yaml, trials: 8}
"""


def write(tmp_path: Path, text: str, name: str = "run.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_good_config_reads_every_field(tmp_path: Path) -> None:
    path = write(tmp_path, GOOD)
    cfg = load_config(path)
    assert cfg == RunConfig(
        name="demo",
        workload=WorkloadConfig("pool_chain", None, (("height", 20), ("width", 20), ("channels", 4))),
        memory=MemoryConfig(
            (Pool("dtcm", 65536), Pool("sram", 2 * 1024**2, read_cost=2.5)), 512 * 1024, "hill_climb"
        ),
        search=SearchConfig(REPO_ROOT / "search_spaces" / "cascade.yaml", 40, "nsga2", "none", 7, 32, 4, 0.1),
        measure=MeasureConfig(1, 5, 0.5, False),
        ray=RayConfig("ray://head:10001", 4),
        output=tmp_path.resolve() / "out" / "demo",
        source=path.resolve(),
    )


def test_defaults_of_a_minimal_config(tmp_path: Path) -> None:
    cfg = load_config(write(tmp_path, MINIMAL, "mini.yaml"))
    assert cfg.name == "mini"
    assert cfg.workload == WorkloadConfig("matmul", None, ())
    assert cfg.memory == MemoryConfig((Pool("sram", 1048576),), None, "greedy_by_size")
    assert cfg.search == SearchConfig(REPO_ROOT / "search_spaces" / "gemm.yaml", 8, "tpe", "xgboost", 0)
    assert cfg.measure == MeasureConfig() and cfg.ray == RayConfig()
    assert cfg.output == tmp_path.resolve() / "results" / "mini"


def test_round_trip_through_yaml(tmp_path: Path) -> None:
    cfg = load_config(write(tmp_path, GOOD))
    other = tmp_path / "elsewhere"
    other.mkdir()
    again = load_config(write(other, yaml.safe_dump(cfg.to_dict(), sort_keys=False), "copy.yaml"))
    assert replace(again, source=cfg.source) == cfg


def test_space_paths_relative_to_the_config_then_the_repository(tmp_path: Path) -> None:
    (tmp_path / "mine.yaml").write_text("family: cascade\n")

    def space(given: str) -> Path:
        return load_config(write(tmp_path, MINIMAL.replace("gemm.yaml", given))).search.space

    assert space("mine.yaml") == tmp_path.resolve() / "mine.yaml"
    assert space("gemm") == REPO_ROOT / "search_spaces" / "gemm.yaml"
    shown = space("search_spaces/cascade.yaml")  # as in DESIGN.md
    assert shown == REPO_ROOT / "search_spaces" / "cascade.yaml"


@pytest.mark.parametrize(
    "text, seconds",
    [(30, 30.0), (2.5, 2.5), ("30s", 30.0), ("2m", 120.0), ("500ms", 0.5), ("1h", 3600.0), (" 45 ", 45.0)],
)
def test_durations(text: object, seconds: float) -> None:
    assert parse_duration(text) == seconds


def test_overrides(tmp_path: Path) -> None:
    path = write(tmp_path, GOOD)
    cfg = load_config(
        path, {"trials": 3, "workers": 1, "ray_address": "auto", "output": "o", "seed": 9, "resume": True}
    )
    assert (cfg.search.trials, cfg.search.seed, cfg.ray.workers, cfg.ray.address) == (3, 9, 1, "auto")
    assert cfg.output == Path.cwd() / "o"
    assert load_config(path, {"trials": None, "seed": None}) == load_config(path)


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"trails": 3}, "command line: trails: unknown field; did you mean 'trials'?"),
        ({"trials": 0}, "command line: trials: expected an integer >= 1, got 0"),
        ({"workers": "two"}, "command line: workers: expected an integer >= 1, got 'two'"),
        ({"seed": -1}, "command line: seed: expected an integer >= 0 and < 4294967296, got -1"),
    ],
)
def test_bad_overrides(tmp_path: Path, overrides: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_config(write(tmp_path, GOOD), overrides)
    assert str(err.value) == message


def test_registry_workload_loads() -> None:
    wl = load_workload(WorkloadConfig("pool_chain", None, (("height", 20), ("width", 20), ("channels", 4))))
    assert wl.name == "pool_chain" and wl.params == {"height": 20, "width": 20, "channels": 4}


def test_workload_from_a_file(tmp_path: Path) -> None:
    (tmp_path / "mine.py").write_text(
        "from autotune.workloads import get\n\n"
        "def small(side: int):\n"
        "    return get('pool_chain', height=side, width=side, channels=2)\n"
    )
    cfg = load_config(
        write(tmp_path, MINIMAL.replace("{name: matmul}", "{path: mine.py:small, args: {side: 12}}"))
    )
    assert cfg.workload == WorkloadConfig(None, f"{(tmp_path / 'mine.py').resolve()}:small", (("side", 12),))
    assert load_workload(cfg.workload).params == {"height": 12, "width": 12, "channels": 2}


def test_every_shipped_config_loads() -> None:
    paths = [
        *sorted((REPO_ROOT / "experiments" / "configs").glob("*.yaml")),
        REPO_ROOT / "examples" / "small.yaml",
    ]
    assert len(paths) >= 6
    for path in paths:
        cfg = load_config(path)
        assert cfg.search.space.is_file()
        assert load_workload(cfg.workload).name == cfg.workload.name
