"""Chains that are not built-ins, tuned with no per-chain knob: tuned vs untuned default vs PyTorch eager.

    .venv/bin/python experiments/generality.py [--chains NAME ...] [--trials 64] [--skip-tune]
        [--rounds 5] [--min-ms 100] [--output results]

The chains are experiments/generality_chains.py (the operator library and ``te`` only, a numpy
reference each): a ResNet basic-block body, a depthwise-separable pair, an MLP, a LeNet-style
pool + 5x5 conv, an MBConv with a 5x5 depthwise, a squeeze-and-excitation block and one
attention head. Phase 1 writes ``experiments/configs/generality/<chain>.yaml`` (the cascade
space, TPE + XGBoost, no warm start, ``peak_limit`` a quarter of the untuned workspace, or the
untuned workspace where every intermediate is a vector that no tile shrinks) and runs ``autotune
run`` on it into ``results/generality/<chain>`` (skipped with ``--skip-tune``). Phase 2, in one
process: the tuned schedule (``best.json`` replayed), the untuned default and PyTorch eager
(channels_last, 2 threads) are checked against the reference and timed in turn each round; a
ratio is the median over rounds of the per-round ratio. Writes ``<output>/generality.md`` and
``.json``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import statistics
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_vs_baselines as bench  # sets the thread counts before numpy is imported
import generality_chains as chains
from thread_scaling import _median_ms, write_results

from autotune.errors import AutotuneError, PoolOverflowError
from autotune.lowering import lower
from autotune.memory import Pool
from autotune.schedule import Schedule, load_trace
from autotune.workloads import Workload, intermediate_bytes

REPO = bench.REPO
CONFIGS = REPO / "experiments" / "configs" / "generality"
RUNS = REPO / "results" / "generality"
WHOLE = ("se_block",)
"""Chains whose intermediates are all per-channel vectors (no row tile shrinks them): their limit is
the untuned workspace."""


def workload(name: str) -> Workload:
    c = chains.CHAINS[name]()
    return Workload(name, {}, c.func, c.reference, "", c.flops, intermediate_bytes(c.func), c.input_scales)


def limit(wl: Workload) -> int:
    return wl.intermediate_bytes if wl.name in WHOLE else wl.intermediate_bytes // 4


def write_config(name: str, trials: int) -> Path:
    wl = workload(name)
    CONFIGS.mkdir(parents=True, exist_ok=True)
    path = CONFIGS / f"{name}.yaml"
    path.write_text(
        f"# {chains.CHAINS[name].__doc__}\n"
        "# Written by experiments/generality.py: no per-chain knob, no warm start.\n"
        f"name: {name}\n"
        f"workload: {{path: ../../generality_chains.py:{name}}}\n"
        "memory:\n"
        "  pools: [{name: sram, size: 64MiB}]\n"
        f"  peak_limit: {limit(wl)}   # untuned workspace {wl.intermediate_bytes} B\n"
        f"search: {{space: cascade, trials: {trials}, sampler: tpe, cost_model: xgboost, seed: 0}}\n"
        "measure: {warmup: 2, repeats: 10, timeout: 60s, check: true}   # a limit includes the compile\n"
        "ray: {address: null, workers: 2}\n"
        f"output: ../../../results/generality/{name}\n",
        encoding="utf-8",
    )
    return path


def autotune_run(config: Path, out: Path) -> None:
    """``autotune run config --output out`` (resumed where ``out`` holds a trial log), in a child process."""
    cmd = [str(REPO / ".venv" / "bin" / "autotune"), "run", str(config), "--output", str(out)]
    if (out / "trials.jsonl").exists():
        cmd.append("--resume")
    print(f"tuning: {' '.join(cmd)}", flush=True)
    subprocess.run(cmd, check=False)


def tune(name: str, trials: int) -> None:
    autotune_run(write_config(name, trials), RUNS / name)


def _systems(name: str) -> tuple[Workload, list[bench.System], dict[str, Any]]:
    wl = workload(name)
    inputs = wl.make_inputs(0)
    refs = (wl.reference(*inputs),)
    pools = (Pool("sram", 64 << 20),)
    default = lower(wl.func, pools=pools)
    systems = [bench.numba_system("default", default, inputs, refs)]
    info: dict[str, Any] = {"limit": limit(wl), "untuned": default.plan.total_peak}
    best_path = RUNS / name / "best.json"
    if best_path.exists():
        best = json.loads(best_path.read_text(encoding="utf-8"))
        try:
            tuned = lower(Schedule.replay(wl.func, load_trace(str(best_path))).func, pools=pools)
            systems.insert(0, bench.numba_system("tuned", tuned, inputs, refs))
            info |= {"peak": tuned.plan.total_peak, "best trial": best["trial"], "knobs": best["knobs"]}
        except (AutotuneError, PoolOverflowError) as exc:
            info["error"] = f"replay: {exc}"
    else:
        info["error"] = f"{best_path} is missing"
    log = RUNS / name / "trials.jsonl"
    if log.exists():
        statuses = [json.loads(line).get("status") for line in log.read_text(encoding="utf-8").splitlines() if line.strip()]
        info["trials"] = {s: statuses.count(s) for s in sorted(set(statuses), key=str)}
    try:
        run = chains.torch_runner(name, inputs)
        out = run()
        got = out.permute(0, 2, 3, 1).numpy() if out.dim() == 4 else out.numpy()
        ok, err = bench.compare((got,), refs)
        systems.append(bench.System("torch", run if ok else None, None, "" if ok else f"WRONG {err:.3g}"))
    except ImportError:
        info["torch"] = "not installed"
    return wl, systems, info


def compare_chains(names: Sequence[str], rounds: int, min_ms: float) -> list[dict[str, Any]]:
    rows = []
    for name in names:
        wl, systems, info = _systems(name)
        ms: dict[str, list[float]] = {s.name: [] for s in systems if s.run is not None}
        for r in range(rounds):
            for s in systems[r % len(systems) :] + systems[: r % len(systems)]:
                if s.run is not None:
                    ms[s.name].append(_median_ms(s.run, min_ms))
        row: dict[str, Any] = {"chain": name, "gflop": wl.flops / 1e9, **info}
        for s, times in ms.items():
            row[f"{s} ms"] = statistics.median(times)
        for a, b in (("tuned", "torch"), ("tuned", "default")):
            if a in ms and b in ms:
                row[f"{a}/{b}"] = statistics.median(x / y for x, y in zip(ms[a], ms[b]))
        row["errors"] = {s.name: s.error for s in systems if s.error}
        rows.append(row)
        print(f"  {name}: {row}", flush=True)
    return rows


def _f(v: Any, fmt: str) -> str:
    return format(v, fmt) if isinstance(v, (int, float)) else "-"


def report(rows: list[dict[str, Any]], argv: Sequence[str], rounds: int, min_ms: float) -> list[str]:
    when = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    md = [
        "# Generality: chains that are not built-ins",
        "",
        f"`.venv/bin/python experiments/generality.py {' '.join(argv)}`, {when}. {bench._machine()}.",
        "",
        f"{rounds} rounds, in each every system timed in turn (the median of back-to-back calls over "
        f"{min_ms:g} ms); ratios are medians of per-round ratios. `peak`: the tuned schedule's workspace "
        "against the config's `peak_limit` and the untuned workspace.",
        "",
        "| chain | GFLOP | tuned ms | default ms | torch ms | tuned GFLOP/s | tuned / torch | tuned / default | peak B | limit B | untuned B | trials by status |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for r in rows:
        gflops = r["gflop"] / (r["tuned ms"] / 1e3) if "tuned ms" in r else None
        md.append(
            f"| {r['chain']} | {r['gflop']:.3f} | {_f(r.get('tuned ms'), '.3f')} | {_f(r.get('default ms'), '.3f')} "
            f"| {_f(r.get('torch ms'), '.3f')} | {_f(gflops, '.1f')} | {_f(r.get('tuned/torch'), '.2f')} "
            f"| {_f(r.get('tuned/default'), '.3f')} | {_f(r.get('peak'), ',')} | {r['limit']:,} | {r['untuned']:,} "
            f"| {', '.join(f'{n} {s}' for s, n in (r.get('trials') or {}).items()) or '-'} |"
        )
    md += ["", "Errors: " + ("; ".join(f"{r['chain']}: {r.get('error') or r['errors']}" for r in rows if r.get("error") or r["errors"]) or "none")]
    return md


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chains", nargs="+", choices=list(chains.CHAINS), default=list(chains.CHAINS))
    parser.add_argument("--trials", type=int, default=64)
    parser.add_argument("--skip-tune", action="store_true")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--min-ms", type=float, default=100.0)
    parser.add_argument("--output", type=Path, default=REPO / "results")
    args = parser.parse_args(argv)
    if not args.skip_tune:
        for name in args.chains:
            tune(name, args.trials)
    rows = compare_chains(args.chains, args.rounds, args.min_ms)
    write_results(args.output, "generality", report(rows, argv, args.rounds, args.min_ms), {"rows": rows})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
