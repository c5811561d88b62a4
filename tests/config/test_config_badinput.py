"""Bad config input through the CLI, YAML safety, and the guarantees of the fuzz tests.

``test_config_errors.py`` checks the exact ConfigError of each mistake; here
the same mistakes go through ``autotune run`` (exit status 2, one line on
stderr, no tuning started), Python tags in YAML are shown to be rejected
without running anything, the package is scanned for ``eval``/``exec``, and
the fuzz tests are checked to really run at least 500 examples each.
"""

from __future__ import annotations

import ast
import importlib.util
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from config_helpers import WORKLOAD, base_config, write_config

from autotune import cli
from autotune.config import REPO_ROOT, load_config
from autotune.errors import ConfigError
from autotune.search import tuner as tuner_module

BASE = base_config(trials=4)


@pytest.fixture
def no_tuning(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail the test if a run gets as far as starting its workers."""

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("tuning started on a bad config")

    monkeypatch.setattr(tuner_module, "make_executor", refuse)


def run_config(tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str) -> tuple[int, str, str, Path]:
    path = write_config(tmp_path, text)
    code = cli.main(["run", str(path), "--output", str(tmp_path / "out"), "--no-progress"])
    out, err = capsys.readouterr()
    return code, out, err, path


# ---------------------------------------------------------------- through `autotune run`

CLI_CASES = {
    "a YAML syntax error": (
        ("  trials: 4", "  trials: [4"),
        "10:1: invalid YAML: expected ',' or ']', but got '<stream end>'",
    ),
    "an unknown key": (("  trials: 4", "  trials: 4\n  sampel: tpe"), "10: search.sampel: unknown field; did you mean 'sampler'?"),
    "a zero pool size": (("size: 64KiB", "size: 0"), "5: memory.pools[0].size: expected a positive size such as 65536, 64KiB or 2MiB, got 0"),
    "a negative pool size": (("size: 2MiB", "size: -2MiB"), "6: memory.pools[1].size: expected a positive size such as 65536, 64KiB or 2MiB, got '-2MiB'"),
    "an unparsable pool size": (("size: 2MiB", "size: two megs"), "6: memory.pools[1].size: expected a positive size such as 65536, 64KiB or 2MiB, got 'two megs'"),
    "a workload file that does not exist": (
        (WORKLOAD, "{path: nowhere.py:make}"),
        "2: workload.path: workload file '{dir}/nowhere.py' does not exist (from 'nowhere.py:make')",
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", list(CLI_CASES))
def test_bad_config_through_the_cli(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], no_tuning: None, case: str
) -> None:
    (old, new), expected = CLI_CASES[case]
    assert old in BASE
    code, out, err, path = run_config(tmp_path, capsys, BASE.replace(old, new, 1))
    assert (code, out) == (2, "")
    assert err == f"autotune: error: {path}:{expected.format(dir=tmp_path.resolve())}\n"
    assert not (tmp_path / "out").exists()  # rejected before the output directory is made


def test_workload_file_that_raises_through_the_cli(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], no_tuning: None
) -> None:
    (tmp_path / "mine.py").write_text("raise RuntimeError('boom')\n")
    code, out, err, _ = run_config(tmp_path, capsys, BASE.replace(WORKLOAD, "{path: mine.py:make}"))
    assert (code, out) == (2, "")
    mine = tmp_path.resolve() / "mine.py"
    assert err == f"autotune: error: workload file '{mine}' raised RuntimeError on import: boom\n"


def test_workload_function_that_raises_through_the_cli(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], no_tuning: None
) -> None:
    (tmp_path / "mine.py").write_text(
        "def make(side):\n    raise ValueError(f'no workload of side {side}')\n"
    )
    code, out, err, _ = run_config(
        tmp_path, capsys, BASE.replace(WORKLOAD, "{path: mine.py:make, args: {side: 12}}")
    )
    assert (code, out) == (2, "")
    spec = f"{tmp_path.resolve() / 'mine.py'}:make"
    assert (
        err == f"autotune: error: workload {spec}: make(side=12) raised ValueError: no workload of side 12\n"
    )


# ---------------------------------------------------------------- YAML is data only

PYTHON_TAGS = {
    "object/apply on a sequence": (
        "  trials: !!python/object/apply:os.system ['touch {marker}']",
        "9:11: invalid YAML: unsupported tag 'tag:yaml.org,2002:python/object/apply:os.system'",
    ),
    "object on a mapping": (
        "  trials: !!python/object:os.system {{command: 'touch {marker}'}}",
        "9:11: invalid YAML: unsupported tag 'tag:yaml.org,2002:python/object:os.system'",
    ),
    "name on a scalar": (
        "  trials: !!python/name:os.system 'touch {marker}'",
        "9:11: invalid YAML: unsupported tag 'tag:yaml.org,2002:python/name:os.system'",
    ),
    "a local tag": ("  trials: !shell 'touch {marker}'", "9:11: invalid YAML: unsupported tag '!shell'"),
}


@pytest.mark.parametrize("case", list(PYTHON_TAGS))
def test_python_tags_are_rejected_and_nothing_runs(tmp_path: Path, case: str) -> None:
    """The safe loader refuses every Python tag: a ConfigError, and the command was not run.

    (A scalar with ``!!python/name:`` used to give the message ``invalid YAML:           ^``,
    the caret line of PyYAML's error text.)"""
    line, expected = PYTHON_TAGS[case]
    marker = tmp_path / "ran"
    path = write_config(tmp_path, BASE.replace("  trials: 4", line.format(marker=marker)), "evil.yaml")
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert str(err.value) == f"{path}:{expected}"
    assert not marker.exists()


DYNAMIC = {"eval", "exec", "compile", "__import__"}
UNSAFE_YAML = {"load", "unsafe_load", "full_load", "load_all", "unsafe_load_all", "full_load_all"}
UNSAFE_LOADERS = {"Loader", "UnsafeLoader", "FullLoader"}
EXEC_MODULE_ALLOWED = {
    # the user's workload file, named by `workload: {path: file.py:function}` or `autotune check
    # file.py:function` (its purpose is to run), in the driver and in each worker
    "autotune/measure/task.py",
    "autotune/codegen/build.py",  # the generated kernel module, written by codegen from the IR
}


def _calls(tree: ast.AST) -> list[ast.Call]:
    return [node for node in ast.walk(tree) if isinstance(node, ast.Call)]


def test_nothing_in_the_package_evaluates_text() -> None:
    """No eval/exec/compile/__import__, no unsafe YAML loader; exec_module only where listed."""
    dynamic, unsafe, exec_module = [], [], set()
    for file in sorted((REPO_ROOT / "autotune").rglob("*.py")):
        rel = file.relative_to(REPO_ROOT).as_posix()
        tree = ast.parse(file.read_text(encoding="utf-8"), filename=rel)
        for call in _calls(tree):
            f = call.func
            if isinstance(f, ast.Name) and f.id in DYNAMIC:
                dynamic.append(f"{rel}:{call.lineno}: {f.id}()")
            if isinstance(f, ast.Attribute) and f.attr == "exec_module":
                exec_module.add(rel)
            is_yaml = isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "yaml"
            if is_yaml and f.attr in UNSAFE_YAML:  # type: ignore[union-attr]
                unsafe.append(f"{rel}:{call.lineno}: yaml.{f.attr}()")  # type: ignore[union-attr]
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr in UNSAFE_LOADERS:
                unsafe.append(f"{rel}:{node.lineno}: {node.attr}")
    assert dynamic == []
    assert unsafe == []
    assert exec_module == EXEC_MODULE_ALLOWED


# ---------------------------------------------------------------- the fuzz tests really fuzz


def _module(relative: str) -> Any:
    """Import a test module by path, under a name no other test uses."""
    path = REPO_ROOT / relative
    spec = importlib.util.spec_from_file_location("badinput_" + path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


FUZZ_TESTS = {
    "tests/config/test_config_fuzz.py": [
        "test_random_text", "test_random_bytes", "test_random_trees", "test_mutated_good_config",
    ],
    "tests/schedule/test_schedule_trace_fuzz.py": ["test_replay_raises_only_schedule_errors"],
    "tests/test_faults_traces.py": ["test_load_trace_raises_only_schedule_errors"],
}  # fmt: skip


@pytest.mark.parametrize("relative", list(FUZZ_TESTS))
def test_fuzz_tests_run_at_least_500_examples(relative: str) -> None:
    """Each fuzz test's own ``@settings`` asks for >= 500 examples, and no profile lowers it:
    values given to ``@settings`` override the loaded profile, and none is registered here."""
    from hypothesis import settings

    module = _module(relative)
    for name in FUZZ_TESTS[relative]:
        test: Callable[..., Any] = getattr(module, name)
        own = test._hypothesis_internal_use_settings  # type: ignore[attr-defined]
        assert own.max_examples >= 500, f"{relative}::{name} runs {own.max_examples} examples"
    assert settings().max_examples == settings.get_profile("default").max_examples
