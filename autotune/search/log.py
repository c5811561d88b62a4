"""The durable trial log: ``trials.jsonl``, one :class:`TrialRecord` per line, fsync'd on every append.

A run appends each trial as soon as it is known, so a run that is killed
loses at most the trial being written. That one may leave a *torn* last line
(no newline, not valid JSON): reading drops it, and opening the log for
appending truncates the file back to its last complete line. Any other bad
line is an error naming ``file:line``, since it means the file was damaged or
edited, not interrupted.

>>> log = TrialLog("results/run/trials.jsonl")   # creates it, or recovers and reopens it
>>> log.append(record)                             # on disk when this returns
>>> TrialLog.load("results/run/trials.jsonl")      # [TrialRecord, ...]

Beside it, ``run.jsonl`` records the sessions of the run: :func:`start_session`
writes a line when a run starts or resumes (the time, the machine, the package
versions and the config with its fingerprint), after checking that a resumed
run's config is unchanged (:func:`config_changes`: a file the config names may have moved, with the
project, as long as its name and contents are the same); :func:`end_session` writes one when it
finishes.

The run's other files (``best.json``, ``report.md``, ...) are replaced whole
by :func:`autotune.files.write_atomic`: a crash or a full disk leaves the old
file or the new one, never part of one.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from ..config import RunConfig
from ..errors import AutotuneError, ConfigError
from ..files import _fsync_dir, _write_all, write_atomic
from .records import TrialRecord, changed_fields, config_fields, fingerprint, session_end, session_start

__all__ = [
    "LOG_NAME", "MOVABLE_FILES", "RUN_LOG_NAME", "TrialLog", "check_resume", "check_writable", "config_changes",
    "describe_os_error",
    "end_session", "finished_message", "load", "load_sessions", "log_path_for", "start_session", "writing_results",
]  # fmt: skip

LOG_NAME = "trials.jsonl"
"""The trial log's name in a run's output directory."""
RUN_LOG_NAME = "run.jsonl"
"""The session log's name in a run's output directory: ``{"session": ...}`` and ``{"session_end": ...}`` lines."""
PROBE_BYTES = 64 * 1024
"""Size of the file :func:`check_writable` writes to prove the output directory takes data."""
MOVABLE_FILES = {
    "search.cost_model.pretrained": "search.cost_model.pretrained_sha256",
    "search.space": "search.space_sha256",
    "search.warm_start": "search.warm_start_sha256",
    "workload.path": "workload.file_sha256",
}
"""Config fields that name a file (a path, resolved against the config's directory), each with the
field holding the hash of the file's contents. A resumed run's file may be in another directory
(the project was moved or cloned elsewhere): with the same name and contents it is the same file;
edited in place (a model file trained again), the run is another one."""


@dataclass(frozen=True)
class _Contents:
    """What a log file holds: its records, the bytes they span, and a torn tail if any."""

    records: tuple[TrialRecord, ...]
    good_bytes: int
    torn: bytes
    needs_newline: bool


def _parse_line(path: Path, lineno: int, raw: bytes) -> TrialRecord:
    where = f"{path}:{lineno}"
    try:
        data = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise AutotuneError(f"{where}: not UTF-8 text ({exc.reason})") from None
    except json.JSONDecodeError as exc:
        raise AutotuneError(f"{where}: not a JSON record ({exc.msg} at column {exc.colno})") from None
    try:
        return TrialRecord.from_json(data)
    except (ValueError, TypeError) as exc:
        raise AutotuneError(f"{where}: not a valid trial record: {exc}") from None


def _read(path: Path) -> _Contents:
    data = path.read_bytes()
    records: list[TrialRecord] = []
    lines = data.split(b"\n")
    tail = lines.pop()  # the bytes after the last newline: b"" for a complete file
    for lineno, raw in enumerate(lines, start=1):
        if raw.strip():
            records.append(_parse_line(path, lineno, raw))
    good = len(data) - len(tail)
    if not tail.strip():
        return _Contents(tuple(records), len(data), b"", False)
    try:  # a last line without its newline: kept if it is a whole record, else it was torn
        records.append(_parse_line(path, len(lines) + 1, tail))
    except AutotuneError:
        return _Contents(tuple(records), good, tail, False)
    return _Contents(tuple(records), len(data), b"", True)


def load(path: str | os.PathLike[str]) -> list[TrialRecord]:
    """The records of the log at ``path``, dropping a torn last line; AutotuneError names a bad line."""
    path = Path(path)
    try:
        return list(_read(path).records)
    except FileNotFoundError:
        raise AutotuneError(f"no trial log at {path}") from None


class TrialLog:
    """An append-only ``trials.jsonl``; opening recovers a torn last line.

    ``records`` holds what was in the file when opened followed by what was
    appended since; ``dropped`` is the torn line removed on opening (b"" if none).
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.dropped = b""
        existed = self.path.exists()
        contents = _read(self.path) if existed else _Contents((), 0, b"", False)
        self._records = list(contents.records)
        if contents.torn:
            os.truncate(self.path, contents.good_bytes)
            self.dropped = contents.torn
        try:  # unbuffered: a failed write leaves nothing behind to be flushed again by close()
            self._file = open(self.path, "ab", buffering=0)  # noqa: SIM115 (held open; closed by close())
        except OSError as exc:
            raise AutotuneError(f"cannot open the trial log {self.path} for appending: {exc}") from exc
        if contents.needs_newline:
            self._write(b"\n")
        if not existed:
            _fsync_dir(self.path.parent)

    @staticmethod
    def load(path: str | os.PathLike[str]) -> list[TrialRecord]:
        """The records of the log at ``path`` (see :func:`load`); the file is not modified."""
        return load(path)

    @property
    def records(self) -> tuple[TrialRecord, ...]:
        return tuple(self._records)

    def _write(self, data: bytes) -> None:
        """Append ``data`` and fsync; on failure cut the file back, so no partial line is left."""
        fd = self._file.fileno()
        start: int | None = None
        try:
            start = os.fstat(fd).st_size
            view = memoryview(data)
            while view:
                view = view[self._file.write(view) or 0 :]
            os.fsync(fd)
        except OSError as exc:
            if start is not None:  # the line is not logged: remove whatever part of it was written
                with contextlib.suppress(OSError):
                    os.ftruncate(fd, start)
            raise AutotuneError(
                f"cannot write to the trial log {self.path}: {describe_os_error(exc)}"
            ) from exc

    def append(self, record: TrialRecord) -> None:
        """Write ``record`` as one JSON line; it is on disk (flushed and fsync'd) when this returns."""
        if self._file.closed:
            raise AutotuneError(f"trial log {self.path} is closed")
        line = json.dumps(record.to_json(), ensure_ascii=False) + "\n"
        self._write(line.encode("utf-8"))
        self._records.append(record)

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> TrialLog:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


# ---------------------------------------------------------------- sessions


def load_sessions(directory: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The lines of ``directory/run.jsonl`` in order; [] when there is none. AutotuneError names a bad line."""
    path = Path(directory) / RUN_LOG_NAME
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    except (OSError, UnicodeDecodeError) as exc:
        raise AutotuneError(f"cannot read {path}: {exc}") from None
    lines = []
    for lineno, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            line = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise AutotuneError(
                f"{path}:{lineno}: not a JSON record ({exc.msg} at column {exc.colno})"
            ) from None
        if not (
            isinstance(line, dict)
            and len(line) == 1
            and isinstance(line.get("session", line.get("session_end")), dict)
        ):
            raise AutotuneError(
                f'{path}:{lineno}: expected a {{"session": ...}} or {{"session_end": ...}} object'
            )
        lines.append(line)
    return lines


def _append_session(directory: Path, line: dict[str, Any]) -> None:
    """Add ``line`` to ``directory/run.jsonl``, replacing the file whole (it holds a few lines)."""
    path = directory / RUN_LOG_NAME
    try:
        old = path.read_text(encoding="utf-8") if path.exists() else ""
        write_atomic(path, old + json.dumps(line, ensure_ascii=False) + "\n")
    except OSError as exc:
        raise AutotuneError(f"cannot write {path}: {describe_os_error(exc)}") from exc


def _starts(sessions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [line["session"] for line in sessions if "session" in line]


def check_resume(sessions: list[dict[str, Any]], cfg: RunConfig) -> None:
    """Raise ConfigError naming every field of ``cfg`` that differs from the config the logged run
    was started with (its last session); a run without sessions is not checked. The fields in
    :data:`~autotune.search.records.UNFINGERPRINTED` (the trial budget, the workers...) may change."""
    starts = _starts(sessions)
    if not starts:
        return
    changes = config_changes(starts[-1], cfg)
    if not changes:
        return
    raise ConfigError(
        f"{cfg.source}: --resume: the config differs from the one the run in {cfg.output} was started with, "
        f"in {len(changes)} field{'s' * (len(changes) != 1)}: {'; '.join(changes)}. "
        "Restore them to continue that run, or start a new run with another --output"
    )


def config_changes(start: dict[str, Any], cfg: RunConfig) -> list[str]:
    """``"field: old -> new"`` for every field of ``cfg`` that differs from the config a session line
    ``start`` (``run.jsonl``'s ``"session"``) recorded: none when its fingerprint is ``cfg``'s, and
    none for a file of :data:`MOVABLE_FILES` whose directory alone differs, its contents' hash being
    the same. A recorded config that names a file without its hash (written before the config kept
    that file's hash) is compared by the path alone: moved, it is a change; edited, it is not seen."""
    after = config_fields(cfg)
    if start.get("fingerprint") == fingerprint(after):
        return []
    before = dict(start.get("config", {}))
    for field, sha in MOVABLE_FILES.items():
        if field in before and sha not in before:
            after.pop(sha, None)
        old, new = before.get(field), after.get(field)
        if (
            isinstance(old, str) and isinstance(new, str) and Path(old).name == Path(new).name
            and before.get(sha) is not None and before.get(sha) == after.get(sha)
        ):  # fmt: skip
            before[field] = new
    return changed_fields(before, after)


def finished_message(sessions: list[dict[str, Any]], cfg: RunConfig, logged: int) -> str | None:
    """What to say when resuming the logged run has nothing to do: its last session finished (it
    wrote best.json) with the ``logged`` trials the log holds now and a trial budget of at least
    ``cfg.search.trials``; None when work is left."""
    if (
        not sessions
        or "session_end" not in sessions[-1]
        or sessions[-1]["session_end"].get("logged") != logged
    ):
        return None
    budget = max((s.get("trials", 0) for s in _starts(sessions)), default=0)
    if cfg.search.trials > budget:
        return None
    end = sessions[-1]["session_end"]
    return (
        f"the run in {cfg.output} finished at {end.get('ended', '?')} with {end.get('logged', '?')} trials; "
        f"nothing to resume (a --trials above {budget} continues it)"
    )


def start_session(log: TrialLog, cfg: RunConfig) -> None:
    """Record a start of the run ``cfg`` whose trials go to ``log``. When the log holds trials (a
    resume), first check that the config is unchanged (:func:`check_resume`) and that the run has
    work left (else AutotuneError with :func:`finished_message`)."""
    directory = log.path.parent
    sessions = load_sessions(directory)
    if log.records:
        check_resume(sessions, cfg)
        done = finished_message(sessions, cfg, len(log.records))
        if done is not None:
            raise AutotuneError(done)
    elif sessions:  # a fresh run in a directory whose earlier run logged no trial
        (directory / RUN_LOG_NAME).unlink()
    _append_session(directory, session_start(cfg, len(log.records)))


def end_session(log: TrialLog) -> None:
    """Record that the run finished (best.json is written) with the trials now in ``log``."""
    _append_session(log.path.parent, session_end(len(log.records)))


def describe_os_error(exc: OSError) -> str:
    """Why a write failed, in words: "the disk is full" for ENOSPC and EDQUOT."""
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return "the disk is full"
    return exc.strerror or str(exc)


def _write_probe(path: Path, size: int) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        _write_all(fd, b"\0" * size)
    finally:
        os.close(fd)


def check_writable(directory: str | os.PathLike[str], probe_bytes: int = PROBE_BYTES) -> Path:
    """Create ``directory`` (with parents) and prove it takes a few KB; return it.

    Raises AutotuneError naming the directory when it cannot be created, is
    not writable, or the disk is full, so a run fails before its first trial.
    """
    path = Path(directory)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise AutotuneError(f"cannot create the output directory {path}: {exc.strerror or exc}") from exc
    probe = path / f".autotune-write-probe-{os.getpid()}"
    try:
        _write_probe(probe, probe_bytes)
    except OSError as exc:
        raise AutotuneError(f"cannot write to the output directory {path}: {describe_os_error(exc)}") from exc
    finally:
        with contextlib.suppress(OSError):  # could not even remove it: the write error says why
            probe.unlink(missing_ok=True)
    return path


def log_path_for(output: Path, resume: bool) -> Path:
    """The trial log's path in ``output``, which is created (:func:`check_writable`); AutotuneError if
    it is not writable or already holds a run (unless resuming)."""
    path = check_writable(output) / LOG_NAME
    if not resume and path.exists() and TrialLog.load(path):
        raise AutotuneError(
            f"{output} already holds a run ({path.name}); pass --resume to continue it, or choose another --output"
        )
    return path


@contextlib.contextmanager
def writing_results(output: Path) -> Iterator[None]:
    """Turn an OSError (a full disk, say) while writing the results into a one-line AutotuneError."""
    try:
        yield
    except OSError as exc:
        raise AutotuneError(f"cannot write the results to {output}: {describe_os_error(exc)}") from exc
