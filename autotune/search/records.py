"""The record of one trial: a frozen, validated :class:`TrialRecord`, one line of ``trials.jsonl``;
and the lines that open and close a session of a run (:func:`session_start`, :func:`session_end`).

>>> rec = TrialRecord.from_measure(3, 0, (("tile", 4),), result, node="local", trace=sch.trace_json())
>>> TrialRecord.from_json(rec.to_json()) == rec
True

``key`` identifies the schedule (a hash of its trace) so a resumed run never
measures the same candidate twice.

A session line records when the run (or its resumption) started, the machine
(:func:`machine`: CPU model, vector ISA features, cores), the versions of the
packages that shape the results (:func:`versions`) and the config's fields with
their :func:`fingerprint`, so that a resume with a changed config can name what changed.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import platform
from dataclasses import dataclass, fields
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any

from ..config import RunConfig
from ..measure.result import MeasureResult

__all__ = [
    "PICKS", "TIMED_TRIAL_STATUSES", "TRIAL_STATUSES", "TrialRecord", "changed_fields", "config_fields", "fingerprint", "machine",
    "session_end", "session_start", "trace_key", "versions",
]  # fmt: skip

TRIAL_STATUSES = ("ok", "cutoff", "infeasible", "invalid", "wrong", "timeout", "crashed", "error")
"""``ok``: correct and timed; ``cutoff``: correct, but the fastest of its first timed runs (or its
checking run, long and well over) was over the measurement's ``cutoff_ms``
(:class:`~autotune.measure.task.MeasureTask`), so it was timed no further (its times are those
runs'; never ``ok``, so never re-measured or the best);
``infeasible``: does not fit the memory pools (not
measured); ``invalid``: the knobs give no schedule (a ScheduleError); ``wrong``:
differs from the reference; ``timeout``/``crashed``: the worker hung or died;
``error``: the kernel could not be built."""
TIMED_TRIAL_STATUSES = ("ok", "cutoff")
"""The statuses whose trials carry times."""
PICKS = ("model", "random", "every")
"""How a round chose a measured trial: the cost model's best predicted, the epsilon share (or every
pick while the model has no order) at random, or no choice (the round had no more candidates than
measurements)."""

_TIMES = ("median_ms", "min_ms", "iqr_ms")
_SCALARS = (str, int, float, bool, type(None))


def trace_key(trace: str) -> str:
    """A stable hash (hex sha256) of the schedule a trace builds: insensitive to the JSON's whitespace
    and key order and to its ``sample`` steps (decisions that select the same primitives are one
    schedule, measured once)."""
    try:
        doc = json.loads(trace)
        if isinstance(doc, dict) and isinstance(doc.get("steps"), list):
            doc = {
                **doc,
                "steps": [s for s in doc["steps"] if not (isinstance(s, dict) and s.get("op") == "sample")],
            }
        text = json.dumps(doc, sort_keys=True, separators=(",", ":"))
    except ValueError:
        text = trace
    return hashlib.sha256(text.encode()).hexdigest()


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _check_float(name: str, value: Any, finite: bool = True) -> None:
    if value is None:
        return
    if not _is_number(value) or (finite and not math.isfinite(value)):
        raise ValueError(
            f"TrialRecord: {name} must be a {'finite ' if finite else ''}number or null, got {value!r}"
        )
    if value < 0:
        raise ValueError(f"TrialRecord: {name} must be >= 0, got {value!r}")


def _is_size(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _check_int(name: str, value: Any, allow_none: bool = False) -> None:
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"TrialRecord: {name} must be an int >= 0, got {value!r}")


def _check_pairs(name: str, pairs: Any, value_ok: Any, expected: str) -> None:
    if not isinstance(pairs, tuple) or not all(isinstance(p, tuple) and len(p) == 2 for p in pairs):
        raise ValueError(f"TrialRecord: {name} must be a tuple of (name, value) pairs, got {pairs!r}")
    names = [p[0] for p in pairs]
    if not all(isinstance(n, str) for n in names) or len(set(names)) != len(names):
        raise ValueError(f"TrialRecord: {name} names must be distinct strings, got {names!r}")
    for key, value in pairs:
        if not value_ok(value):
            raise ValueError(f"TrialRecord: {name}[{key!r}] must be {expected}, got {value!r}")


@dataclass(frozen=True, slots=True)
class TrialRecord:
    """One trial: its knobs, what became of it and its figures.

    ``trial`` numbers trials from 0 in proposal order; ``round`` is the batch
    it was proposed in. ``knobs`` are the sampled ``(name, JSON scalar)``
    pairs; ``reason`` is the failure's text, or why a ``cutoff`` trial stopped ("" when ``ok``).
    Times are milliseconds (``ok``, and ``cutoff``: its first runs); ``max_abs_err`` may be NaN or
    infinite (it is written as JSON ``NaN``/``Infinity``). ``peak_bytes`` is the planned peak
    workspace and ``pool_bytes`` the bytes used per pool; ``predicted_ms`` the
    cost model's guess; ``node`` where it ran; ``trace`` the schedule's trace JSON.
    ``retimed`` flags an ``ok`` trial whose first timing was noisy or contended and that was timed
    again (its times are the better timing's); it is written to JSON only when True.
    ``contended`` is the share of its timing's wall time that the kernel's threads waited for a CPU
    another process had (:func:`~autotune.measure.timing.contention`; written only when known).
    ``picked`` says how the round chose a measured trial (:data:`PICKS`,
    :func:`~autotune.search.candidates.choose`); "" for one not chosen so (and in logs written
    before it was recorded); written only when set.
    """

    trial: int
    round: int
    knobs: tuple[tuple[str, Any], ...]
    status: str
    reason: str = ""
    median_ms: float | None = None
    min_ms: float | None = None
    iqr_ms: float | None = None
    max_abs_err: float | None = None
    peak_bytes: int | None = None
    pool_bytes: tuple[tuple[str, int], ...] = ()
    predicted_ms: float | None = None
    compile_s: float | None = None
    node: str = ""
    trace: str = ""
    retimed: bool = False
    contended: float | None = None
    picked: str = ""

    def __post_init__(self) -> None:
        _check_int("trial", self.trial)
        _check_int("round", self.round)
        _check_int("peak_bytes", self.peak_bytes, allow_none=True)
        _check_pairs("knobs", self.knobs, lambda v: isinstance(v, _SCALARS), "a JSON scalar")
        _check_pairs("pool_bytes", self.pool_bytes, _is_size, "an int >= 0")
        for name in ("reason", "node", "trace"):
            if not isinstance(getattr(self, name), str):
                raise ValueError(f"TrialRecord: {name} must be a string, got {getattr(self, name)!r}")
        for name in (*_TIMES, "predicted_ms", "compile_s"):
            _check_float(name, getattr(self, name))
        _check_float("max_abs_err", self.max_abs_err, finite=False)
        self._check_status()

    def _check_status(self) -> None:
        if self.status not in TRIAL_STATUSES:
            raise ValueError(f"TrialRecord: status must be one of {TRIAL_STATUSES}, got {self.status!r}")
        if self.picked not in ("", *PICKS):
            raise ValueError(f"TrialRecord: picked must be one of {PICKS} or empty, got {self.picked!r}")
        if not isinstance(self.retimed, bool):
            raise ValueError(f"TrialRecord: retimed must be a bool, got {self.retimed!r}")
        if self.retimed and self.status != "ok":
            raise ValueError(f"TrialRecord: a {self.status!r} trial is not retimed")
        if self.contended is not None:
            _check_float("contended", self.contended)
            if not 0 <= self.contended <= 1 or self.status not in TIMED_TRIAL_STATUSES:
                raise ValueError(
                    f"TrialRecord: contended must be a share from 0 to 1 of a timed trial, got "
                    f"{self.contended!r} for {self.status!r}"
                )
        timed = [getattr(self, name) is not None for name in _TIMES]
        if self.status in TIMED_TRIAL_STATUSES:
            if not all(timed):
                article = "an" if self.status == "ok" else "a"
                raise ValueError(
                    f"TrialRecord: {article} {self.status!r} trial needs median_ms, min_ms and iqr_ms"
                )
            if self.min_ms > self.median_ms:  # type: ignore[operator]
                raise ValueError(f"TrialRecord: min_ms {self.min_ms} exceeds median_ms {self.median_ms}")
            if self.status == "ok":
                return
        elif any(timed):
            raise ValueError(f"TrialRecord: a {self.status!r} trial is not timed")
        if not self.reason:
            raise ValueError(f"TrialRecord: a {self.status!r} trial needs a reason")

    @property
    def key(self) -> str:
        """The identity of the schedule: :func:`trace_key` of ``trace``."""
        return trace_key(self.trace)

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @classmethod
    def from_measure(
        cls, trial: int, round: int, knobs: tuple[tuple[str, Any], ...], result: MeasureResult, **extra: Any
    ) -> TrialRecord:
        """The record of a measured trial; ``extra`` gives the other fields (node, trace, peak_bytes...)."""
        reason = result.error if result.status != "wrong" else f"max_abs_err {result.max_abs_err:g}"
        return cls(
            trial=trial,
            round=round,
            knobs=knobs,
            status=result.status,
            reason=extra.pop("reason", reason),
            median_ms=result.median_ms,
            min_ms=result.min_ms,
            iqr_ms=result.iqr_ms,
            max_abs_err=result.max_abs_err,
            compile_s=result.compile_s,
            retimed=result.retimed,
            contended=result.contended,
            **extra,
        )

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict: the pairs become objects, in their order; ``retimed`` only when True,
        ``contended`` only when known, ``picked`` only when set."""
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        data["knobs"] = dict(self.knobs)
        data["pool_bytes"] = dict(self.pool_bytes)
        if not self.retimed:
            del data["retimed"]
        if self.contended is None:
            del data["contended"]
        if not self.picked:
            del data["picked"]
        return data

    @classmethod
    def from_json(cls, data: Any) -> TrialRecord:
        """The record :meth:`to_json` gave; ValueError names the missing, unknown or bad field."""
        if not isinstance(data, dict):
            raise ValueError(f"TrialRecord: expected a JSON object, got {type(data).__name__}")
        names = [f.name for f in fields(cls)]
        unknown = sorted(set(data) - set(names))
        if unknown:
            raise ValueError(f"TrialRecord: unknown field(s) {', '.join(unknown)}")
        missing = [n for n in ("trial", "round", "knobs", "status") if n not in data]
        if missing:
            raise ValueError(f"TrialRecord: missing field(s) {', '.join(missing)}")
        values = dict(data)
        for name in ("knobs", "pool_bytes"):
            if name in values:
                if not isinstance(values[name], dict):
                    raise ValueError(f"TrialRecord: {name} must be a JSON object, got {values[name]!r}")
                values[name] = tuple(values[name].items())
        return cls(**values)


# ---------------------------------------------------------------- the record of a run: machine, versions, config

RUN_PACKAGES = ("autotune", "numba", "llvmlite", "numpy", "optuna", "ray", "xgboost")
"""The packages whose versions a run records (``xgboost`` is the ``xgboost-cpu`` or ``xgboost`` wheel)."""
ISA_FEATURES = (
    "sse4.2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl",
    "avx512vnni", "avx512bf16", "avx512fp16", "amx-tile", "neon", "sve", "sve2",
)  # fmt: skip
"""The vector ISA features a run records when the host has them (LLVM's names)."""
UNFINGERPRINTED = (
    "name", "output", "search.trials", "search.time_budget", "search.storage", "ray.address", "ray.workers",
)  # fmt: skip
"""Config fields a resumed run may change: they do not change what the search explores or measures
(``search.storage`` holds a copy of the trial log, made anew from the log at each start)."""


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine() -> dict[str, Any]:
    """The host: CPU model, LLVM's name for it, its vector ISA features, cores (all, and usable by
    this process), OS and Python."""
    import llvmlite.binding as llvm

    features = llvm.get_host_cpu_features()
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        usable = os.cpu_count() or 0
    return {
        "cpu": _cpu_model(),
        "llvm_cpu": llvm.get_host_cpu_name(),
        "isa": [name for name in ISA_FEATURES if features.get(name, False)],
        "cores": os.cpu_count() or 0,
        "usable_cores": usable,
        "host": platform.node(),
        "os": platform.platform(),
        "python": platform.python_version(),
    }


def versions() -> dict[str, str | None]:
    """The installed version of each of :data:`RUN_PACKAGES` (None if not installed)."""
    found: dict[str, str | None] = {}
    for package in RUN_PACKAGES:
        found[package] = None
        for dist in (package, f"{package}-cpu"):
            try:
                found[package] = metadata.version(dist)
                break
            except metadata.PackageNotFoundError:
                continue
    return found


def _file_hash(path: str | os.PathLike[str]) -> str | None:
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return None


def _flatten(prefix: str, value: Any, out: dict[str, Any]) -> None:
    if isinstance(value, dict):
        for key, inner in value.items():
            _flatten(f"{prefix}.{key}" if prefix else str(key), inner, out)
    else:
        out[prefix] = value


def config_fields(cfg: RunConfig) -> dict[str, Any]:
    """The config as dotted fields (``memory.peak_limit``...), without :data:`UNFINGERPRINTED`, plus
    the hashes of the files it names (``search.space_sha256``, ``workload.file_sha256``,
    ``search.warm_start_sha256``, ``search.cost_model.pretrained_sha256``)."""
    fields_: dict[str, Any] = {}
    _flatten("", cfg.to_dict(), fields_)
    for name in UNFINGERPRINTED:
        fields_.pop(name, None)
    fields_["search.space_sha256"] = _file_hash(cfg.search.space)
    if cfg.workload.path is not None:
        fields_["workload.file_sha256"] = _file_hash(cfg.workload.path.rpartition(":")[0])
    if cfg.search.warm_start is not None:
        fields_["search.warm_start_sha256"] = _file_hash(cfg.search.warm_start)
    if cfg.search.pretrained is not None:
        fields_["search.cost_model.pretrained_sha256"] = _file_hash(cfg.search.pretrained)
    return json.loads(json.dumps(fields_, sort_keys=True, default=str))  # plain JSON, as read back


def fingerprint(fields_: dict[str, Any]) -> str:
    """A stable hash (hex sha256) of :func:`config_fields`."""
    return hashlib.sha256(json.dumps(fields_, sort_keys=True).encode()).hexdigest()


def now() -> str:
    """The current UTC time, ISO 8601 with seconds."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def session_start(cfg: RunConfig, logged: int) -> dict[str, Any]:
    """The log line that opens a session of a run: when, on what machine with what versions, and
    the config (its fields, their fingerprint, the trial budget); ``logged`` trials were there before."""
    fields_ = config_fields(cfg)
    return {
        "session": {
            "started": now(),
            "logged_before": logged,
            "trials": cfg.search.trials,
            "fingerprint": fingerprint(fields_),
            "config": fields_,
            "machine": machine(),
            "versions": versions(),
        }
    }


def session_end(logged: int) -> dict[str, Any]:
    """The log line that closes a session whose run finished (best.json written) with ``logged`` trials."""
    return {"session_end": {"ended": now(), "logged": logged}}


def changed_fields(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """``"field: old -> new"`` for every field that differs, in name order."""
    missing = object()
    lines = []
    for name in sorted(set(before) | set(after)):
        old, new = before.get(name, missing), after.get(name, missing)
        if old != new:
            shown = ["(none)" if v is missing else json.dumps(v) for v in (old, new)]
            lines.append(f"{name}: {shown[0]} -> {shown[1]}")
    return lines
