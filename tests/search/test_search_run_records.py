"""Run records: run.jsonl and best.json's ``run`` (machine, versions, times, config fingerprint);
``--resume`` refuses a changed config and does nothing on a finished run."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from search_runs import InProcess, write_run_config

from autotune import cli
from autotune.config import load_config
from autotune.errors import AutotuneError
from autotune.search import tuner as tuner_module
from autotune.search.log import RUN_LOG_NAME, TrialLog, config_changes, load_sessions
from autotune.search.records import (
    RUN_PACKAGES,
    UNFINGERPRINTED,
    changed_fields,
    config_fields,
    fingerprint,
    machine,
    versions,
)
from autotune.search.tuner import tune

WORKLOAD = {"name": "pool_chain", "args": {"height": 12, "width": 12, "channels": 4}}
SEARCH = {"trials": 4, "cost_model": "none", "seed": 1, "batch": 2, "measure_per_round": 2}


def write(tmp_path: Path, **change: Any) -> Path:
    memory = change.pop("memory", None)
    return write_run_config(
        tmp_path, "rec", WORKLOAD, memory=memory, output=tmp_path / "out", **{**SEARCH, **change}
    )


def snapshot(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


@pytest.fixture
def in_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tuner_module, "make_executor", lambda *args, **kwargs: InProcess())


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main([*argv, "--no-progress"])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def finished(tmp_path: Path, capsys: pytest.CaptureFixture[str], in_process: None) -> Path:
    """A finished 4-trial run in ``tmp_path/out``; returns its config."""
    config = write(tmp_path)
    code, _, err = run(capsys, "run", str(config))
    assert code == 0, err
    return config


# ---------------------------------------------------------------- what is recorded


def test_machine_and_versions() -> None:
    host = machine()
    assert host["cpu"] and host["llvm_cpu"] and host["cores"] >= host["usable_cores"] >= 1
    assert isinstance(host["isa"], list) and set(host["isa"]) <= {
        "sse4.2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl",
        "avx512vnni", "avx512bf16", "avx512fp16", "amx-tile", "neon", "sve", "sve2",
    }  # fmt: skip
    found = versions()
    assert list(found) == list(RUN_PACKAGES)
    assert found["numpy"] == np.__version__ and found["autotune"] and found["xgboost"]


@pytest.mark.slow
def test_a_run_records_its_sessions_and_best_json_its_run(finished: Path) -> None:
    out = finished.parent / "out"
    start, end = load_sessions(out)
    session = start["session"]
    assert session["logged_before"] == 0 and session["trials"] == 4
    assert session["machine"] == machine() and session["versions"] == versions()
    cfg = load_config(finished)
    assert session["config"] == config_fields(cfg) and session["fingerprint"] == fingerprint(
        config_fields(cfg)
    )
    assert end["session_end"]["logged"] == 4 and end["session_end"]["ended"] >= session["started"]
    record = json.loads((out / "best.json").read_text())["run"]
    assert record["started"] == session["started"] and record["ended"] >= record["started"]
    assert record["sessions"] == 1 and record["fingerprint"] == session["fingerprint"]
    assert record["machine"] == machine() and record["versions"] == versions()
    assert (out / "trials.jsonl").read_text().count("\n") == 4  # the trial log holds trials only
    report = (out / "report.md").read_text()
    assert "## Run" in report and f"Config fingerprint: `{session['fingerprint']}`" in report
    assert f"Machine: {session['machine']['cpu']} (LLVM `{session['machine']['llvm_cpu']}`" in report
    assert f"numpy {np.__version__}" in report


# ---------------------------------------------------------------- resume


@pytest.mark.slow
def test_resume_with_a_changed_config_is_refused_naming_the_fields(
    finished: Path, capsys: pytest.CaptureFixture[str], no_executor: None
) -> None:
    out = finished.parent / "out"
    before = snapshot(out)
    changed = write(finished.parent, sampler="random", memory={"pools": [{"name": "sram", "size": "2MiB"}]})
    code, printed, err = run(capsys, "run", str(changed), "--resume")
    assert (code, printed) == (2, "")
    assert err == (
        f"autotune: error: {changed}: --resume: the config differs from the one the run in {out} was "
        'started with, in 2 fields: memory.pools: [{"name": "dtcm", "read_cost": 1.0, "size": 8192, '
        '"write_cost": 1.0}, {"name": "sram", "read_cost": 1.0, "size": 2097152, "write_cost": 1.0}] -> '
        '[{"name": "sram", "read_cost": 1.0, "size": 2097152, "write_cost": 1.0}]; search.sampler: "tpe" -> '
        '"random". Restore them to continue that run, or start a new run with another --output\n'
    )
    assert snapshot(out) == before


@pytest.mark.slow
def test_resuming_a_finished_run_does_nothing_and_says_so(
    finished: Path, capsys: pytest.CaptureFixture[str], no_executor: None
) -> None:
    out = finished.parent / "out"
    before = snapshot(out)
    code, printed, err = run(capsys, "run", str(finished), "--resume", "--workers", "1")
    assert (code, err) == (0, "")
    ended = load_sessions(out)[-1]["session_end"]["ended"]
    assert printed.splitlines()[0] == (
        f"the run in {out} finished at {ended} with 4 trials; nothing to resume (a --trials above 4 continues it)"
    )
    assert printed.splitlines()[1].startswith("trials: 4 (")
    assert snapshot(out) == before
    with pytest.raises(AutotuneError, match="nothing to resume"):
        tune(load_config(finished), resume=True, progress=False, executor=InProcess())
    assert snapshot(out) == before


@pytest.mark.slow
def test_resume_with_a_larger_budget_continues_in_a_new_session(
    finished: Path, capsys: pytest.CaptureFixture[str], in_process: None
) -> None:
    out = finished.parent / "out"
    code, _, err = run(capsys, "run", str(finished), "--resume", "--trials", "6")
    assert code == 0, err
    lines = load_sessions(out)
    assert [next(iter(line)) for line in lines] == ["session", "session_end", "session", "session_end"]
    assert lines[2]["session"]["logged_before"] == 4 and lines[2]["session"]["trials"] == 6
    logged = TrialLog.load(out / "trials.jsonl")
    assert sum(r.status != "infeasible" for r in logged) == 6  # infeasible trials use no budget
    assert lines[3]["session_end"]["logged"] == len(logged)
    record = json.loads((out / "best.json").read_text())["run"]
    assert record["sessions"] == 2 and record["started"] == lines[0]["session"]["started"]


@pytest.fixture
def no_executor(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the run started its workers")

    monkeypatch.setattr(tuner_module, "make_executor", refuse)


# ---------------------------------------------------------------- fields and fingerprints


def test_config_fields_leave_out_what_a_resume_may_change(tmp_path: Path) -> None:
    cfg = load_config(write(tmp_path))
    fields = config_fields(cfg)
    assert not set(UNFINGERPRINTED) & set(fields)
    assert fields["search.sampler"] == "tpe" and fields["workload.args.height"] == 12
    assert len(fields["search.space_sha256"]) == 64
    more = load_config(write(tmp_path, trials=40), {"workers": 1, "output": str(tmp_path / "elsewhere")})
    assert fingerprint(config_fields(more)) == fingerprint(fields)
    timed = load_config(write(tmp_path, time_budget="10m"))  # a resumed run may be given more time
    assert timed.search.time_budget is not None and fingerprint(config_fields(timed)) == fingerprint(fields)


def test_a_changed_workload_file_changes_the_fingerprint(tmp_path: Path) -> None:
    chain = tmp_path / "chain.py"
    chain.write_text("def make():\n    pass\n")
    config = write_run_config(tmp_path, "file", {"path": f"{chain}:make"}, **SEARCH)
    before = config_fields(load_config(config))
    chain.write_text("def make():\n    return None\n")
    after = config_fields(load_config(config))
    assert [line.split(":")[0] for line in changed_fields(before, after)] == ["workload.file_sha256"]


def test_a_run_whose_files_moved_with_the_project_is_the_same_config(tmp_path: Path) -> None:
    """``search.space`` and ``workload.path`` are paths: a run resumed in a checkout elsewhere names
    them in another directory. Same name and contents: no change; renamed or edited: a change."""
    space = (Path(__file__).parents[2] / "search_spaces" / "cascade.yaml").read_text(encoding="utf-8")
    chain = "from autotune.workloads import get\n\ndef make():\n    return get('pool_chain', height=12, width=12, channels=4)\n"

    def config(where: str, space_name: str = "cascade.yaml", space_text: str = space) -> Any:
        d = tmp_path / where
        d.mkdir()
        (d / space_name).write_text(space_text, encoding="utf-8")
        (d / "chain.py").write_text(chain, encoding="utf-8")
        workload = {"path": f"{d / 'chain.py'}:make"}
        return load_config(write_run_config(d, "rec", workload, **{**SEARCH, "space": str(d / space_name)}))

    fields = config_fields(config("before"))
    start = {"fingerprint": fingerprint(fields), "config": fields}
    moved = config("moved")
    assert fingerprint(config_fields(moved)) != start["fingerprint"]  # the paths are in the config
    assert config_changes(start, moved) == []
    renamed = config_changes(start, config("renamed", space_name="other.yaml"))
    assert [line.split(":")[0] for line in renamed] == ["search.space"]  # the workload file only moved
    assert renamed[0].endswith('renamed/other.yaml"')
    edited = config_changes(start, config("edited", space_text=space + "\n# edited\n"))
    assert [line.split(":")[0] for line in edited] == ["search.space", "search.space_sha256"]
    assert config_changes({**start, "config": {k: v for k, v in fields.items() if k != "search.space_sha256"}}, moved)


def test_a_pretrained_model_is_the_same_config_by_its_contents(tmp_path: Path) -> None:
    """``cost_model: {kind: xgboost, pretrained: PATH}`` names a file: moved with the project it is
    the same run; trained again in place it is another one; a config recorded without the
    model's hash compares its path alone."""

    def config(where: str, model: str = "model v1", name: str = "model.json") -> Any:
        d = tmp_path / where
        d.mkdir(exist_ok=True)
        (d / name).write_text(model, encoding="utf-8")
        search = {**SEARCH, "cost_model": {"kind": "xgboost", "pretrained": str(d / name)}}
        return load_config(write_run_config(d, "rec", WORKLOAD, **search))

    fields = config_fields(config("before"))
    assert fields["search.cost_model.pretrained_sha256"] == hashlib.sha256(b"model v1").hexdigest()
    start = {"fingerprint": fingerprint(fields), "config": fields}
    assert config_changes(start, config("moved")) == []
    retrained = config_changes(start, config("before", model="model v2"))
    assert [line.split(":")[0] for line in retrained] == ["search.cost_model.pretrained_sha256"]
    renamed = config_changes(start, config("renamed", name="other.json"))
    assert [line.split(":")[0] for line in renamed] == ["search.cost_model.pretrained"]
    unhashed = {k: v for k, v in fields.items() if k != "search.cost_model.pretrained_sha256"}
    old = {"fingerprint": fingerprint(unhashed), "config": unhashed}
    assert config_changes(old, config("before", model="model v3")) == []  # the path alone: not seen
    assert [line.split(":")[0] for line in config_changes(old, config("moved"))] == ["search.cost_model.pretrained"]


def test_changed_fields_names_added_and_removed_fields() -> None:
    assert changed_fields({"a": 1, "b": [1]}, {"b": [2], "c": "x"}) == [
        "a: 1 -> (none)", "b: [1] -> [2]", 'c: (none) -> "x"',
    ]  # fmt: skip


def test_a_damaged_session_log_is_named(tmp_path: Path) -> None:
    (tmp_path / RUN_LOG_NAME).write_text('{"session": {}}\n{"trial": 1}\n')
    with pytest.raises(AutotuneError, match=r"run\.jsonl:2: expected a \{\"session\": \.\.\.\}"):
        load_sessions(tmp_path)
    assert load_sessions(tmp_path / "nowhere") == []
