"""What a change to the code generator does to the seconds a kernel takes to compile and to run.

    .venv/bin/python experiments/compile_time.py --before /tmp/ct/before [--after .] [--rounds 15]
        [--trials RUN_DIR:N[,N...] | --trials RUN_DIR:serial ...] [--only-trials]

For each schedule below (the stored and the tuned bests of bottleneck 112x112, pool_chain and
matmul; with ``--trials``, also trials of a tuning run's log, with its configuration's workload,
a registered one or a chain of a file, and pools),
replays its trace, lowers it and builds + compiles its kernel in one fresh process per
code version, with an empty kernel cache (a ``tempfile.TemporaryDirectory``: numba's disk cache
beside the modules is empty too), as a tune's worker does; the seconds are wall seconds of
:func:`autotune.codegen.build` (writes and imports the modules, which compiles the outlined nests)
plus ``Kernel.compile`` (the entry function). ``--before`` and ``--after`` are source trees (``git
worktree add``), each put first on ``PYTHONPATH`` of its process.

Then one process (the ``--after`` code) times the two versions' kernels against each other: each
version's standalone kernel text (``Kernel.source``) imported as a module, called on the same
inputs, outputs and storage (the lowering, hence the storage, is the same in both versions),
``--rounds`` rounds of 40 calls each, the versions in turn within a round; the figure is the median
over rounds of after/before, and both outputs are checked against the workload's reference.
Writes ``results/compile_time.md`` with the figures of this one run.
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
CONFIGS = REPO / "experiments" / "configs" / "builtins_64"
SCHEDULES = (
    ("bottleneck, stored best", "bottleneck_evolutionary.yaml", "results/bottleneck/best.json"),
    ("bottleneck, tuned seed 0", "bottleneck_evolutionary.yaml", "results/builtins_64/bottleneck_evolutionary/best.json"),
    ("bottleneck, tuned seed 1", "bottleneck_evolutionary.yaml", "results/builtins_64/bottleneck_evolutionary_seed1/best.json"),
    ("bottleneck, tuned seed 2", "bottleneck_evolutionary.yaml", "results/builtins_64/bottleneck_evolutionary_seed2/best.json"),
    ("bottleneck, tuned seed 3", "bottleneck_evolutionary.yaml", "results/builtins_64/bottleneck_evolutionary_seed3/best.json"),
    ("pool_chain, stored best", "pool_chain.yaml", "results/pool_chain/best.json"),
    ("matmul, stored best", "matmul.yaml", "results/matmul/best.json"),
)
CALLS = 40


def builtin_schedules() -> list[dict[str, Any]]:
    """:data:`SCHEDULES`, each as the fields :func:`_lowered` reads."""
    from autotune.config import load_config

    out = []
    for label, config, best_path in SCHEDULES:
        cfg = load_config(CONFIGS / config)
        best = json.loads((REPO / best_path).read_text(encoding="utf-8"))
        out.append({
            "label": label,
            "workload": cfg.workload.name,
            "args": dict(cfg.workload.args),
            "pools": [[p.name, p.size] for p in cfg.memory.pools],
            "planner": cfg.memory.planner,
            "seed": cfg.search.seed,
            "trace": json.dumps(best["trace"]),
        })
    return out


def logged_schedules(spec: str) -> list[dict[str, Any]]:
    """The trials ``spec`` names, ``RUN_DIR:N[,N...]`` (a run directory with ``run.jsonl`` and
    ``trials.jsonl``), or ``RUN_DIR:serial`` (its measured trials with no parallel loop), each
    with the workload, pools, planner and seed of the run's configuration."""
    run_dir, _, which = spec.rpartition(":")
    root = Path(run_dir) if Path(run_dir).is_absolute() else REPO / run_dir
    with (root / "run.jsonl").open(encoding="utf-8") as f:
        config = json.loads(f.readline())["session"]["config"]
    args = {k.removeprefix("workload.args."): v for k, v in config.items() if k.startswith("workload.args.")}
    rows = [json.loads(line) for line in (root / "trials.jsonl").read_text(encoding="utf-8").splitlines()]
    if which == "serial":
        chosen = [r for r in rows if r["status"] == "ok" and r["knobs"].get("parallel", "none") == "none"]
    else:
        numbers = {int(n) for n in which.split(",")}
        chosen = [r for r in rows if r["trial"] in numbers]
    name = config.get("workload.name")
    path = None if name is not None else _in_repo(config["workload.path"])
    return [
        {
            "label": f"{name or path.rpartition(':')[2]}, {root.name} trial {r['trial']}",
            "workload": name,
            "path": path,
            "args": args,
            "pools": [[p["name"], p["size"]] for p in config["memory.pools"]],
            "planner": config["memory.planner"],
            "seed": config.get("search.seed", 0),
            "trace": r["trace"],
        }
        for r in chosen
    ]


def _in_repo(spec: str) -> str:
    """A workload file's ``PATH:function`` as a run's log names it (where that run's checkout
    was), at the same place in this repository when the logged file is not there."""
    file, sep, function = spec.rpartition(":")
    logged = Path(file)
    if logged.is_file():
        return spec
    for k in range(1, len(logged.parts)):
        here = REPO.joinpath(*logged.parts[k:])
        if here.is_file():
            return f"{here}{sep}{function}"
    raise SystemExit(f"compile_time: the workload file {file} of the run's log is not in {REPO} either")


def _lowered(schedule: dict[str, Any]) -> tuple[Any, Any]:
    """The workload of ``schedule`` (a registered name, or a file's ``PATH:function``) and the
    lowering of its trace."""
    from autotune.lowering import lower
    from autotune.measure.task import load_workload_file
    from autotune.memory import Pool
    from autotune.schedule import Schedule
    from autotune.workloads import get

    if schedule.get("path"):
        wl = load_workload_file(schedule["path"], schedule["args"], check=True)
    else:
        wl = get(schedule["workload"], **schedule["args"])
    pools = tuple(Pool(name, size) for name, size in schedule["pools"])
    sch = Schedule.replay(wl.func, schedule["trace"])
    return wl, lower(sch.func, pools=pools, planner=schedule["planner"], seed=schedule["seed"])


def child(out_dir: Path, schedules: list[dict[str, Any]]) -> dict[str, Any]:
    """Build and compile every schedule with the code of this process; write each standalone text."""
    import autotune
    from autotune.codegen import build

    figures = []
    with tempfile.TemporaryDirectory() as cache:
        for k, schedule in enumerate(schedules):
            _, lowered = _lowered(schedule)
            start = time.perf_counter()
            kernel = build(lowered.func, lowered.plan, cache_dir=cache)
            kernel.compile()
            seconds = time.perf_counter() - start
            (out_dir / f"kernel_{k}.py").write_text(kernel.source, encoding="utf-8")
            figures.append({"schedule": schedule["label"], "seconds": round(seconds, 2), "lines": kernel.source.count("\n")})
    return {"autotune": str(Path(autotune.__file__).parent), "kernels": figures}


def _standalone(path: Path, kernel: Any, args: tuple[Any, ...]) -> Any:
    """The entry function of the standalone kernel text at ``path``, compiled as ``build`` and
    ``Kernel.compile`` compile ``kernel`` (the nests with their vectoriser when the module is
    imported, the entry function with the kernel's) and run once on ``args``."""
    from autotune.codegen.build import _import, _vectorizer

    source = kernel.kernel_source
    module = _import(f"compile_time_{path.parent.name}_{path.stem}", path, source.outlined_vectorizer or "loop")
    fn = getattr(module, source.name)
    with _vectorizer(source.vectorizer):
        fn(*args)
    return fn


def timing(dirs: dict[str, Path], rounds: int, schedules: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Time the versions' kernels against each other, schedule by schedule (see the module's text)."""
    import numpy as np

    from autotune.codegen import build
    from autotune.measure.run import reference_outputs

    rows = []
    with tempfile.TemporaryDirectory() as cache:
        for k, schedule in enumerate(schedules):
            wl, lowered = _lowered(schedule)
            kernel = build(lowered.func, lowered.plan, cache_dir=cache)  # storage and the entry's name
            inputs = wl.make_inputs(0)
            want = reference_outputs(wl, inputs)  # a tuple: the reference may return one array
            runs: dict[str, Any] = {}
            errors: dict[str, float] = {}
            for version, d in dirs.items():
                outs = [np.full(b.const_shape(), np.nan, b.dtype) for b in wl.func.outputs]
                fn = _standalone(d / f"kernel_{k}.py", kernel, (*inputs, *outs, *kernel.storage))
                errors[version] = max(float(np.max(np.abs(o - w))) for o, w in zip(outs, want))
                runs[version] = (fn, outs)
            ms: dict[str, list[float]] = {v: [] for v in runs}
            for _ in range(rounds):
                for version, (fn, outs) in runs.items():
                    start = time.perf_counter()
                    for _ in range(CALLS):
                        fn(*inputs, *outs, *kernel.storage)
                    ms[version].append((time.perf_counter() - start) / CALLS * 1e3)
            ratios = sorted(a / b for a, b in zip(ms["after"], ms["before"]))
            rows.append({
                "schedule": schedule["label"],
                "before_ms": sorted(ms["before"])[rounds // 2],
                "after_ms": sorted(ms["after"])[rounds // 2],
                "ratio": ratios[rounds // 2],
                "max_abs_err": errors,
            })
    return rows


def run_child(tree: Path, out_dir: Path, schedules_file: Path) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    env.pop("AUTOTUNE_CACHE_DIR", None)
    out = subprocess.run(
        [sys.executable, __file__, "--child", str(out_dir), "--schedules-file", str(schedules_file)], env=env,
        cwd=tree, check=True, capture_output=True, text=True,
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def report(builds: dict[str, dict[str, Any]], times: list[dict[str, Any]], command: str, rounds: int) -> str:
    from autotune.search.records import machine

    host = machine()
    lines = [
        "# Compile and run seconds of generated kernels, before and after a code generator change",
        "",
        f"Host: {host['cpu']} (LLVM cpu `{host['llvm_cpu']}`, {'AVX-512' if 'avx512f' in host['isa'] else 'AVX2'}), "
        f"{host['cores']} cores; written by "
        "`experiments/compile_time.py` (its docstring says how each figure is made). One run:",
        "",
        f"    {command}",
        "",
        f"`before`: `{builds['before']['autotune']}`; `after`: `{builds['after']['autotune']}`.",
        "",
        "| schedule | kernel lines before / after | build + compile s before | after | after/before "
        f"| run ms before | after | after/before (median of {rounds} rounds) | max abs err before / after |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    total_b = total_a = 0.0
    for kb, ka, t in zip(builds["before"]["kernels"], builds["after"]["kernels"], times):
        total_b += kb["seconds"]
        total_a += ka["seconds"]
        err = t["max_abs_err"]
        lines.append(
            f"| {t['schedule']} | {kb['lines']} / {ka['lines']} | {kb['seconds']:.1f} | {ka['seconds']:.1f} | "
            f"{ka['seconds'] / kb['seconds']:.2f} | {t['before_ms']:.4f} | {t['after_ms']:.4f} | {t['ratio']:.3f} | "
            f"{err['before']:.1e} / {err['after']:.1e} |"
        )
    lines += ["", f"Build + compile, all schedules: {total_b:.1f} s before, {total_a:.1f} s after ({total_a / total_b:.2f})."]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child", type=Path, help="build with this process's code, write kernels here; print JSON")
    parser.add_argument("--schedules-file", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--before", type=Path)
    parser.add_argument("--after", type=Path, default=REPO)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument(
        "--trials", action="append", default=[], metavar="RUN_DIR:N[,N...]|RUN_DIR:serial",
        help="also these trials of a run (repeatable); 'serial': its measured trials without a parallel loop",
    )
    parser.add_argument("--only-trials", action="store_true", help="leave out the stored bests (SCHEDULES)")
    parser.add_argument("--output", type=Path, default=REPO / "results" / "compile_time.md")
    args = parser.parse_args()
    if args.child is not None:
        schedules = json.loads(args.schedules_file.read_text(encoding="utf-8"))
        print(json.dumps(child(args.child, schedules)))
        return 0
    if args.before is None:
        parser.error("--before (a source tree of the code to compare with) is required")
    schedules = [] if args.only_trials else builtin_schedules()
    for spec in args.trials:
        schedules += logged_schedules(spec)
    with tempfile.TemporaryDirectory() as work:
        schedules_file = Path(work) / "schedules.json"
        schedules_file.write_text(json.dumps(schedules), encoding="utf-8")
        dirs = {v: Path(work) / v for v in ("before", "after")}
        builds = {}
        for version, tree in (("before", args.before), ("after", args.after)):
            dirs[version].mkdir()
            builds[version] = run_child(tree.resolve(), dirs[version], schedules_file)
            print(version, builds[version], flush=True)
        times = timing(dirs, args.rounds, schedules)
    text = report(builds, times, " ".join([".venv/bin/python experiments/compile_time.py", *sys.argv[1:]]), args.rounds)
    args.output.write_text(text, encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
