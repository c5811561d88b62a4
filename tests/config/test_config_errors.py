"""Every mistake in a config file is a ConfigError naming the file, line, field, value and expectation."""

from __future__ import annotations

from pathlib import Path

import pytest
from config_helpers import WORKLOAD, base_config, write_config

from autotune.config import WorkloadConfig, load_config, load_workload
from autotune.errors import ConfigError

BASE = base_config(trials=40)

SIZE = "expected a positive size such as 65536, 64KiB or 2MiB"

CASES = {
    "malformed YAML": (
        ("  trials: 40", "  trials: [40"),
        "10:1: invalid YAML: expected ',' or ']', but got '<stream end>'",
    ),
    "malformed mapping": (
        ("memory:\n", "memory: {a: b\n"),
        "4:8: invalid YAML: expected ',' or '}', but got ':'",
    ),
    "a tab": (
        ("name: demo\n", "name: demo\n\tx: 1\n"),
        "2:1: invalid YAML: found character '\\t' that cannot start any token",
    ),
    "a duplicate key": (("search:\n", "name: twice\nsearch:\n"), "7:1: invalid YAML: duplicate key 'name'"),
    "an unsafe tag": (
        ("  trials: 40", "  trials: !!python/object/apply:os.system [ls]"),
        "9:11: invalid YAML: unsupported tag 'tag:yaml.org,2002:python/object/apply:os.system'",
    ),
    "an unknown field": (
        ("  trials: 40", "  trails: 40"),
        "9: search.trails: unknown field; did you mean 'trials'?",
    ),
    "an unknown top-level field": (
        ("name: demo", "nmae: demo"),
        "1: nmae: unknown field; did you mean 'name'?",
    ),
    "a missing field": (("  trials: 40\n", ""), "7: search: missing required field 'trials'"),
    "an unknown workload": (
        ("name: pool_chain", "name: pool_chian"),
        "2: workload.name: unknown workload 'pool_chian' (did you mean 'pool_chain'?); "
        "known workloads: bottleneck, matmul, pool_chain, resize_conv, tiny_cnn",
    ),
    "an unknown workload parameter": (
        ("height: 20", "hieght: 20"),
        "2: workload.args: workload 'pool_chain' has no parameter 'hieght' (did you mean 'height'?); "
        "accepted parameters: height, width, channels",
    ),
    "name and path": (
        ("{name: pool_chain,", "{name: pool_chain, path: w.py:f,"),
        "2: workload: expected exactly one of 'name' (a built-in workload) or 'path' ('file.py:function')",
    ),
    "a path without a function": (
        (WORKLOAD, "{path: w.py}"),
        "2: workload.path: expected 'path/to/file.py:function', got 'w.py'",
    ),
    "a negative size": (("size: 2MiB", "size: -3KiB"), f"6: memory.pools[1].size: {SIZE}, got '-3KiB'"),
    "an unparsable size": (("size: 2MiB", "size: 2 lots"), f"6: memory.pools[1].size: {SIZE}, got '2 lots'"),
    "a zero size": (("size: 64KiB", "size: 0KiB"), f"5: memory.pools[0].size: {SIZE}, got '0KiB'"),
    "a zero integer size": (("size: 64KiB", "size: 0"), f"5: memory.pools[0].size: {SIZE}, got 0"),
    "a bad peak limit": (
        ("  pools:\n", "  peak_limit: 1.5\n  pools:\n"),
        f"4: memory.peak_limit: {SIZE}, got 1.5",
    ),
    "no pools": (
        ("  pools:\n    - {name: dtcm, size: 64KiB}\n    - {name: sram, size: 2MiB}\n", "  pools: []\n"),
        "4: memory.pools: expected a non-empty list such as [{name: dtcm, size: 64KiB}], got []",
    ),
    "a duplicate pool": (("name: sram", "name: dtcm"), "6: memory.pools[1].name: duplicate pool name 'dtcm'"),
    "a bad pool name": (
        ("name: sram", "name: 'my pool'"),
        "6: memory.pools[1].name: expected an identifier such as 'dtcm' or 'sram', got 'my pool'",
    ),
    "an unknown planner": (
        ("  pools:\n", "  planner: greedy\n  pools:\n"),
        "4: memory.planner: expected one of 'greedy_by_conflicts', 'greedy_by_size', 'hill_climb', got 'greedy'; "
        "did you mean 'greedy_by_size'?",
    ),
    "an unknown sampler": (
        ("  trials: 40", "  trials: 40\n  sampler: tpee"),
        "10: search.sampler: expected one of 'tpe', 'nsga2', 'random', got 'tpee'; did you mean 'tpe'?",
    ),
    "zero trials": (("  trials: 40", "  trials: 0"), "9: search.trials: expected an integer >= 1, got 0"),
    "boolean trials": (
        ("  trials: 40", "  trials: yes"),
        "9: search.trials: expected an integer >= 1, got True",
    ),
    "a big epsilon": (
        ("  trials: 40", "  trials: 40\n  epsilon: 2"),
        "10: search.epsilon: expected a number from 0 to 1, got 2",
    ),
    "a big mutation share": (
        ("  trials: 40", "  trials: 40\n  mutation: 1.5"),
        "10: search.mutation: expected a number from 0 to 1, got 1.5",
    ),
    "a warm start that is not there": (
        ("  trials: 40", "  trials: 40\n  warm_start: earlier/best.json"),
        "10: search.warm_start: expected the best.json or trials.jsonl of an earlier run, got 'earlier/best.json'",
    ),
    "more measured than drawn": (
        ("  trials: 40", "  trials: 40\n  batch: 4\n  measure_per_round: 8"),
        "11: search.measure_per_round: expected at most batch (4), got 8",
    ),
    "a bad timeout": (
        ("search:", "measure: {timeout: soon}\nsearch:"),
        "7: measure.timeout: expected a positive duration such as 30, 30s, 2m or 500ms, got 'soon'",
    ),
    "a bad check flag": (
        ("search:", "measure:\n  check: maybe\nsearch:"),
        "8: measure.check: expected true or false, got 'maybe'",
    ),
    "zero workers": (
        ("search:", "ray: {workers: 0}\nsearch:"),
        "7: ray.workers: expected an integer >= 1, got 0",
    ),
    "a section that is not a mapping": (
        ("search:", "ray: 3\nsearch:"),
        "7: ray: expected a mapping with the fields address, workers, got 3",
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_bad_config(tmp_path: Path, case: str) -> None:
    (old, new), expected = CASES[case]
    assert old in BASE, old
    path = write_config(tmp_path, BASE.replace(old, new, 1))
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert str(err.value) == f"{path}:{expected}"


def test_base_is_good(tmp_path: Path) -> None:
    path = write_config(tmp_path, BASE, "good.yaml")
    assert load_config(path).search.trials == 40


def test_unknown_space_suggests_the_closest(tmp_path: Path) -> None:
    path = write_config(tmp_path, BASE.replace("space: cascade", "space: cascde"))
    with pytest.raises(
        ConfigError,
        match=r"bad\.yaml:8: search\.space: no space file 'cascde' \(looked for .*\); did you mean 'cascade'\?$",
    ):
        load_config(path)


@pytest.mark.parametrize(
    "text, expected",
    [
        (
            "",
            "the file is empty; expected a mapping with the fields name, workload, memory, search, measure, ray, output",
        ),
        (
            "- 1\n- 2\n",
            "1: expected a mapping with the fields name, workload, memory, search, measure, ray, output, got a list",
        ),
        ("&a [*a]\n", "1:1: invalid YAML: too many or recursive aliases"),
    ],
)
def test_not_a_mapping(tmp_path: Path, text: str, expected: str) -> None:
    path = write_config(tmp_path, text)
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert str(err.value) == f"{path}:{expected}" if expected[0].isdigit() else f"{path}: {expected}"


def test_missing_config_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        load_config(tmp_path / "nowhere.yaml")
    assert str(err.value) == f"{tmp_path / 'nowhere.yaml'}: no such file"


def test_workload_file_that_does_not_exist(tmp_path: Path) -> None:
    path = write_config(tmp_path, BASE.replace(WORKLOAD, "{path: lib/missing.py:make}"))
    with pytest.raises(ConfigError) as err:
        load_config(path)
    missing = tmp_path.resolve() / "lib" / "missing.py"
    assert (
        str(err.value)
        == f"{path}:2: workload.path: workload file '{missing}' does not exist (from 'lib/missing.py:make')"
    )


def _file_workload(tmp_path: Path, source: str, function: str = "make") -> WorkloadConfig:
    (tmp_path / "mine.py").write_text(source)
    text = BASE.replace(WORKLOAD, f"{{path: mine.py:{function}, args: {{side: 12}}}}")
    return load_config(write_config(tmp_path, text, "run.yaml")).workload


def test_workload_file_that_raises_on_import(tmp_path: Path) -> None:
    cfg = _file_workload(tmp_path, "raise RuntimeError('boom')\n")
    with pytest.raises(ConfigError) as err:
        load_workload(cfg)
    assert (
        str(err.value)
        == f"workload file '{tmp_path.resolve() / 'mine.py'}' raised RuntimeError on import: boom"
    )


def test_workload_function_that_raises(tmp_path: Path) -> None:
    cfg = _file_workload(tmp_path, "def make(side):\n    return side // 0\n")
    with pytest.raises(ConfigError) as err:
        load_workload(cfg)
    assert (
        str(err.value)
        == f"workload {cfg.path}: make(side=12) raised ZeroDivisionError: integer division or modulo by zero"
    )


def test_workload_function_that_returns_something_else(tmp_path: Path) -> None:
    cfg = _file_workload(tmp_path, "def make(side):\n    return side\n")
    with pytest.raises(ConfigError) as err:
        load_workload(cfg)
    assert str(err.value) == f"workload {cfg.path}: make(side=12) must return a Workload or a Chain, got int"


def test_workload_function_that_is_missing(tmp_path: Path) -> None:
    cfg = _file_workload(tmp_path, "def make_it(side):\n    return side\n", function="make_iy")
    with pytest.raises(ConfigError) as err:
        load_workload(cfg)
    assert (
        str(err.value)
        == f"workload file '{tmp_path.resolve() / 'mine.py'}' has no function 'make_iy'; did you mean 'make_it'?"
    )
