"""What building outlined nests as shared, content-addressed modules saves in a tune's worker.

    .venv/bin/python experiments/nest_modules.py --before /tmp/nm/before --after /tmp/nm/after [--trials 12]

Takes the first ``--trials`` ok trials of ``results/builtins_64/bottleneck_evolutionary/trials.jsonl``
in log order (bottleneck 112x112, the run's config: pools, planner, seed), and in one fresh
process per code version, with an empty kernel cache (a ``tempfile.TemporaryDirectory``, so
numba's disk cache beside the modules is empty too), replays each trace, lowers it, then builds
(:func:`autotune.codegen.build`: writes and imports the modules, which compiles the outlined nests)
and compiles the kernel (``Kernel.compile``), one after the other as a worker would, and runs it
once against the workload's reference. The code is the ``autotune`` first on ``PYTHONPATH``:
``--before`` and ``--after`` are source trees (``git worktree add``), each run in its own process.

Measured per version: seconds of build + compile (wall, summed over the kernels; replaying and
lowering are not counted), the outlined nests the kernels call, and for the version with nest
modules how many distinct modules they are (the rest are imports this process skipped). Writes
``results/nest_modules.md`` with the ratios of this one run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
TRIALS = REPO / "results" / "builtins_64" / "bottleneck_evolutionary" / "trials.jsonl"
CONFIG = REPO / "experiments" / "configs" / "builtins_64" / "bottleneck_evolutionary.yaml"
HOST = "AMD EPYC (znver5), AVX-512, 2 cores (shared)"


def child(trials: int) -> dict[str, Any]:
    """Build and compile the first ``trials`` ok trials in this process; figures per kernel."""
    import numpy as np

    import autotune
    from autotune.codegen import build
    from autotune.config import load_config
    from autotune.lowering import lower
    from autotune.memory import Pool
    from autotune.schedule import Schedule
    from autotune.workloads import get

    cfg = load_config(CONFIG)
    wl = get(cfg.workload.name, **dict(cfg.workload.args))
    pools = tuple(Pool(p.name, p.size) for p in cfg.memory.pools)
    rows = [json.loads(line) for line in TRIALS.read_text(encoding="utf-8").splitlines() if line.strip()]
    ok = [r for r in rows if r["status"] == "ok"][:trials]
    inputs = wl.make_inputs(0)
    want = wl.reference(*inputs)
    kernels: list[dict[str, Any]] = []
    seen: set[str] = set()
    with tempfile.TemporaryDirectory() as cache:
        for row in ok:
            lowered = lower(Schedule.replay(wl.func, row["trace"]).func, pools=pools, planner=cfg.memory.planner, seed=cfg.search.seed)
            t0 = time.perf_counter()
            kernel = build(lowered.func, lowered.plan, cache_dir=cache)
            t1 = time.perf_counter()
            kernel.compile()
            t2 = time.perf_counter()
            outputs = [np.full(b.const_shape(), np.nan, b.dtype) for b in wl.func.outputs]
            kernel(*inputs, *outputs)
            err = max(float(np.max(np.abs(o - w))) for o, w in zip(outputs, want))
            paths = [str(p) for p in getattr(kernel, "nest_paths", ())]
            new = [p for p in paths if p not in seen]
            seen.update(paths)
            kernels.append({
                "trial": row["trial"],
                "build_s": round(t1 - t0, 3),
                "compile_s": round(t2 - t1, 3),
                "compile_seconds": round(kernel.compile_seconds or 0.0, 3),
                "outlined": kernel.source.count("\n# outlined: "),
                "nest_modules_new": len(new),
                "max_abs_err": err,
            })
    return {"autotune": str(Path(autotune.__file__).parent), "kernels": kernels}


def run_version(tree: Path, trials: int) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    env.pop("AUTOTUNE_CACHE_DIR", None)
    out = subprocess.run(
        [sys.executable, __file__, "--child", "--trials", str(trials)], env=env, cwd=tree, check=True,
        capture_output=True, text=True,
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def report(before: dict[str, Any], after: dict[str, Any], trials: int, command: str) -> str:
    def total(run: dict[str, Any], key: str) -> float:
        return sum(k[key] for k in run["kernels"])

    b, a = total(before, "build_s") + total(before, "compile_s"), total(after, "build_s") + total(after, "compile_s")
    outlined = int(total(after, "outlined"))
    modules = int(total(after, "nest_modules_new"))
    lines = [
        "# Outlined nests as shared modules: build + compile seconds of a tune's kernels",
        "",
        f"Host: {HOST}. One run, {trials} kernels: the first {trials} ok trials of "
        "`results/builtins_64/bottleneck_evolutionary/trials.jsonl` (bottleneck 112x112) in log order, "
        "built and compiled one after the other in one fresh process per version, empty kernel and numba "
        "caches. `before`: every kernel module defines its outlined nests (compiled when it is imported); "
        "`after`: each nest is a content-addressed module, imported once per process.",
        "",
        f"    {command}",
        "",
        "| | before | after | after/before |",
        "| --- | --- | --- | --- |",
        f"| build s (write + import: compiles the nests) | {total(before, 'build_s'):.1f} | {total(after, 'build_s'):.1f} | "
        f"{total(after, 'build_s') / total(before, 'build_s'):.2f} |",
        f"| compile s (the kernel, nests linked in) | {total(before, 'compile_s'):.1f} | {total(after, 'compile_s'):.1f} | "
        f"{total(after, 'compile_s') / total(before, 'compile_s'):.2f} |",
        f"| build + compile s | {b:.1f} | {a:.1f} | {a / b:.2f} |",
        f"| outlined nests called | {int(total(before, 'outlined'))} | {outlined} | |",
        f"| nest modules compiled | | {modules} (shared: {outlined - modules} calls) | |",
        "",
        "Per kernel (trial: build s + compile s before -> after; new nest modules after; max abs error after):",
        "",
        "| trial | before s | after s | new nest modules | max abs err |",
        "| --- | --- | --- | --- | --- |",
    ]
    for kb, ka in zip(before["kernels"], after["kernels"]):
        lines.append(
            f"| {ka['trial']} | {kb['build_s'] + kb['compile_s']:.1f} | {ka['build_s'] + ka['compile_s']:.1f} | "
            f"{ka['nest_modules_new']} of {ka['outlined']} | {ka['max_abs_err']:.1e} |"
        )
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child", action="store_true", help="build in this process; print JSON")
    parser.add_argument("--trials", type=int, default=12)
    parser.add_argument("--before", type=Path)
    parser.add_argument("--after", type=Path)
    parser.add_argument("--output", type=Path, default=REPO / "results" / "nest_modules.md")
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.trials)))
        return 0
    if args.before is None or args.after is None:
        parser.error("--before and --after (source trees) are required")
    runs = {}
    for label, tree in (("before", args.before), ("after", args.after)):
        runs[label] = run_version(tree.resolve(), args.trials)
        took = sum(k["build_s"] + k["compile_s"] for k in runs[label]["kernels"])
        print(f"{label}: {runs[label]['autotune']}: build + compile {took:.1f} s", flush=True)
    command = f".venv/bin/python experiments/nest_modules.py --before {args.before} --after {args.after} --trials {args.trials}"
    text = report(runs["before"], runs["after"], args.trials, command)
    args.output.write_text(text, encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
