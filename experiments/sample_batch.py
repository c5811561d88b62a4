"""How much a timing's median moves from one timing to the next, with single calls as timed runs or
with batches of calls that last at least ``min_sample_s``.

    .venv/bin/python experiments/sample_batch.py [--config experiments/configs/generality/dw_separable.yaml]
        [--schedules 8] [--rounds 5] [--min-sample-ms 0 2 10] [--seed 0] [--output results]

``--schedules`` random schedules of the config's workload and space that fit its memory (seeded),
each as one measurement task per ``--min-sample-ms`` value (``MeasureTask.min_sample_s``; 0: every
timed run one call; otherwise a timed run is a batch of calls lasting about that long), are timed
as a run's end re-times its best: one worker process, every task in turn, ``--rounds`` rounds
(:meth:`~autotune.search.executors.Executor.remeasure`; the config's warm-up and repeats, each
round checked against numpy with fresh outputs). Per schedule and value: the spread of its rounds'
medians, (max - min) / median. Printed
and written: per value, the median and the largest spread over the schedules, and the median
kernel time.

Writes ``<output>/sample_batch.md`` and ``.json``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from autotune.config import load_config, load_workload  # noqa: E402
from autotune.errors import ScheduleError  # noqa: E402
from autotune.search import candidates as cand  # noqa: E402
from autotune.search.executors.local_executor import LocalExecutor  # noqa: E402
from autotune.search.records import machine  # noqa: E402
from autotune.search.space import load_space  # noqa: E402


def traces(cfg: Any, n: int, seed: int) -> list[str]:
    """The traces of ``n`` random schedules of the config's space that fit its memory (seeded)."""
    wl = load_workload(cfg.workload)
    space = load_space(cfg.search.space, wl, cfg.memory.pools)
    rng = np.random.default_rng(seed)
    out: list[str] = []
    for _ in range(200 * n):
        if len(out) == n:
            break
        try:
            sch = space.apply(wl.func, cand.random_assignment(space, rng))
        except ScheduleError:
            continue
        low = cand.lower_candidate(sch.func, cfg.memory.pools, cfg.memory.planner, seed, cfg.memory.peak_limit)
        if low.lowered is not None:
            out.append(sch.trace_json())
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", type=Path, default=REPO / "experiments" / "configs" / "generality" / "dw_separable.yaml")
    p.add_argument("--schedules", type=int, default=8)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--min-sample-ms", type=float, nargs="+", default=[0.0, 2.0, 10.0])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--output", type=Path, default=REPO / "results")
    args = p.parse_args(argv)
    load = list(os.getloadavg())
    cfg = load_config(args.config)
    chosen = traces(cfg, args.schedules, args.seed)
    variants = [(v, (v / 1000) or None) for v in args.min_sample_ms]
    tasks = [replace(cand.make_task(cfg, t), min_sample_s=s) for t in chosen for _, s in variants]
    with LocalExecutor(workers=1) as executor:
        results = executor.remeasure(tasks, args.rounds)
    medians: dict[float, list[list[float]]] = {v: [] for v, _ in variants}
    for k, rs in enumerate(results):
        if not all(r.ok and r.median_ms is not None for r in rs):
            raise SystemExit(f"{args.config}: a schedule did not time ok: {[r.error[:200] for r in rs if not r.ok]}")
        medians[variants[k % len(variants)][0]].append([float(r.median_ms) for r in rs])  # type: ignore[arg-type]
    rows = []
    for v, per in medians.items():
        spreads = [(max(m) - min(m)) / statistics.median(m) for m in per]
        rows.append(
            {
                "min_sample_ms": v,
                "median_spread": statistics.median(spreads),
                "max_spread": max(spreads),
                "median_ms": statistics.median(statistics.median(m) for m in per),
                "spreads": spreads,
            }
        )
    host = machine()
    rel = os.path.relpath(args.config, REPO)
    lines = [
        "# A timing's median from one timing to the next: single calls or batches of calls",
        "",
        f"`.venv/bin/python experiments/sample_batch.py --config {rel} --schedules {args.schedules} --rounds "
        f"{args.rounds} --min-sample-ms {' '.join(f'{v:g}' for v in args.min_sample_ms)} --seed {args.seed}`, "
        f"{dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC. Host: {host.get('cpu', '?')} (LLVM "
        f"`{host.get('llvm_cpu', '?')}`), {host.get('cores', '?')} cores; load average "
        f"{', '.join(f'{x:.2f}' for x in load)} at the start.",
        "",
        f"{len(chosen)} random schedules of the config's space that fit its memory, each timed {args.rounds} times "
        f"in turn on one worker as a run's end re-times ({cfg.measure.warmup} warm-up and {cfg.measure.repeats} "
        "timed runs per round). Spread: (max - min) / median of a schedule's medians over the rounds.",
        "",
        "| min sample | median spread | largest spread | median kernel time |",
        "| ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        label = "one call" if r["min_sample_ms"] == 0 else f"{r['min_sample_ms']:g} ms"
        lines.append(
            f"| {label} | {r['median_spread']:.0%} | {r['max_spread']:.0%} | {r['median_ms'] * 1000:.1f} µs |"
        )
    text = "\n".join(lines) + "\n"
    args.output.mkdir(parents=True, exist_ok=True)
    stem = f"sample_batch_{Path(args.config).stem}"
    (args.output / f"{stem}.md").write_text(text, encoding="utf-8")
    (args.output / f"{stem}.json").write_text(
        json.dumps({"host": host, "load_average_start": load, "rows": rows}, indent=1), encoding="utf-8"
    )
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
