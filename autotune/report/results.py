"""The trial log as a pandas table, its parquet/CSV copies, and a text summary.

:func:`load_results` gives one row per trial of ``DIR/trials.jsonl`` (or of a
``trials.jsonl`` or ``trials.parquet`` file), sorted by trial number, with these columns (then one per knob and one per pool)::

    trial round status reason median_ms min_ms iqr_ms retimed contended max_abs_err peak_bytes
    predicted_ms compile_s node trace key  knob.<name>...  pool.<name>...

``retimed`` is True for an ``ok`` trial whose first timing was noisy or contended and that was
timed a second time (its figures are the better timing's); ``contended`` is the share of its
timing that the kernel's threads waited for a CPU another process had (NaN: not known). A parquet
table without these columns has them added, all False and all NaN.

pandas is imported inside the functions, so importing this module is cheap.
"""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import AutotuneError
from ..files import write_atomic
from ..search.log import load
from ..search.records import TRIAL_STATUSES

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["BASE_COLUMNS", "load_results", "pareto_front", "summary", "write_tables"]

LOG_NAME = "trials.jsonl"
BASE_COLUMNS = (
    "trial", "round", "status", "reason", "median_ms", "min_ms", "iqr_ms", "retimed", "contended", "max_abs_err",
    "peak_bytes", "predicted_ms", "compile_s", "node", "trace", "key",
)  # fmt: skip
_FLOATS = ("median_ms", "min_ms", "iqr_ms", "contended", "max_abs_err", "predicted_ms", "compile_s")
_ADDED = {"retimed": False, "contended": float("nan")}
"""Columns that older tables lack, with the value they are given."""


def load_results(path: str | os.PathLike[str]) -> pd.DataFrame:
    """One row per trial of a run: ``path`` is its directory (``path/trials.jsonl``), a trial log
    (``.jsonl``, a torn last line dropped) or a table that :func:`write_tables` wrote (``.parquet``).

    Raises AutotuneError naming ``path`` when it does not exist or is another kind of file.
    """
    path = Path(path)
    if path.is_dir() or not path.suffix:
        return _from_log(path / LOG_NAME)
    if path.suffix == ".jsonl":
        return _from_log(path)
    if path.suffix == ".parquet":
        return _from_parquet(path)
    raise AutotuneError(
        f"{path}: {'a file' if path.exists() else 'no such directory'}, expected a run directory, "
        "a trials.jsonl or a trials.parquet"
    )


def _from_parquet(path: Path) -> pd.DataFrame:
    import pandas as pd

    if not path.is_file():
        raise AutotuneError(f"no trial table at {path}")
    try:
        df = pd.read_parquet(path)
    except (OSError, ValueError) as exc:
        raise AutotuneError(f"{path}: cannot read it as a parquet table ({exc})") from None
    missing = [c for c in BASE_COLUMNS if c not in df.columns and c not in _ADDED]
    if missing:
        raise AutotuneError(f"{path}: not a table of trials (no column {', '.join(missing)})")
    for name, value in _ADDED.items():
        if name not in df.columns:
            df.insert(BASE_COLUMNS.index(name), name, value)
    return df.sort_values("trial", kind="stable").reset_index(drop=True)


def _from_log(log: Path) -> pd.DataFrame:
    import pandas as pd

    records = load(log)
    rows: list[dict[str, Any]] = []
    knob_names: dict[str, None] = {}
    pool_names: dict[str, None] = {}
    for r in records:
        row: dict[str, Any] = {name: getattr(r, name) for name in BASE_COLUMNS if name != "key"}
        row["key"] = r.key
        for name, value in r.knobs:
            knob_names.setdefault(name)
            row[f"knob.{name}"] = value
        for name, used in r.pool_bytes:
            pool_names.setdefault(name)
            row[f"pool.{name}"] = used
        rows.append(row)
    columns = [*BASE_COLUMNS, *(f"knob.{n}" for n in knob_names), *(f"pool.{n}" for n in pool_names)]
    df = pd.DataFrame(rows, columns=columns)
    for name in _FLOATS:
        df[name] = df[name].astype("float64")
    for name in ("peak_bytes", *(f"pool.{n}" for n in pool_names)):
        df[name] = df[name].astype("Int64")
    for name in ("trial", "round"):
        df[name] = df[name].astype("int64")
    df["retimed"] = df["retimed"].astype("bool")
    return df.sort_values("trial", kind="stable").reset_index(drop=True)


def _storable(df: pd.DataFrame) -> pd.DataFrame:
    """A copy whose knob columns hold one type each (parquet needs it): mixed ones become text."""
    out = df.copy()
    for name in out.columns:
        if name.startswith("knob.") and out[name].dtype == object:
            kinds = {type(v) for v in out[name].dropna()}
            if len(kinds) > 1:
                out[name] = out[name].map(lambda v: None if v is None else str(v))
    return out


def write_tables(directory: str | os.PathLike[str]) -> tuple[Path, Path]:
    """Write ``trials.parquet`` and ``trials.csv`` beside the log, each replaced atomically; return their paths."""
    out = Path(directory)
    df = _storable(load_results(out))
    parquet, csv = out / "trials.parquet", out / "trials.csv"
    buf = io.BytesIO()  # rendered in memory, then replaced whole: a failed write keeps the old table
    df.to_parquet(buf, index=False)
    write_atomic(parquet, buf.getvalue())
    write_atomic(csv, df.to_csv(index=False))
    return parquet, csv


def pareto_front(df: pd.DataFrame) -> pd.DataFrame:
    """The ``ok`` trials no other ``ok`` trial beats on both latency and peak memory, by peak."""
    ok = df[df["status"] == "ok"].sort_values(["peak_bytes", "median_ms", "trial"], kind="stable")
    keep: list[int] = []
    best = float("inf")
    for index, median in zip(ok.index, ok["median_ms"]):
        if median < best:
            keep.append(index)
            best = median
    return ok.loc[keep]


def _knobs(row: Any, names: list[str]) -> str:
    import pandas as pd

    return ", ".join(f"{n[5:]}={row[n]}" for n in names if not pd.isna(row[n]))


def _bytes(value: Any) -> str:
    import pandas as pd

    return "-" if pd.isna(value) else f"{int(value):,}"


def summary(df: pd.DataFrame, top: int = 5) -> str:
    """Counts by status, then the ``top`` fastest ``ok`` trials as a table, latencies in µs, ms or s,
    with whether each was re-timed (``yes``: its first timing was noisy, the steadier one is shown);
    a noisy trial (:func:`~autotune.report.analysis.noisy`) is marked ``*``."""
    from .analysis import NOISE_THRESHOLD, format_ms, noisy

    counts = df["status"].value_counts()
    order = [s for s in TRIAL_STATUSES if s in counts.index]
    lines = [f"trials: {len(df)} (" + ", ".join(f"{s} {int(counts[s])}" for s in order) + ")"]
    ok = df[df["status"] == "ok"].sort_values(["median_ms", "trial"], kind="stable").head(top)
    if ok.empty:
        lines.append("no ok trial")
        return "\n".join(lines)
    flags = noisy(df)
    knob_cols = [c for c in df.columns if c.startswith("knob.")]
    header = ["trial", "median", "min", "IQR", "retimed", "peak bytes", "knobs"]
    rows = [
        [
            f"{row['trial']}{'*' if flags[i] else ''}", format_ms(row["median_ms"]), format_ms(row["min_ms"]),
            format_ms(row["iqr_ms"]), "yes" if row["retimed"] else "no", _bytes(row["peak_bytes"]),
            _knobs(row, knob_cols),
        ]
        for i, row in ok.iterrows()
    ]  # fmt: skip
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header) - 1)]
    lines.append(f"best {len(rows)} ok:")
    for r in [header, *rows]:
        cells = [c.rjust(w) for c, w in zip(r[:-1], widths)]
        lines.append("  " + "  ".join([*cells, r[-1]]).rstrip())
    n = int(flags.sum())
    if n:
        lines.append(
            f"* noisy: {n} of {int(counts['ok'])} ok trials have median - min or IQR above "
            f"{NOISE_THRESHOLD:.0%} of their median (timed on a busy machine?)"
        )
    return "\n".join(lines)
