"""The end of a run: re-measure the best trials beside the default schedule, pick one, write it out.

Search-time figures come from different workers at different moments, and a
single core's speed varies by about 30 % from run to run, so the top
:data:`TOP_K` ``ok`` trials and the default schedule (the workload with no
schedule steps) are timed again in one :meth:`~autotune.search.executors.Executor.remeasure`
call: one worker, alternating, :data:`REMEASURE_ROUNDS` rounds (a schedule over
:data:`~autotune.measure.task.SLOWER_ONE_ROUND` times the fastest and slower than a timing sample,
as an unscheduled chain often is, in the first only). The best is the lowest median of those
rounds (of the rounds not contended, where some are: :func:`figures_of`), and the speedup and
memory ratio compare it with the default from the same call. Files written to the output directory:

- ``best.json``: the trace (loadable by ``autotune show/check --trace``),
  knobs, figures of the best and of the default (each with the ``node`` that
  re-measured it), speedup, memory ratio, what is needed to rebuild it
  (workload, pools, planner, seed), the cost model's kind and its figures out of
  fold on the run's trials (``cost_model``), and the run's record (``run``: start
  and end time, config fingerprint, machine, package versions);
- ``best_ir.txt``: the lowered IR of the best schedule;
- ``best_kernel.py``: its generated kernel source.
"""

from __future__ import annotations

import json
import math
import statistics
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ..codegen import generate_source
from ..config import RunConfig
from ..errors import AutotuneError, ConfigError
from ..files import write_atomic
from ..measure.result import MeasureResult
from ..measure.timing import is_contended
from ..schedule import Schedule
from ..workloads import Workload
from . import candidates as cand
from .executors import Executor
from .log import TrialLog, load_sessions
from .records import TrialRecord, config_fields, fingerprint, machine, now, versions
from .space import SearchSpace
from .stopwatch import DriverTime
from .target import Target

__all__ = [
    "REMEASURE_ROUNDS", "TOP_K", "Figures", "TuneResult", "finish", "run_record", "top_trials", "warm_start",
]  # fmt: skip

TOP_K = 10
"""How many of the search's fastest schedules its end times again: a search's medians are timed at
different moments of a shared machine, so a schedule truly within a few percent of the best can
end behind several that were timed luckier (measured with ``experiments/sample_efficiency.py``'s
referee, which re-times every schedule of the runs' top 10: the README's Benchmarks)."""
REMEASURE_ROUNDS = 5


@dataclass(frozen=True)
class Figures:
    """Latency over the re-measure rounds (ms: median of the rounds' medians, lowest minimum,
    median IQR) and the planned workspace; ``status`` is ``ok`` only if every round was;
    ``node`` is the node that measured them ("" if not known)."""

    status: str
    median_ms: float | None
    min_ms: float | None
    iqr_ms: float | None
    peak_bytes: int
    pool_bytes: tuple[tuple[str, int], ...]
    reason: str = ""
    node: str = ""
    contended: float | None = None
    """The largest :func:`~autotune.measure.timing.contention` of the rounds (None: not known)."""
    rounds: int | None = None
    """How many re-measure rounds timed it (fewer than the call's for a schedule over
    :data:`~autotune.measure.task.SLOWER_ONE_ROUND` times the fastest; None: not re-measured)."""

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["pool_bytes"] = dict(self.pool_bytes)
        return data


@dataclass(frozen=True)
class TuneResult:
    """What a run found. ``speedup`` is the default's median over the best's; ``memory_ratio``
    the default's peak workspace over the best's (None when either is unknown or zero);
    ``driver`` where the driver's time went during the search loop (set by ``tune``)."""

    best: TrialRecord
    figures: Figures
    default: Figures
    speedup: float | None
    memory_ratio: float | None
    output: Path
    driver: DriverTime | None = None


WARM_START_TRIALS = 4
"""How many of a warm-start log's best ``ok`` trials are proposed first."""


def warm_start(path: Path, space: SearchSpace) -> list[dict[str, Any]]:
    """The active knobs of the schedules in ``path``: a ``best.json`` (its knobs) or a
    ``trials.jsonl`` (its :data:`WARM_START_TRIALS` fastest ``ok`` trials). Knobs the space no
    longer has are dropped and knobs it has gained take their defaults (the space may have
    grown since that run); a value that is not one of its knob's choices is a ConfigError."""
    try:
        if path.suffix == ".jsonl":
            found = [dict(r.knobs) for r in top_trials(TrialLog.load(path), WARM_START_TRIALS)]
        else:
            data = json.loads(path.read_text(encoding="utf-8"))
            if not isinstance(data, dict) or not isinstance(data.get("knobs"), dict):
                raise ConfigError(f"{path}: search.warm_start: expected a best.json with a 'knobs' object")
            found = [data["knobs"]]
    except (OSError, ValueError) as e:
        raise ConfigError(f"{path}: search.warm_start: cannot read it ({e})") from None
    out = []
    for knobs in found:
        values = space.default()
        for knob in space.knobs:
            if knob.name in knobs:
                if knobs[knob.name] not in knob:
                    raise ConfigError(
                        f"{path}: search.warm_start: knob {knob.name!r} is {knobs[knob.name]!r}, "
                        f"not one of its choices {list(knob.choices)}"
                    )
                values[knob.name] = knobs[knob.name]
        out.append(space.active_values(values))
    return out


def top_trials(records: Sequence[TrialRecord], k: int = TOP_K) -> list[TrialRecord]:
    """The ``k`` fastest ``ok`` trials with distinct schedules, fastest first."""
    ok = sorted((r for r in records if r.ok), key=lambda r: (r.median_ms, r.trial))
    seen: set[str] = set()
    top: list[TrialRecord] = []
    for record in ok:
        if record.key not in seen:
            seen.add(record.key)
            top.append(record)
    return top[:k]


def figures_of(
    results: Sequence[MeasureResult], peak: int, pool_bytes: tuple[tuple[str, int], ...], node: str = ""
) -> Figures:
    """Combine the rounds of one re-measured schedule, measured on ``node``: the median of the
    rounds' medians, of those not contended (:data:`~autotune.measure.timing.CONTENDED`) when
    there are any, for a round timed while another process had the cores is a busy machine's."""
    bad = next((r for r in results if not r.ok), None)
    if bad is not None or not results:
        status = bad.status if bad is not None else "error"
        reason = (bad.error or f"max_abs_err {bad.max_abs_err}") if bad is not None else "not measured"
        return Figures(status, None, None, None, peak, pool_bytes, reason, node)
    alone = [r for r in results if not is_contended(r.contended)] or list(results)
    return Figures(
        "ok",
        statistics.median(r.median_ms for r in alone),  # type: ignore[type-var]
        min(r.min_ms for r in alone),  # type: ignore[type-var]
        statistics.median(r.iqr_ms for r in alone),  # type: ignore[type-var]
        peak,
        pool_bytes,
        node=node,
        contended=max((r.contended for r in results if r.contended is not None), default=None),
        rounds=len(results),
    )


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def finish(
    cfg: RunConfig,
    wl: Workload,
    records: Sequence[TrialRecord],
    executor: Executor,
    cross_validated: dict[str, float] | None = None,
) -> TuneResult:
    """Re-measure the top trials and the default schedule; write best.json, best_ir.txt, best_kernel.py.
    ``cross_validated``: the cost model scored out of fold on the run's trials
    (:meth:`~autotune.search.rounds.Search.cross_validated`), best.json's ``cost_model``."""
    top = top_trials(records)
    if not top:
        counts = ", ".join(f"{n} {s}" for s, n in sorted(Counter(r.status for r in records).items()))
        raise AutotuneError(
            f"no trial was ok ({counts or 'no trials'}); the reasons are in {Path(cfg.output) / 'trials.jsonl'}"
        )
    mem = cfg.memory
    default = Schedule(wl.func)
    dlow = cand.lower_candidate(default.func, mem.pools, mem.planner, cfg.search.seed, None)
    fits = dlow.lowered is not None  # else measured in one unbounded pool: the code is the same
    tasks = [cand.make_task(cfg, r.trace) for r in top] + [
        cand.make_task(cfg, default.trace_json(), pools=fits)
    ]
    results = executor.remeasure(tasks, REMEASURE_ROUNDS)
    node = executor.remeasure_node
    figs = [figures_of(res, r.peak_bytes or 0, r.pool_bytes, node) for res, r in zip(results, top)]
    dfig = figures_of(results[-1], dlow.peak, dlow.pool_bytes, node)
    timed = [i for i, f in enumerate(figs) if f.median_ms is not None]
    if timed:
        i = min(timed, key=lambda j: (figs[j].median_ms, j))
        best, fig = top[i], figs[i]
    else:  # every re-measure failed (a flaky machine?): keep the search's fastest, with its search figures
        best = top[0]
        fig = Figures(
            "ok", best.median_ms, best.min_ms, best.iqr_ms, best.peak_bytes or 0, best.pool_bytes,
            "re-measure failed: " + figs[0].reason, best.node,
        )  # fmt: skip
    result = TuneResult(
        best=best,
        figures=fig,
        default=dfig,
        speedup=_ratio(dfig.median_ms, fig.median_ms),
        memory_ratio=_ratio(dfig.peak_bytes, fig.peak_bytes) if dfig.peak_bytes else None,
        output=Path(cfg.output),
    )
    _write(cfg, wl, result, top, figs, fits, cross_validated)
    return result


def run_record(cfg: RunConfig) -> dict[str, Any]:
    """best.json's ``run``: when the run started (its first session in the log) and ended (now), how
    many sessions it took, the config fingerprint, and the machine and package versions of the
    driver that wrote it (the re-measure's node is ``figures.node``)."""
    starts = [line["session"] for line in load_sessions(cfg.output) if "session" in line]
    return {
        "started": starts[0].get("started") if starts else None,
        "ended": now(),
        "sessions": len(starts),
        "fingerprint": fingerprint(config_fields(cfg)),
        "machine": machine(),
        "versions": versions(),
    }


def _write(
    cfg: RunConfig,
    wl: Workload,
    result: TuneResult,
    top: list[TrialRecord],
    figs: list[Figures],
    fits: bool,
    cross_validated: dict[str, float] | None,
) -> None:
    out = Path(cfg.output)
    best = result.best
    sch = Schedule.replay(wl.func, best.trace)
    mem = cfg.memory
    lowering = cand.lower_candidate(sch.func, mem.pools, mem.planner, cfg.search.seed, None)
    assert lowering.lowered is not None, "an ok trial fits its pools"
    data = {
        "name": cfg.name,
        "workload": {"name": cfg.workload.name, "path": cfg.workload.path, "args": dict(cfg.workload.args)},
        "pools": [{"name": p.name, "size": p.size} for p in mem.pools],
        "planner": mem.planner,
        "peak_limit": mem.peak_limit,
        "seed": cfg.search.seed,
        "trial": best.trial,
        "key": best.key,
        "knobs": dict(best.knobs),
        "trace": json.loads(best.trace),
        "search": {"median_ms": best.median_ms, "min_ms": best.min_ms, "iqr_ms": best.iqr_ms},
        "figures": result.figures.to_json(),
        "default": {**result.default.to_json(), "pools": "config" if fits else "unbounded"},
        "speedup": result.speedup,
        "memory_ratio": result.memory_ratio,
        "remeasure": {
            "rounds": REMEASURE_ROUNDS,
            "candidates": [{"trial": r.trial, **f.to_json()} for r, f in zip(top, figs)],
        },
        "cost_model": {
            "kind": cfg.search.cost_model,
            "cross_validated": None if cross_validated is None else {
                k: None if math.isnan(v) else v for k, v in cross_validated.items()
            },
        },
        "run": run_record(cfg),
        "target": Target.host().to_json(),
    }
    ir_text = str(lowering.lowered.func).rstrip("\n") + "\n"
    kernel = generate_source(lowering.lowered.func).text
    # each file is replaced whole; best.json last: in a new directory it means all three are there
    write_atomic(out / "best_ir.txt", ir_text)
    write_atomic(out / "best_kernel.py", kernel)
    write_atomic(out / "best.json", json.dumps(data, indent=1) + "\n")
