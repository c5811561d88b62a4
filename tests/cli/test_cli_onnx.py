"""Part of an ONNX model as the workload: README's "Tune part of your model" run as written, and the
errors of a config or command line naming a model, a cut or a node the importer refuses."""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import re
import runpy
import shlex
import shutil
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from test_cli_own_chain import InProcess, blocks, run, section

from autotune.config import load_config, load_workload
from autotune.errors import ConfigError
from autotune.search import tuner as tuner_module

onnx = pytest.importorskip("onnx")
from onnx import helper, numpy_helper  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "examples" / "mobilenet_blocks.py"
CONFIG = REPO / "examples" / "onnx_blocks.yaml"
SPACE = REPO / "examples" / "onnx_blocks_space.yaml"
TITLE = "Tune part of your model"


def commands(text: str) -> list[tuple[list[str], list[str]]]:
    """Each ``$ ...`` line of the section's console blocks with the lines printed after it."""
    found: list[tuple[list[str], list[str]]] = []
    for block in blocks(text, "console"):
        for line in block.splitlines():
            if line.startswith("$ "):
                found.append((shlex.split(line[2:]), []))
            else:
                found[-1][1].append(line)
    return found


def run_script(argv: list[str]) -> str:
    """``python FILE ARGS`` in this process; what it printed."""
    out = io.StringIO()
    saved = sys.argv
    sys.argv = argv
    try:
        with contextlib.redirect_stdout(out):
            runpy.run_path(argv[0], run_name="__main__")
    finally:
        sys.argv = saved
    return out.getvalue()


def test_readme_shows_the_shipped_config() -> None:
    assert blocks(section(TITLE), "yaml") == [CONFIG.read_text(encoding="utf-8")]


@pytest.mark.slow
def test_readme_commands_run_as_written(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The section's commands in a copy of examples/ (the script writes the model there), the model
    written with ``--size 16`` (compiles cost the same at any size; 96x96 took 7 minutes here on a
    busy machine); ``run`` into a temporary directory with 1 trial, measured in this process."""
    monkeypatch.setattr(tuner_module, "make_executor", lambda *args, **kwargs: InProcess())
    (tmp_path / "examples").mkdir()
    for path in (SCRIPT, CONFIG, SPACE):
        shutil.copy(path, tmp_path / "examples" / path.name)
    monkeypatch.chdir(tmp_path)
    cmds = commands(section(TITLE))
    assert [argv[:2] for argv, _ in cmds] == [
        ["python", "examples/mobilenet_blocks.py"], ["autotune", "show"], ["autotune", "check"],
        ["autotune", "check"], ["autotune", "run"],
    ]  # fmt: skip
    (script, printed), (show, _), (check, check_printed), (bad, bad_printed), (run_cmd, _) = cmds
    assert run_script([*script[1:], "--size", "16"]).splitlines() == printed

    code, out, err = run(capsys, show[1:])
    assert (code, err) == (0, "")
    assert out.startswith('@T.prim_func\ndef mobilenet_blocks(data: T.Buffer((1, 16, 16, 3), "float32")')

    code, out, err = run(capsys, check[1:])
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[0] == check_printed[0] and check_printed[2] == "  workspace peak  552,960 B (540.0 KiB)"
    assert lines[2] == "  workspace peak  15,360 B (15.0 KiB)"  # 96x96 has 36 times the pixels
    assert re.fullmatch(r"  max abs error   \S+", lines[1]) and check_printed[-1].strip() == "..."

    assert run(capsys, bad[1:]) == (2, "", "\n".join(bad_printed) + "\n")

    output = tmp_path / "run"
    code, out, err = run(capsys, [*run_cmd[1:], "--output", str(output), "--trials", "1", "--no-progress"])
    assert code == 0, err
    best = json.loads((output / "best.json").read_text())
    assert best["workload"]["path"] == f"{REPO}/autotune/workloads/onnx_model.py:onnx_workload"
    args = best["workload"]["args"]
    model = tmp_path / "examples" / "mobilenet_blocks.onnx"
    assert {k: v for k, v in args.items() if k != "sha256"} == {
        "onnx": str(model), "from": "input", "to": "block3/add", "batch": 1, "layout": "nhwc",
    }  # fmt: skip
    assert best["figures"]["status"] == "ok"


# ---------------------------------------------------------------- a config naming a model


def tiny_model(path: Path, last_op: str = "Relu") -> Path:
    """x[N,2,5,5] -> conv 1x1 -> relu -> a -> ``last_op`` -> y; weights seeded."""
    w = np.random.default_rng(0).uniform(-1, 1, (3, 2, 1, 1)).astype(np.float32)
    graph = helper.make_graph(
        [
            helper.make_node("Conv", ["x", "w"], ["c"], name="conv", kernel_shape=[1, 1]),
            helper.make_node("Relu", ["c"], ["a"], name="relu"),
            helper.make_node(last_op, ["a"], ["y"], name="last"),
        ],
        "tiny",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["N", 2, 5, 5])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)],
        [numpy_helper.from_array(w, "w")],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


def write_config(directory: Path, workload: str) -> Path:
    path = directory / "run.yaml"
    path.write_text(
        f"workload: {workload}\n"
        "memory: {pools: [{name: sram, size: 1MiB}]}\n"
        "search: {space: cascade, trials: 4}\n"
        "output: out/run\n",
        encoding="utf-8",
    )
    return path


def test_a_config_names_the_cut_and_the_run_records_it(tmp_path: Path) -> None:
    model = tiny_model(tmp_path / "m.onnx", "Sigmoid")
    cfg = load_config(write_config(tmp_path, "{onnx: m.onnx, from: c, to: y, batch: 2}"))
    assert cfg.workload.path == f"{REPO}/autotune/workloads/onnx_model.py:onnx_workload"
    args = dict(cfg.workload.args)
    digest = hashlib.sha256(model.read_bytes()).hexdigest()
    assert args == {
        "onnx": str(model),
        "from": "c",
        "to": "y",
        "batch": 2,
        "layout": "nhwc",
        "sha256": digest,
    }
    wl = load_workload(cfg.workload)
    assert wl.func.inputs[0].const_shape() == (2, 5, 5, 3)
    whole = load_config(write_config(tmp_path, "{onnx: m.onnx}")).workload.args
    assert whole == (("onnx", str(model)), ("layout", "nhwc"), ("sha256", digest))


CONFIG_ERRORS = {
    "an unsupported node": (
        "{onnx: m.onnx, to: y}",
        "LeakyRelu",
        "1: workload.onnx: node 'last' has op type LeakyRelu, which is not supported; supported: Add, ",
    ),
    "a cut that is not one chain": (
        "{onnx: m.onnx, from: c, to: c}",
        "Relu",
        "1: workload.to: nothing is computed from 'c' to 'c'",
    ),
    "an unknown tensor": (
        "{onnx: m.onnx, from: conv2}",
        "Relu",
        "1: workload.from: no tensor or node named 'conv2' in the model",
    ),
    "a missing model": (
        "{onnx: nope.onnx}",
        "Relu",
        "1: workload.onnx: model file '{dir}/nope.onnx' does not exist",
    ),
    "a model with a name": (
        "{onnx: m.onnx, name: pool_chain}",
        "Relu",
        "1: workload: expected 'onnx' (a model file) without 'name' or 'path'",
    ),
    "a cut without a model": (
        "{name: pool_chain, from: x}",
        "Relu",
        "1: workload.from: only a workload with 'onnx'",
    ),
    "a bad batch": ("{onnx: m.onnx, batch: 0}", "Relu", "1: workload.batch: expected an integer >= 1, got 0"),
}


@pytest.mark.parametrize("case", list(CONFIG_ERRORS))
def test_a_config_error_names_the_file_and_field_and_nothing_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    workload, last_op, expected = CONFIG_ERRORS[case]
    tiny_model(tmp_path / "m.onnx", last_op)
    config = write_config(tmp_path, workload)

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("tuning started")

    monkeypatch.setattr(tuner_module, "make_executor", refuse)
    code, out, err = run(capsys, ["run", str(config), "--no-progress"])
    assert (code, out) == (2, "")
    assert err.startswith(f"autotune: error: {config}:" + expected.replace("{dir}", str(tmp_path)))
    assert not (tmp_path / "out").exists()


def test_check_and_show_refuse_a_bad_cut_or_parameter(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = tiny_model(tmp_path / "m.onnx")
    where = f"autotune: error: workload {model}"
    assert run(capsys, ["show", str(model), "--from", "q"]) == (
        2, "", f"{where}: --from: no tensor or node named 'q' in the model\n",
    )  # fmt: skip
    assert run(capsys, ["check", str(model), "--param", "height=3"]) == (
        2, "", f"{where}: --param height: an ONNX model takes only batch\n",
    )  # fmt: skip
    assert run(capsys, ["show", "pool_chain", "--to", "y"]) == (
        2, "", "autotune: error: workload 'pool_chain': --from and --to cut an ONNX model (MODEL.onnx)\n",
    )  # fmt: skip
    code, out, _ = run(capsys, ["show", str(model), "--from", "a", "--param", "batch=3"])
    assert code == 0 and 'def m(data: T.Buffer((3, 5, 5, 3), "float32")' in out


def test_a_worker_refuses_a_model_that_changed(tmp_path: Path) -> None:
    tiny_model(tmp_path / "m.onnx")
    cfg = load_config(write_config(tmp_path, "{onnx: m.onnx}"))
    tiny_model(tmp_path / "m.onnx", "Sigmoid")
    with pytest.raises(ConfigError, match=r"m.onnx has changed since its sha256 [0-9a-f]{64} was recorded"):
        load_workload(cfg.workload)
