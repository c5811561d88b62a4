"""search.storage: the run's trials as an Optuna study in a database (what optuna-dashboard opens).

A small tuning run writes the study; ``optuna.load_study`` gives back the log's trials (the ok ones
COMPLETE with their medians); ``--resume`` makes the study again from the log; a shared database
keeps another run's study; bad values and strategies without a study are refused naming the field.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import optuna
import pytest
from search_runs import POOLS, InProcess, write_run_config

from autotune.config import load_config
from autotune.errors import ConfigError
from autotune.search.log import TrialLog
from autotune.search.records import TrialRecord, config_fields, fingerprint
from autotune.search.space import Knob, SearchSpace
from autotune.search.strategies import make_strategy
from autotune.search.strategies.optuna_storage import OUTPUT_ATTR, StudyStorage, check_storage
from autotune.search.strategies.optuna_study import stored_trial
from autotune.search.tuner import tune

WORKLOAD = {"name": "pool_chain", "args": {"height": 20, "width": 20, "channels": 8}}
STATES = {
    "ok": "COMPLETE", "cutoff": "PRUNED", "infeasible": "PRUNED", "invalid": "FAIL", "wrong": "FAIL",
    "timeout": "FAIL", "crashed": "FAIL", "error": "FAIL",
}  # fmt: skip


def write_config(tmp_path: Path, name: str = "run", **search: Any) -> Path:
    memory = {"pools": POOLS, "peak_limit": "12KiB"}
    knobs = {"trials": 6, "cost_model": "none", "seed": 3, "batch": 3, "measure_per_round": 3, **search}
    return write_run_config(tmp_path, name, WORKLOAD, memory=memory, **knobs)


def stored(out: Path, name: str = "run") -> optuna.Study:
    return optuna.load_study(study_name=name, storage=f"sqlite:///{out / 'optuna.db'}")


def assert_holds_the_log(study: optuna.Study, log: list[TrialRecord]) -> None:
    """One stored trial per logged one, in order, in the state of its status, with its figures."""
    assert [t.user_attrs["trial"] for t in study.trials] == [r.trial for r in log]
    assert [t.state.name for t in study.trials] == [STATES[r.status] for r in log]
    assert [t.user_attrs["status"] for t in study.trials] == [r.status for r in log]
    assert [t.user_attrs.get("peak_bytes") for t in study.trials] == [r.peak_bytes for r in log]
    complete = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
    assert [t.value for t in complete] == [r.median_ms for r in log if r.ok]
    for t, r in zip(study.trials, log):
        assert t.params.items() <= dict(r.knobs).items()  # the knobs it sampled


# ---------------------------------------------------------------- runs


@pytest.mark.slow
def test_a_run_keeps_its_trials_in_the_stored_study(tmp_path: Path) -> None:
    cfg = load_config(write_config(tmp_path, storage="sqlite"))
    assert cfg.search.storage == "sqlite"
    tune(cfg, progress=False, executor="local")
    log = TrialLog.load(cfg.output / "trials.jsonl")
    study = stored(cfg.output)
    assert sum(r.ok for r in log) >= 1
    assert_holds_the_log(study, log)
    assert study.user_attrs == {OUTPUT_ATTR: str(cfg.output)}
    assert study.metric_names == ["median_ms"] and len(study.directions) == 1


@pytest.mark.slow
def test_resume_makes_the_study_again_from_the_log(tmp_path: Path) -> None:
    cfg = load_config(write_config(tmp_path, storage="sqlite"))
    tune(cfg, progress=False, executor=InProcess())
    log_path = cfg.output / "trials.jsonl"
    lines = log_path.read_bytes().splitlines(keepends=True)
    log_path.write_bytes(b"".join(lines[:3]))  # killed after 3 trials: the study holds more
    (cfg.output / "best.json").unlink()
    assert len(stored(cfg.output).trials) == len(lines) > 3
    tune(cfg, resume=True, progress=False, executor=InProcess())
    after = TrialLog.load(log_path)
    assert len([r for r in after if r.status != "infeasible"]) == 6
    assert_holds_the_log(stored(cfg.output), after)


@pytest.mark.slow
def test_a_storage_may_be_added_or_removed_on_resume(tmp_path: Path) -> None:
    plain = load_config(write_config(tmp_path, trials=3))
    assert fingerprint(config_fields(plain)) == fingerprint(
        config_fields(load_config(write_config(tmp_path, trials=3, storage="sqlite")))
    )
    tune(plain, progress=False, executor=InProcess())
    assert not (plain.output / "optuna.db").exists()
    more = load_config(write_config(tmp_path, trials=5, storage="sqlite"))
    tune(more, resume=True, progress=False, executor=InProcess())
    assert_holds_the_log(stored(more.output), TrialLog.load(more.output / "trials.jsonl"))
    again = load_config(write_config(tmp_path, trials=6))
    tune(again, resume=True, progress=False, executor=InProcess())  # without a storage: left as it was
    assert len(stored(more.output).trials) < len(TrialLog.load(more.output / "trials.jsonl"))


def test_a_shared_database_keeps_another_runs_study(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'shared.db'}"
    optuna.create_study(study_name="run", storage=url).set_user_attr(OUTPUT_ATTR, "/elsewhere/run")
    cfg = load_config(write_config(tmp_path, storage="sqlite:///shared.db"))
    assert cfg.search.storage == url
    with pytest.raises(ConfigError) as err:
        tune(cfg, progress=False, executor=InProcess())
    assert str(err.value) == (
        f"search.storage: {url} already holds a study named 'run', of the run in /elsewhere/run; "
        "give this run another name or another storage"
    )
    assert not cfg.output.exists()  # refused before the output directory was made
    optuna.create_study(study_name="mine", storage=url)
    with pytest.raises(ConfigError, match="named 'mine', of a study that autotune did not write;"):
        check_storage(StudyStorage(url, "mine", str(cfg.output)))
    check_storage(StudyStorage(url, "other", str(cfg.output)))  # no study of that name: nothing to refuse


def test_a_database_that_cannot_be_opened_is_named_without_its_password(tmp_path: Path) -> None:
    missing = f"sqlite:///{tmp_path / 'no' / 'such' / 'optuna.db'}"
    with pytest.raises(ConfigError) as err:
        check_storage(StudyStorage(missing, "run", str(tmp_path)))
    assert str(err.value) == (
        f"search.storage: cannot open {missing}: (sqlite3.OperationalError) unable to open database file"
    )
    with pytest.raises(ConfigError) as err:
        check_storage(StudyStorage("postgresql+nodriver://me:secret@localhost/db", "run", str(tmp_path)))
    assert str(err.value).startswith(
        "search.storage: cannot open postgresql+nodriver://me:***@localhost/db: "
    )
    assert "secret" not in str(err.value)


# ---------------------------------------------------------------- the config field


def storage_error(tmp_path: Path, value: Any, **search: Any) -> tuple[str, str]:
    """The message that loading a config with ``search.storage: value`` raises, and the expected
    prefix: the file, the line of the field, and the field."""
    path = write_config(tmp_path, storage=value, **search)
    line = next(i for i, text in enumerate(path.read_text().splitlines(), 1) if "storage:" in text)
    with pytest.raises(ConfigError) as err:
        load_config(path)
    return str(err.value), f"{path}:{line}: search.storage: "


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (
            "optuna.db",
            "expected 'sqlite' (output/optuna.db) or a database URL such as 'sqlite:///path/optuna.db', "
            "got 'optuna.db'",
        ),
        ("sqlite://", "expected a database file: 'sqlite:///path/to/optuna.db', got 'sqlite://'"),
        ("sqlite:///:memory:", "expected a database file: 'sqlite:///path/to/optuna.db', got 'sqlite:///:memory:'"),
        ("Postgres://host/db", "expected 'sqlite' (output/optuna.db) or a database URL such as "
                               "'sqlite:///path/optuna.db', got 'Postgres://host/db'"),
        (7, "expected a non-empty string, got 7"),
    ],
)  # fmt: skip
def test_a_bad_storage_is_refused_naming_the_file_and_field(tmp_path: Path, value: Any, message: str) -> None:
    text, where = storage_error(tmp_path, value)
    assert text == where + message


def test_a_database_file_in_a_missing_directory_is_refused(tmp_path: Path) -> None:
    text, where = storage_error(tmp_path, "sqlite:///nowhere/optuna.db")
    assert (
        text
        == f"{where}no directory {str(tmp_path / 'nowhere')!r} for the database file, got 'sqlite:///nowhere/optuna.db'"
    )


@pytest.mark.parametrize("strategy", ["evolutionary", "random"])
def test_a_storage_needs_the_optuna_strategy(tmp_path: Path, strategy: str) -> None:
    text, where = storage_error(tmp_path, "sqlite", strategy=strategy)
    assert text == f"{where}search.strategy {strategy!r} keeps no Optuna study; a storage needs 'optuna'"
    settings = load_config(write_config(tmp_path, strategy=strategy)).search
    space = SearchSpace("small", (Knob("tile", (1, 2)),), ())
    with pytest.raises(ConfigError) as err:
        make_strategy(settings, space, StudyStorage("sqlite:///x.db", "run", "out"))
    assert str(err.value) == (
        f"search.storage: search.strategy {strategy!r} keeps no Optuna study; a storage needs 'optuna'"
    )


def test_relative_database_paths_are_made_absolute_against_the_config_file(tmp_path: Path) -> None:
    (tmp_path / "db").mkdir()
    cfg = load_config(write_config(tmp_path, storage="sqlite:///db/optuna.db"))
    assert cfg.search.storage == f"sqlite:///{tmp_path / 'db' / 'optuna.db'}"
    assert StudyStorage.of(cfg) == StudyStorage(cfg.search.storage, "run", str(cfg.output))
    own = load_config(write_config(tmp_path, storage="sqlite"))
    assert StudyStorage.of(own) == StudyStorage(
        f"sqlite:///{own.output / 'optuna.db'}", "run", str(own.output), own=True
    )
    assert load_config(write_config(tmp_path)).search.storage is None


# ---------------------------------------------------------------- what a stored trial is told


def test_each_status_is_stored_in_its_optuna_state() -> None:
    knobs = (("tile", 4),)
    dist = {"tile": optuna.distributions.CategoricalDistribution((2, 4))}
    ok = TrialRecord(0, 0, knobs, "ok", median_ms=1.5, min_ms=1.0, iqr_ms=0.0, peak_bytes=0, retimed=True)
    cutoff = TrialRecord(1, 0, knobs, "cutoff", reason="slow", median_ms=9.0, min_ms=9.0, iqr_ms=0.0)
    infeasible = TrialRecord(
        2, 1, knobs, "infeasible", reason="over", peak_bytes=99, pool_bytes=(("sram", 99),)
    )
    crashed = TrialRecord(3, 1, knobs, "crashed", reason="SIGSEGV")
    t = stored_trial(ok, 1, {"tile": 4}, dist)
    assert (t.state.name, t.values, t.params) == ("COMPLETE", [1.5], {"tile": 4})
    assert t.user_attrs == {
        "trial": 0, "round": 0, "status": "ok", "median_ms": 1.5, "min_ms": 1.0, "iqr_ms": 0.0, "retimed": True,
        "peak_bytes": 0,
    }  # fmt: skip
    assert stored_trial(ok, 2, {}, {}).values == [1.5, 0.0]  # nsga2: latency and peak
    t = stored_trial(cutoff, 1, {}, {})
    assert (t.state.name, t.values, t.intermediate_values, t.user_attrs["reason"]) == (
        "PRUNED",
        None,
        {0: 9.0},
        "slow",
    )
    t = stored_trial(infeasible, 1, {}, {})
    assert (t.state.name, t.intermediate_values, t.user_attrs["pool_bytes"]) == ("PRUNED", {}, {"sram": 99})
    t = stored_trial(crashed, 1, {}, {})
    assert (t.state.name, t.values, t.user_attrs) == (
        "FAIL", None, {"trial": 3, "round": 1, "status": "crashed", "reason": "SIGSEGV"},
    )  # fmt: skip
