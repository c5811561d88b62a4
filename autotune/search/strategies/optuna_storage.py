"""``search.storage``: the run's trials kept as an Optuna study in a database that optuna-dashboard opens.

``storage: sqlite`` puts the database in the run's directory, ``<output>/optuna.db``; a database
URL (``sqlite:///path/optuna.db``, or another that Optuna's ``RDBStorage`` takes with its driver
installed) puts it there, to be shared by several runs. Then::

    pip install optuna-dashboard
    optuna-dashboard sqlite:///out/small/optuna.db

The study is named after the run (``name``) and holds one Optuna trial per trial of
``trials.jsonl``, added as each is logged (what each trial is told:
:func:`~autotune.search.strategies.optuna_study.stored_trial`). It is a copy of the log, not the
sampler's own study: that one also holds a trial for every proposal the cost model ranked out
(with ``batch: 64`` and ``measure_per_round: 8``, 56 ``FAIL`` trials a round) and a penalty
latency for every failure, and it stays in memory, so asking and telling cost no database writes.
Storing a trial in SQLite took about 6 ms here (the 500 trials of a resumed log, 3 s).

The log is the source of truth: at every start of the run, fresh or ``--resume``, the stored study
is deleted and made again from the log, so it holds exactly the logged trials, also after a run
killed between logging a trial and storing it. That is why ``search.storage`` may change on
``--resume`` (it is not part of the config's fingerprint). In a database of its own
(``storage: sqlite``) the run's study is always replaced; in a database given by URL, a study of
the run's name is replaced only if it was written for the same output directory (its user attr
:data:`OUTPUT_ATTR`), and otherwise the run is refused before it starts.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ...config import RunConfig
from ...errors import AutotuneError, ConfigError

if TYPE_CHECKING:
    import optuna

__all__ = ["DB_NAME", "OUTPUT_ATTR", "StoredStudy", "StudyStorage", "check_storage"]

DB_NAME = "optuna.db"
"""The database file of ``storage: sqlite`` in the run's output directory."""
OUTPUT_ATTR = "autotune_output"
"""The study's user attr that names the output directory of the run it copies."""


@dataclass(frozen=True)
class StudyStorage:
    """Where a run's study goes: the database ``url``, the ``study`` name (the run's name), the
    run's ``output`` directory, and whether the database is the run's own file (``own``)."""

    url: str
    study: str
    output: str
    own: bool = False

    @classmethod
    def of(cls, cfg: RunConfig) -> StudyStorage | None:
        """The storage ``cfg.search.storage`` names (None when it names none)."""
        storage = cfg.search.storage
        if storage is None:
            return None
        if storage == "sqlite":
            return cls(f"sqlite:///{Path(cfg.output) / DB_NAME}", cfg.name, str(cfg.output), own=True)
        return cls(storage, cfg.name, str(cfg.output))

    @property
    def shown(self) -> str:
        """The URL with its password, if any, masked."""
        from sqlalchemy.engine import make_url
        from sqlalchemy.exc import ArgumentError

        try:
            return make_url(self.url).render_as_string(hide_password=True)
        except ArgumentError:
            return self.url


def _database(storage: StudyStorage) -> optuna.storages.RDBStorage:
    """The database of ``storage``; ConfigError naming ``search.storage`` when it cannot be opened."""
    import optuna
    from sqlalchemy.exc import SQLAlchemyError

    try:
        return optuna.storages.RDBStorage(storage.url)
    except (ImportError, ValueError, RuntimeError, SQLAlchemyError) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ConfigError(f"search.storage: cannot open {storage.shown}: {reason}") from None


def _claim(database: optuna.storages.RDBStorage, storage: StudyStorage) -> None:
    """ConfigError when the database holds a study of the run's name written for another output
    directory, or not by autotune (the run's own database is never refused)."""
    if storage.own:
        return
    try:
        study_id = database.get_study_id_from_name(storage.study)
    except KeyError:
        return
    owner = database.get_study_user_attrs(study_id).get(OUTPUT_ATTR)
    if owner != storage.output:
        whose = f"the run in {owner}" if owner else "a study that autotune did not write"
        raise ConfigError(
            f"search.storage: {storage.shown} already holds a study named {storage.study!r}, of {whose}; "
            "give this run another name or another storage"
        )


def check_storage(storage: StudyStorage) -> None:
    """Open the database and make sure the run may replace its study there (ConfigError if not).
    The run's own database (``storage: sqlite``) is not opened: it is made in the output directory."""
    if not storage.own:
        _claim(_database(storage), storage)


class StoredStudy:
    """The study of one run, made anew (empty) in its database; :meth:`add` stores a trial."""

    def __init__(
        self,
        storage: StudyStorage,
        directions: Sequence[optuna.study.StudyDirection],
        metric_names: Sequence[str],
    ) -> None:
        import optuna

        self.storage = storage
        database = _database(storage)
        _claim(database, storage)
        with contextlib.suppress(KeyError):  # no study of that name yet
            optuna.delete_study(study_name=storage.study, storage=database)
        self.study = optuna.create_study(
            storage=database,
            study_name=storage.study,
            directions=list(directions),
            sampler=optuna.samplers.RandomSampler(seed=0),  # never asked: the study is a copy
        )
        with warnings.catch_warnings():  # experimental since Optuna 3.2, what the dashboard labels axes with
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            self.study.set_metric_names(list(metric_names))
        self.study.set_user_attr(OUTPUT_ATTR, storage.output)

    def add(self, trials: Sequence[optuna.trial.FrozenTrial]) -> None:
        """Store finished trials; AutotuneError naming the database when it cannot be written."""
        from sqlalchemy.exc import SQLAlchemyError

        try:
            self.study.add_trials(trials)
        except SQLAlchemyError as exc:
            reason = str(exc).splitlines()[0]
            raise AutotuneError(
                f"search.storage: cannot write to {self.storage.shown}: {reason} (trials.jsonl holds every "
                "trial; --resume rebuilds the study from it)"
            ) from None
