"""Sample efficiency of the search strategies: best-so-far latency against measured trials.

    .venv/bin/python experiments/sample_efficiency.py [--workloads small attention dw_separable]
        [--strategies random tpe evolutionary] [--trials 48] [--seeds 0] [--workers 1]

Each workload's config (``examples/small.yaml``; the generality benchmark's chains in
``experiments/configs/generality/``) is tuned once per strategy and seed, with no warm start and
the config's pools and ``peak_limit``, on the local executor:

- ``random``: ``search.strategy: random``, no cost model (the control);
- ``tpe``: Optuna's TPE, no cost model (every measured trial is TPE's own draw);
- ``evolutionary``: ``search.strategy: evolutionary`` with the XGBoost ranking model
  (64 proposals a round, 8 measured: the best by the model and a quarter at random).

From each run's ``trials.jsonl``: the best ``ok`` median so far after each measured trial (every
status but ``infeasible`` uses the budget); the best latency any run of the workload found; the
measured trials each run needed to come within 5% of it; the search loop's wall time; the
infeasible and invalid trials. The latencies are the search's own medians, measured while the run
went on, so runs done at different times on a loaded machine differ by noise too. A run whose
``best.json`` exists under ``results/sample_efficiency_runs/`` is read, not run again.
Writes ``results/sample_efficiency.md``, ``.json`` and ``.png``.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
import sys
import time
from pathlib import Path
from typing import Any

from autotune.config import load_config
from autotune.report import write_report
from autotune.search.log import load
from autotune.search.records import machine
from autotune.search.tuner import tune

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "results"
RUNS = RESULTS / "sample_efficiency_runs"
WORKLOADS = {
    "small": REPO / "examples" / "small.yaml",
    "attention": REPO / "experiments" / "configs" / "generality" / "attention.yaml",
    "dw_separable": REPO / "experiments" / "configs" / "generality" / "dw_separable.yaml",
    "lenet_pool_conv": REPO / "experiments" / "configs" / "generality" / "lenet_pool_conv.yaml",
}
STRATEGIES: dict[str, dict[str, Any]] = {
    "random": {"strategy": "random", "cost_model": "none"},
    "tpe": {"strategy": "optuna", "sampler": "tpe", "cost_model": "none"},
    "evolutionary": {"strategy": "evolutionary", "cost_model": "xgboost"},
}
WITHIN = 1.05
"""A run has found the best when its best so far is within 5% of the best any run found."""
HOST = "AMD EPYC (LLVM znver5), AVX-512, 2 cores shared with three other engineers' test suites and runs"


def run_one(workload: str, strategy: str, seed: int, trials: int, workers: int) -> dict[str, Any]:
    """Tune one workload with one strategy and seed (or read the finished run); its curve and figures."""
    out = RUNS / workload / f"{strategy}-s{seed}"
    wall = None
    if not (out / "best.json").exists():
        cfg = load_config(WORKLOADS[workload], {"trials": trials, "seed": seed, "output": str(out)})
        settings = {"sampler": "tpe", **STRATEGIES[strategy]}
        search = dataclasses.replace(
            cfg.search,
            batch=64,
            measure_per_round=8,
            mutation=0.0,
            warm_start=None,
            time_budget=None,
            **settings,
        )
        cfg = dataclasses.replace(cfg, search=search, ray=dataclasses.replace(cfg.ray, workers=workers))
        if out.exists():  # an unfinished run: start again
            for f in sorted(out.iterdir()):
                f.unlink()
            out.rmdir()
        start = time.perf_counter()
        result = tune(cfg, progress=False, executor="local", report=write_report)
        wall = {
            "search_s": result.driver.total_s if result.driver else None,
            "total_s": time.perf_counter() - start,
        }
        (out / "wall.json").write_text(json.dumps(wall))
    else:
        wall = json.loads((out / "wall.json").read_text()) if (out / "wall.json").exists() else {}
    records = sorted(load(out / "trials.jsonl"), key=lambda r: r.trial)
    measured = [r for r in records if r.status != "infeasible"]
    curve: list[float | None] = []
    best: float | None = None
    for r in measured:
        if r.ok and r.median_ms is not None:
            best = r.median_ms if best is None else min(best, r.median_ms)
        curve.append(best)
    counts: dict[str, int] = {}
    for r in records:
        counts[r.status] = counts.get(r.status, 0) + 1
    best_json = json.loads((out / "best.json").read_text())
    return {
        "workload": workload, "strategy": strategy, "seed": seed, "curve": curve, "counts": counts,
        "wall": wall, "remeasured_ms": best_json["figures"]["median_ms"], "dir": str(out.relative_to(REPO)),
    }  # fmt: skip


def trials_to(curve: list[float | None], target: float) -> int | None:
    """The measured trials a curve needs to reach ``target`` (1-based), None if it never does."""
    return next((i + 1 for i, v in enumerate(curve) if v is not None and v <= target), None)


def summarise(runs: list[dict[str, Any]]) -> dict[str, Any]:
    by_wl: dict[str, list[dict[str, Any]]] = {}
    for r in runs:
        by_wl.setdefault(r["workload"], []).append(r)
    out: dict[str, Any] = {}
    for wl, rs in by_wl.items():
        best = min(v for r in rs for v in r["curve"] if v is not None)
        for r in rs:
            r["to_within"] = trials_to(r["curve"], WITHIN * best)
        out[wl] = {"best_ms": best, "runs": rs}
    return out


def plot(summary: dict[str, Any], path: Path) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(4.2 * len(summary), 3.8), dpi=100)
    FigureCanvasAgg(fig)
    colours = {"random": "C0", "tpe": "C1", "evolutionary": "C2"}
    for i, (wl, s) in enumerate(summary.items()):
        ax = fig.add_subplot(1, len(summary), i + 1)
        for r in s["runs"]:
            xs = [k + 1 for k, v in enumerate(r["curve"]) if v is not None]
            ys = [v / s["best_ms"] for v in r["curve"] if v is not None]
            ax.step(xs, ys, where="post", color=colours.get(r["strategy"], "C3"),
                    label=f"{r['strategy']} s{r['seed']}", linestyle="-" if r["seed"] == 0 else "--")  # fmt: skip
        ax.axhline(WITHIN, color="0.5", linestyle=":", linewidth=1)
        ax.set_yscale("log")
        ax.set_xlabel("measured trials")
        ax.set_ylabel("best so far / best of any run")
        ax.set_title(f"{wl} (best {s['best_ms']:.3g} ms)")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, format="png", metadata={"Software": None})


def markdown(summary: dict[str, Any], args: argparse.Namespace, host: dict[str, Any]) -> str:
    lines = [
        "# Sample efficiency: random vs TPE vs evolutionary + XGBoost",
        "",
        f"`.venv/bin/python experiments/sample_efficiency.py --workloads {' '.join(args.workloads)} "
        f"--strategies {' '.join(args.strategies)} --trials {args.trials} --seeds "
        f"{' '.join(map(str, args.seeds))} --workers {args.workers}`, {dt.date.today().isoformat()}.",
        "",
        f"Host: {HOST}; measured `{host.get('cpu', '?')}`, {host.get('usable_cores', '?')} usable cores. "
        "One run per strategy, workload and seed, one after the other, on the local executor with "
        f"{args.workers} worker(s); no warm start; each workload's own pools and `peak_limit`.",
        "",
        "Trials to 5%: the measured trials (every status but `infeasible`) a run needed before its best "
        "`ok` median was within 5% of the best median any run of the workload found (`-`: never). "
        "Medians are the search's own, timed while the machine was shared: a run can look faster or "
        "slower by noise, and the best of all runs can be one lucky measurement. Re-measured: the run's "
        "best schedule timed again at its end (best.json). Wall: the search loop (then the end's "
        "re-measurement and report).",
        "",
    ]
    for wl, s in summary.items():
        lines += [
            f"## {wl}",
            "",
            f"Best median of any run: {s['best_ms']:.4g} ms.",
            "",
            "| strategy | seed | trials to 5% | best (search) | best re-measured | ok / infeasible / invalid | wall (search) |",
            "| --- | ---: | ---: | ---: | ---: | --- | ---: |",
        ]
        for r in s["runs"]:
            final = next((v for v in reversed(r["curve"]) if v is not None), None)
            c = r["counts"]
            wall = r["wall"].get("search_s")
            lines.append(
                f"| {r['strategy']} | {r['seed']} | {r['to_within'] or '-'} of {len(r['curve'])} | "
                f"{'-' if final is None else f'{final:.4g} ms'} | {r['remeasured_ms']:.4g} ms | "
                f"{c.get('ok', 0)} / {c.get('infeasible', 0)} / {c.get('invalid', 0)} | "
                f"{'-' if wall is None else f'{wall:.0f} s'} |"
            )
        lines.append("")
    lines += ["![best so far against measured trials](sample_efficiency.png)", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--workloads", nargs="+", default=["small", "attention", "dw_separable"], choices=sorted(WORKLOADS)
    )
    p.add_argument("--strategies", nargs="+", default=list(STRATEGIES), choices=list(STRATEGIES))
    p.add_argument("--trials", type=int, default=48)
    p.add_argument("--seeds", type=int, nargs="+", default=[0])
    p.add_argument("--workers", type=int, default=1)
    args = p.parse_args(argv)
    runs = []
    for wl in args.workloads:
        for seed in args.seeds:
            for strategy in args.strategies:
                print(f"{wl} {strategy} seed {seed}", file=sys.stderr, flush=True)
                runs.append(run_one(wl, strategy, seed, args.trials, args.workers))
    summary = summarise(runs)
    host = machine()
    RESULTS.mkdir(exist_ok=True)
    plot(summary, RESULTS / "sample_efficiency.png")
    (RESULTS / "sample_efficiency.json").write_text(json.dumps({"host": host, "summary": summary}, indent=1))
    (RESULTS / "sample_efficiency.md").write_text(markdown(summary, args, host))
    print((RESULTS / "sample_efficiency.md").read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
