"""The built-in workloads tuned from scratch in 64 measured trials, against their stored best schedules.

    .venv/bin/python experiments/builtins_64.py [--workloads NAME ...] [--trials 64] [--skip-tune]
        [--strategy optuna|evolutionary|random] [--seed 0] [--rounds 7] [--min-ms 100] [--output results]

For each built-in workload with a stored tuned schedule (``results/<name>/best.json``, tuned with
its own config: 40-320 trials, some with a warm start and mutation), phase 1 writes
``experiments/configs/builtins_64/<name>.yaml``: the workload's config
(``experiments/configs/<name>.yaml``) with the same workload, memory and measurement, but the search
in the rules' space (``cascade``, also for the matmul, whose stored schedule comes from the closed
``gemm`` family), cut to ``--trials`` measured trials, TPE + XGBoost, seed 0 (``--seed``), no warm start and no
mutation (with ``--strategy evolutionary`` or ``random``: that strategy and XGBoost; the config,
the run and the report are suffixed ``_<strategy>``, and with a ``--seed`` other than 0 also
``_seed<N>``); and runs
``autotune run`` on it into ``results/builtins_64/<name>`` (skipped with ``--skip-tune``). Phase 2,
in one process: both schedules (each ``best.json`` replayed and lowered with its run's pools) are
checked against the reference and timed in turn each round, together with the stored schedule's
knobs applied in the rules' space (``replayed``: whether the space still holds it); the ratio is
the median over rounds of the per-round ratio new / stored. Target: at most 1.10 on every workload. Writes
``<output>/builtins_64.md`` and ``.json``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import statistics
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_vs_baselines as bench  # sets the thread counts before numpy is imported
import yaml
from generality import autotune_run
from thread_scaling import _median_ms, write_results

from autotune import workloads
from autotune.config.run import load_config
from autotune.errors import AutotuneError
from autotune.measure import reference_outputs
from autotune.search.space import load_space

REPO = bench.REPO
CONFIGS = REPO / "experiments" / "configs"
RUNS = REPO / "results" / "builtins_64"
WORKLOADS = ("pool_chain", "bottleneck", "matmul")
"""The built-ins with a stored tuned schedule in ``results/<name>/best.json``."""
TARGET = 1.10


def suffix(strategy: str, seed: int = 0) -> str:
    """The suffix of a strategy's and seed's configs, runs and report (none for the default, TPE, seed 0)."""
    return ("" if strategy == "optuna" else f"_{strategy}") + (f"_seed{seed}" if seed else "")


def write_config(name: str, trials: int, strategy: str = "optuna", seed: int = 0) -> Path:
    """The workload's config with the search in the rules' space, cut to ``trials`` trials, from scratch."""
    doc = yaml.safe_load((CONFIGS / f"{name}.yaml").read_text(encoding="utf-8"))
    chooser = {"sampler": "tpe"} if strategy == "optuna" else {"strategy": strategy}
    doc["search"] = {"space": "cascade", "trials": trials, **chooser, "cost_model": "xgboost", "seed": seed}
    doc["output"] = f"../../../results/builtins_64/{name}{suffix(strategy, seed)}"
    path = CONFIGS / "builtins_64" / f"{name}{suffix(strategy, seed)}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    text = yaml.safe_dump(doc, sort_keys=False, default_flow_style=None)
    header = (
        f"# experiments/configs/{name}.yaml in the cascade (rules') space, {trials} measured trials,\n"
        "# no warm start, no mutation.\n"
        "# Written by experiments/builtins_64.py.\n"
    )
    path.write_text(header + text, encoding="utf-8")
    return path


def tune(name: str, trials: int, strategy: str = "optuna", seed: int = 0) -> None:
    autotune_run(write_config(name, trials, strategy, seed), RUNS / f"{name}{suffix(strategy, seed)}")


def _statuses(log: Path) -> dict[str, int]:
    if not log.exists():
        return {}
    rows = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines() if line.strip()]
    statuses = [r.get("status") for r in rows]
    return {s: statuses.count(s) for s in sorted(set(statuses), key=str)}


def _stored_knobs_in_space(
    name: str, stored: dict[str, Any], wl: workloads.Workload, strategy: str, seed: int, scratch: Path
) -> Path | str:
    """The stored best's knobs applied in the rules' space of the 64-trial config, as a best.json
    in ``scratch`` (its pools, planner and seed kept): whether the space still holds the stored
    schedule. The reason as text when a knob is not in the space or the schedule does not apply."""
    cfg = load_config(CONFIGS / "builtins_64" / f"{name}{suffix(strategy, seed)}.yaml")
    space = load_space(cfg.search.space, wl, cfg.memory.pools)
    try:
        sch = space.apply(wl.func, stored["knobs"])
    except (ValueError, AutotuneError) as exc:
        return f"the stored knobs are not a schedule of the space: {exc}"
    path = scratch / "best.json"
    path.write_text(json.dumps({**stored, "trace": json.loads(sch.trace_json())}), encoding="utf-8")
    return path


def compare(name: str, rounds: int, min_ms: float, strategy: str = "optuna", seed: int = 0) -> dict[str, Any]:
    """Time the stored and the new best schedule of ``name`` in turn, ``rounds`` times."""
    run = RUNS / f"{name}{suffix(strategy, seed)}"
    stored_path, new_path = REPO / "results" / name / "best.json", run / "best.json"
    stored = json.loads(stored_path.read_text(encoding="utf-8"))
    wl = workloads.get(stored["workload"]["name"], **stored["workload"]["args"])
    inputs = wl.make_inputs(0)
    refs = tuple(reference_outputs(wl, inputs))
    row: dict[str, Any] = {"workload": name, "stored trials": stored.get("trial")}
    systems = []
    with tempfile.TemporaryDirectory() as scratch:  # the replayed best.json, read while building
        replayed = _stored_knobs_in_space(name, stored, wl, strategy, seed, Path(scratch))
        if isinstance(replayed, str):
            row["replayed error"] = replayed
        candidates = [("stored", stored_path), ("new", new_path)]
        candidates += [("replayed", replayed)] if isinstance(replayed, Path) else []
        for label, path in candidates:
            found, why = bench.autotune_systems(wl, inputs, refs, path)
            tuned = next((s for s in found if s.name == "autotune"), None)
            if tuned is None or tuned.run is None:
                row[f"{label} error"] = why or (tuned.error if tuned else "no schedule")
                continue
            systems.append((label, tuned))
            row[f"{label} peak B"] = tuned.workspace
    row["new trials by status"] = _statuses(run / "trials.jsonl")
    if len(systems) < 2:
        return row
    ms: dict[str, list[float]] = {label: [] for label, _ in systems}
    for r in range(rounds):
        k = r % len(systems)
        for label, system in systems[k:] + systems[:k]:
            ms[label].append(_median_ms(system.run, min_ms))
    row |= {f"{label} ms": statistics.median(times) for label, times in ms.items()}
    for label in ("new", "replayed"):
        if label in ms and "stored" in ms:
            row[f"{label}/stored"] = statistics.median(n / s for n, s in zip(ms[label], ms["stored"]))
    print(f"  {name}: {row}", flush=True)
    return row


def report(
    rows: list[dict[str, Any]],
    argv: Sequence[str],
    trials: int,
    rounds: int,
    min_ms: float,
    strategy: str = "optuna",
    seed: int = 0,
) -> list[str]:
    search = "TPE + XGBoost" if strategy == "optuna" else f"{strategy} + XGBoost"
    md = [
        f"# Built-in workloads tuned from scratch in {trials} trials",
        "",
        f"`.venv/bin/python experiments/builtins_64.py {' '.join(argv)}`, "
        f"{dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC. {bench._machine()}.",
        "",
        f"`new`: the best of {trials} measured trials from scratch in the rules' space (`cascade`; "
        f"`experiments/configs/builtins_64/`: {search}, seed {seed}, no warm start, no mutation); `stored`: "
        "`results/<name>/best.json` (its own config and space). "
        f"{rounds} rounds, in each both timed in turn (the median of back-to-back calls over {min_ms:g} ms); "
        f"`new/stored` is the median of the per-round ratios. Target: at most {TARGET:.2f}. `replayed`: the "
        "stored schedule's knobs applied in the rules' space (is the stored schedule still in the space?), "
        "timed in the same rounds.",
        "",
        "| workload | stored ms | new ms | new/stored | replayed ms | replayed/stored | stored peak B | new peak B "
        "| new trials by status | verdict |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |",
    ]

    def fmt(value: float | None, digits: int) -> str:
        return "-" if value is None else f"{value:.{digits}f}"

    for r in rows:
        ratio = r.get("new/stored")
        verdict = "no figure" if ratio is None else ("met" if ratio <= TARGET else "missed")
        md.append(
            f"| {r['workload']} | {fmt(r.get('stored ms'), 3)} | {fmt(r.get('new ms'), 3)} | {fmt(ratio, 2)} | "
            f"{fmt(r.get('replayed ms'), 3)} | {fmt(r.get('replayed/stored'), 2)} | {r.get('stored peak B', '')} | "
            f"{r.get('new peak B', '')} | {r.get('new trials by status', {})} | {verdict} |"
        )
    errors = [f"- {r['workload']}: {k}: {v}" for r in rows for k, v in r.items() if k.endswith("error")]
    md += ["", "Errors:" if errors else "Errors: none", *errors]
    return md


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workloads", nargs="+", choices=WORKLOADS, default=list(WORKLOADS))
    parser.add_argument("--trials", type=int, default=64)
    parser.add_argument("--skip-tune", action="store_true")
    parser.add_argument("--strategy", choices=("optuna", "evolutionary", "random"), default="optuna")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--min-ms", type=float, default=100.0)
    parser.add_argument("--output", type=Path, default=REPO / "results")
    args = parser.parse_args(argv)
    if not args.skip_tune:
        for name in args.workloads:
            tune(name, args.trials, args.strategy, args.seed)
    rows = [compare(name, args.rounds, args.min_ms, args.strategy, args.seed) for name in args.workloads]
    md = report(rows, argv, args.trials, args.rounds, args.min_ms, args.strategy, args.seed)
    stem = f"builtins_64{suffix(args.strategy, args.seed)}"
    write_results(args.output, stem, md, {"rows": rows, "trials": args.trials, "rounds": args.rounds})
    print("\n".join(md))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
