"""A chain of one's own: README's "Your own chain" run as written, and the errors of a bad chain file."""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from autotune import cli
from autotune.config import WorkloadConfig, load_workload
from autotune.errors import ConfigError
from autotune.measure.result import MeasureResult
from autotune.measure.task import MeasureTask, remeasure_tasks, run_task
from autotune.search import tuner as tuner_module
from autotune.search.executors import Executor

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
CHAIN_FILE = REPO / "examples" / "my_chain.py"
CHAIN_CONFIG = REPO / "examples" / "my_chain.yaml"


def section(title: str) -> str:
    text = README.read_text(encoding="utf-8")
    start = text.index(f"## {title}\n")
    end = text.index("\n## ", start + 1)
    return text[start:end]


def blocks(text: str, lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", text, re.S)


def commands(text: str) -> list[tuple[list[str], list[str]]]:
    """Each ``$ autotune ...`` line of the console blocks with the lines printed after it."""
    found: list[tuple[list[str], list[str]]] = []
    for block in blocks(text, "console"):
        for line in block.splitlines():
            if line.startswith("$ "):
                argv = shlex.split(line[2:])
                assert argv[0] == "autotune", line
                found.append((argv[1:], []))
            else:
                found[-1][1].append(line)
    return found


class InProcess(Executor):
    """Measures in the test process: no worker start-up, numba's disk cache shared."""

    name = "test-in-process"
    workers = 1

    def run(self, tasks: Sequence[MeasureTask]) -> Iterator[tuple[int, MeasureResult, str]]:
        for i, task in enumerate(tasks):
            yield i, run_task(task), "test"

    def remeasure(self, tasks: Sequence[MeasureTask], rounds: int) -> list[list[MeasureResult]]:
        return remeasure_tasks(tasks, rounds)

    def close(self) -> None:
        pass


@pytest.fixture
def in_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tuner_module, "make_executor", lambda *args, **kwargs: InProcess())


@pytest.fixture
def no_tuning(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail the test if a run gets as far as starting its workers."""

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("tuning started on a bad chain")

    monkeypatch.setattr(tuner_module, "make_executor", refuse)


def run(capsys: pytest.CaptureFixture[str], argv: Sequence[str]) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# ---------------------------------------------------------------- the README section, as written


def test_readme_shows_the_shipped_chain_file_and_config() -> None:
    text = section("Your own chain")
    assert blocks(text, "python") == [CHAIN_FILE.read_text(encoding="utf-8")]
    assert blocks(text, "yaml") == [CHAIN_CONFIG.read_text(encoding="utf-8")]


@pytest.mark.slow
def test_readme_commands_run_as_written(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path, in_process: None
) -> None:
    """Every command of the section from the repository root; ``run`` into a temporary directory with
    8 trials, measured in this process; the reference error on a copy of the file that returns float64."""
    monkeypatch.chdir(REPO)
    cmds = commands(section("Your own chain"))
    assert [argv[0] for argv, _ in cmds] == ["show", "check", "check", "run"]
    (show, _), (check, printed), (bad_check, bad_printed), (run_cmd, _) = cmds

    code, out, err = run(capsys, show)
    assert (code, err) == (0, "")
    assert out.startswith('@T.prim_func\ndef blur_max(data: T.Buffer((1, 8, 8, 4), "float32")')

    code, out, err = run(capsys, check)
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[0] == printed[0] == "blur_max(height=12, width=12, channels=4): ok"
    assert lines[2] == printed[2]  # the workspace peak
    assert re.fullmatch(r"  max abs error   \S+", lines[1]) and printed[-1].strip() == "..."

    copy = tmp_path / "examples" / "my_chain.py"
    copy.parent.mkdir()
    source = CHAIN_FILE.read_text(encoding="utf-8")
    bad = source.replace(".max(axis=(-2, -1))\n", ".max(axis=(-2, -1)).astype(np.float64)\n")
    assert bad != source
    copy.write_text(bad, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    code, out, err = run(capsys, bad_check)
    assert (code, out) == (2, "")
    assert err.splitlines() == [line.replace("…", str(tmp_path)) for line in bad_printed]

    monkeypatch.chdir(REPO)
    output = tmp_path / "run"
    code, out, err = run(capsys, [*run_cmd, "--output", str(output), "--trials", "8", "--no-progress"])
    assert code == 0, err
    assert f"results: {output}" in out
    best = json.loads((output / "best.json").read_text())
    assert best["workload"]["path"] == f"{CHAIN_FILE}:blur_max"
    assert best["figures"]["status"] == "ok"


def test_shipped_config_writes_under_out() -> None:
    assert CHAIN_CONFIG.read_text(encoding="utf-8").rstrip().endswith("output: ../out/my_chain")


# ---------------------------------------------------------------- a chain file as a workload


def test_a_chain_becomes_a_workload_named_after_its_function() -> None:
    wl = load_workload(WorkloadConfig(None, f"{CHAIN_FILE}:blur_max", (("height", 10),)))
    assert wl.name == "blur_max"
    assert wl.params == {"height": 10, "width": 36, "channels": 16}
    assert wl.description == "NHWC data, a 3x3 average pool, then a 3x3 max pool (no padding)."
    assert wl.intermediate_bytes == 8 * 34 * 4 * 16
    assert wl.flops == 8 * 34 * 16 * 10 + 6 * 32 * 16 * 9


CHAIN = '''
import numpy as np
from autotune import te
from autotune.workloads import Chain, ops


def make(side=6):
    """Two max pools."""
    data = te.placeholder((1, side, side, 2), "float32", name="data")
    out = ops.max_pool2d(ops.max_pool2d(data, 3, name="p1"), 3, name="p2")
    func = te.create_func(inputs=[data], outputs=[out], name="two_pools")

    def reference(x):
        return {body}

    return Chain(func, reference, 1, (1.0,))
'''
GOOD = "np.zeros((1, side - 4, side - 4, 2), np.float32)"
BAD_REFERENCES = {
    "a wrong shape": (
        "np.zeros((1, side, side, 2), np.float32)",
        "reference output 0 has shape (1, 6, 6, 2), expected (1, 2, 2, 2) (the shape of the chain's output 'p2')",
    ),
    "a wrong dtype": (
        "np.zeros((1, side - 4, side - 4, 2))",
        "reference output 0 has dtype float64, expected float32 (the dtype of the chain's output 'p2'; "
        "cast with .astype(np.float32))",
    ),
    "too many outputs": (
        f"({GOOD}, {GOOD})",
        "the reference returned 2 arrays, the chain has 1 output ('p2')",
    ),
    "not an array": (
        "[[0.0]]",
        "the reference must return a numpy array or a tuple of them, one per output ('p2'); it returned list",
    ),
    "an exception": (
        "x[5, 5, 5, 5, 5]",
        "the reference raised IndexError: too many indices for array: array is 4-dimensional, but 5 were indexed",
    ),
}  # fmt: skip


def write_chain(directory: Path, body: str) -> Path:
    path = directory / "chain.py"
    path.write_text(CHAIN.replace("{body}", body), encoding="utf-8")
    return path


@pytest.mark.parametrize("case", list(BAD_REFERENCES))
@pytest.mark.parametrize("command", ["show", "check"])
def test_a_bad_reference_is_refused_by_show_and_check(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str, command: str
) -> None:
    body, expected = BAD_REFERENCES[case]
    path = write_chain(tmp_path, body)
    picture = tmp_path / "plan.png"
    extra = ["--draw", str(picture)] if command == "check" else []
    code, out, err = run(capsys, [command, f"{path}:make", *extra])
    assert (code, out) == (2, "")
    assert err == f"autotune: error: workload {path}:make: {expected}\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["chain.py"]  # no picture, nothing else


@pytest.mark.parametrize("case", list(BAD_REFERENCES))
def test_a_bad_reference_stops_a_run_before_anything_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], no_tuning: None, case: str
) -> None:
    body, expected = BAD_REFERENCES[case]
    path = write_chain(tmp_path, body)
    config = tmp_path / "run.yaml"
    config.write_text(
        "workload: {path: chain.py:make}\n"
        "memory: {pools: [{name: sram, size: 1MiB}]}\n"
        "search: {space: cascade, trials: 4}\n"
        "output: out/run\n",
        encoding="utf-8",
    )
    code, out, err = run(capsys, ["run", str(config), "--no-progress"])
    assert (code, out) == (2, "")
    assert err == f"autotune: error: workload {path}:make: {expected}\n"
    assert not (tmp_path / "out").exists()


def test_a_good_chain_file_checks_ok(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_chain(tmp_path, "x[:, 2:-2, 2:-2, :] * 0")  # shape and dtype right; values wrong
    code, out, _ = run(capsys, ["show", f"{path}:make", "--param", "side=7"])
    assert code == 0 and "def two_pools(data: T.Buffer((1, 7, 7, 2)" in out


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("{dir}/none.py:make", "workload '{dir}/none.py:make': no file {dir}/none.py"),
        (
            "{dir}/chain.py:mkae",
            "workload file '{dir}/chain.py' has no function 'mkae'; did you mean 'make'?",
        ),
        ("{dir}/chain.py", "workload '{dir}/chain.py': expected a built-in name or FILE.py:FUNCTION"),
        ("{dir}/chain.py:", "workload '{dir}/chain.py:': expected a built-in name or FILE.py:FUNCTION"),
    ],
)
def test_a_bad_workload_file_argument(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], spec: str, expected: str
) -> None:
    write_chain(tmp_path, GOOD)
    code, out, err = run(capsys, ["check", spec.format(dir=tmp_path)])
    assert (code, out) == (2, "")
    assert err == f"autotune: error: {expected.format(dir=tmp_path)}\n"


def test_an_unknown_parameter_of_a_chain_function(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_chain(tmp_path, GOOD)
    code, out, err = run(capsys, ["show", f"{path}:make", "--param", "sied=7"])
    assert (code, out) == (2, "")
    assert err == (
        f"autotune: error: workload {path}:make: make(sied=7) raised TypeError: "
        "make() got an unexpected keyword argument 'sied'\n"
    )


def test_load_workload_of_a_chain_checks_its_reference(tmp_path: Path) -> None:
    path = write_chain(tmp_path, BAD_REFERENCES["a wrong shape"][0])
    with pytest.raises(ConfigError, match=r"reference output 0 has shape \(1, 6, 6, 2\)"):
        load_workload(WorkloadConfig(None, f"{path}:make", ()))
