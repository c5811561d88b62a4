"""Tune the first blocks of an ONNX model and compare them with onnxruntime and PyTorch on the same cut.

    .venv/bin/python experiments/onnx_blocks.py [--trials 64] [--size 96] [--rounds 7]
        [--run-dir out/onnx_blocks_experiment] [--reuse] [--output results]

1. Writes the model of ``examples/mobilenet_blocks.py`` (seed 0, ``--size`` square input) into
   ``--run-dir`` with the config ``examples/onnx_blocks.yaml`` and its space (cut ``input`` to
   ``block3/add``: the stem and three inverted bottlenecks; its peak limit and pools).
2. Tunes it for ``--trials`` trials on the Ray executor (``--reuse``: keep a finished run there).
3. In this process, each on 2 threads: the tuned schedule and the default (untuned) one, built as
   numba kernels; onnxruntime running the cut (all graph optimizations, 2 intra-op threads);
   PyTorch eager running the cut's nodes with each BatchNormalization folded into its convolution,
   NCHW and channels_last. Each is checked against the workload's reference (the model) before it
   is timed; timing rounds rotate the order (``bench_vs_baselines.time_rounds``).
4. Writes ``<output>/onnx_blocks.md`` and ``onnx_blocks.json``: latencies, ratios, the tuned
   workspace peak against the untuned one, the trials' statuses, the CPU.
"""

from __future__ import annotations

import argparse
import json
import os
import runpy
import shlex
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "experiments"))
import bench_vs_baselines as bench  # noqa: E402  (sets the thread counts before numpy is imported)
import numpy as np  # noqa: E402

from autotune.config import load_config, load_workload  # noqa: E402
from autotune.lowering import DEFAULT_POOLS, lower  # noqa: E402
from autotune.memory import Pool  # noqa: E402
from autotune.schedule import Schedule  # noqa: E402
from autotune.search.tuner import tune  # noqa: E402
from autotune.workloads import Workload  # noqa: E402

EXAMPLES = REPO / "examples"
SYSTEMS = ("autotune", "autotune-default", "onnxruntime", "torch-eager", "torch-eager-channels_last")


def prepare(run_dir: Path, size: int) -> Path:
    """The model, config and space in ``run_dir``; returns the config."""
    run_dir.mkdir(parents=True, exist_ok=True)
    script = runpy.run_path(str(EXAMPLES / "mobilenet_blocks.py"))
    import onnx

    onnx.save(script["mobilenet_blocks"](size, 0), str(run_dir / "mobilenet_blocks.onnx"))
    for name in ("onnx_blocks.yaml", "onnx_blocks_space.yaml"):
        shutil.copy(EXAMPLES / name, run_dir / name)
    return run_dir / "onnx_blocks.yaml"


def run_tuning(config: Path, trials: int, reuse: bool) -> tuple[Path, float | None]:
    out = config.parent / "run"
    if reuse and (out / "best.json").exists():
        return out, None
    if out.exists():
        shutil.rmtree(out)
    cfg = load_config(config, {"trials": trials, "output": str(out)})
    start = time.perf_counter()
    tune(cfg, progress=False)
    return out, time.perf_counter() - start


def autotune_systems(
    wl: Workload, best: dict[str, Any], inputs: tuple[np.ndarray, ...], refs: tuple[np.ndarray, ...]
) -> list[bench.System]:
    pools = tuple(Pool(p["name"], p["size"]) for p in best["pools"])
    tuned = lower(
        Schedule.replay(wl.func, json.dumps(best["trace"])).func, pools=pools, planner=best["planner"]
    )
    default = lower(
        wl.func, pools=DEFAULT_POOLS, planner=best["planner"]
    )  # the untiled chain overflows the pools
    return [
        bench.numba_system("autotune", tuned, inputs, refs),
        bench.numba_system("autotune-default", default, inputs, refs),
    ]


def onnxruntime_system(model_path: Path, x_nchw: np.ndarray, refs: tuple[np.ndarray, ...]) -> bench.System:
    try:
        import onnxruntime as ort
    except ImportError:
        return bench.System("onnxruntime", None, None, "onnxruntime is not installed")
    from autotune.workloads.onnx_import.graph import cut, fix_batch, load_model

    piece = cut(fix_batch(load_model(model_path), 1), "input", "block3/add")
    options = ort.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = bench.THREADS, 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    session = ort.InferenceSession(
        piece.submodel().SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    feed = {piece.start: x_nchw}
    system = bench._checked(
        "onnxruntime", lambda: session.run(None, feed)[0], lambda y: (y.transpose(0, 2, 3, 1),), refs, 0
    )
    system.workspace, system.note = (
        None,
        f"onnxruntime {ort.__version__}, CPUExecutionProvider, ORT_ENABLE_ALL",
    )
    return system


def torch_function(torch: Any, model_path: Path) -> tuple[Callable[[Any], Any], dict[str, Any]]:
    """The cut's nodes as torch calls, each BatchNormalization folded into the Conv before it."""
    from onnx import helper

    from autotune.workloads.onnx_import.graph import cut, fix_batch, load_model

    F = torch.nn.functional
    piece = cut(fix_batch(load_model(model_path), 1), "input", "block3/add")
    consts = {k: np.asarray(v, np.float32) for k, v in piece.constants.items()}
    bns = {n.input[0]: n for n in piece.nodes if n.op_type == "BatchNormalization"}
    steps: list[tuple[str, tuple[str, ...], str, dict[str, Any]]] = []
    weights: dict[str, Any] = {}
    for node in piece.nodes:
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        if node.op_type == "Conv":
            w, b = consts[node.input[1]], consts[node.input[2]] if len(node.input) > 2 else None
            out = node.output[0]
            bn = bns.get(out)
            if bn is not None:
                g, beta, mean, var = (consts[i].astype(np.float64) for i in bn.input[1:5])
                eps = next((a.f for a in bn.attribute if a.name == "epsilon"), 1e-5)
                scale = g / np.sqrt(var + eps)
                w = (w * scale[:, None, None, None]).astype(np.float32)
                b = (((0.0 if b is None else b) - mean) * scale + beta).astype(np.float32)
                out = bn.output[0]
            weights[f"{out}.w"], weights[f"{out}.b"] = torch.from_numpy(w), torch.from_numpy(np.asarray(b))
            pad = attrs.get("pads", [0, 0, 0, 0])[:2]
            conv = {
                "stride": tuple(attrs.get("strides", (1, 1))),
                "padding": tuple(pad),
                "groups": attrs.get("group", 1),
            }
            steps.append(("conv", (node.input[0],), out, conv))
        elif node.op_type == "BatchNormalization":
            continue
        elif node.op_type == "Clip":
            steps.append(
                (
                    "clip",
                    (node.input[0],),
                    node.output[0],
                    {"lo": float(consts[node.input[1]]), "hi": float(consts[node.input[2]])},
                )
            )
        elif node.op_type == "Add":
            steps.append(("add", tuple(node.input), node.output[0], {}))
        else:
            raise ValueError(f"torch_function: no torch call for {node.op_type}")

    def run(x: Any) -> Any:
        values = {piece.start: x}
        for kind, ins, out, kw in steps:
            if kind == "conv":
                values[out] = F.conv2d(values[ins[0]], weights[f"{out}.w"], weights[f"{out}.b"], **kw)
            elif kind == "clip":
                values[out] = values[ins[0]].clamp(kw["lo"], kw["hi"])
            else:
                values[out] = values[ins[0]] + values[ins[1]]
        return values[piece.end]

    return run, weights


def torch_systems(model_path: Path, x_nchw: np.ndarray, refs: tuple[np.ndarray, ...]) -> list[bench.System]:
    try:
        import torch
    except ImportError:
        return [bench.System(n, None, None, "torch is not installed") for n in SYSTEMS[3:]]
    torch.set_num_threads(bench.THREADS)
    fn, weights = torch_function(torch, model_path)
    out = []
    for name, fmt in (
        ("torch-eager", torch.contiguous_format),
        ("torch-eager-channels_last", torch.channels_last),
    ):
        for key, w in weights.items():
            weights[key] = w.contiguous(memory_format=fmt) if w.dim() == 4 else w
        x = torch.from_numpy(x_nchw).contiguous(memory_format=fmt)

        def call(x: Any = x) -> Any:
            with torch.inference_mode():
                return fn(x)

        system = bench._checked(name, call, lambda y: (y.permute(0, 2, 3, 1).contiguous().numpy(),), refs, 0)
        system.workspace, system.note = None, f"torch {torch.__version__}, BatchNormalization folded"
        out.append(system)
    return out


def trial_counts(run_dir: Path) -> dict[str, int]:
    counts: dict[str, int] = {}
    for line in (run_dir / "trials.jsonl").read_text(encoding="utf-8").splitlines():
        status = json.loads(line)["status"]
        counts[status] = counts.get(status, 0) + 1
    return counts


def report(
    args: argparse.Namespace,
    wl: Workload,
    rows: list[dict[str, Any]],
    best: dict[str, Any],
    counts: dict[str, int],
    tune_s: float | None,
    load: tuple[float, float],
) -> str:
    at = {r["system"]: r for r in rows}
    pools = ", ".join(f"{p['name']} {p['size']:,} B" for p in best["pools"])
    auto, default = at["autotune"], at["autotune-default"]
    lines = [
        "# The first blocks of an ONNX model: autotune against onnxruntime and PyTorch",
        "",
        f"Command: `.venv/bin/python experiments/onnx_blocks.py {' '.join(shlex.quote(a) for a in sys.argv[1:])}`  ",
        f"Machine: {bench._machine()}  ",
        f"Load average (1 min): {load[0]:.2f} at the start of the timing, {load[1]:.2f} at its end.",
        "",
        f"Model: `examples/mobilenet_blocks.py` (seed 0), input 1x3x{args.size}x{args.size}, cut `input` -> "
        f"`block3/add`: {wl.description}. {wl.flops / 1e6:.1f} MFLOP.  ",
        f"Config: `examples/onnx_blocks.yaml` with {args.trials} trials: pools "
        f"{pools}, peak limit {best['peak_limit']:,} B, "
        f"space `examples/onnx_blocks_space.yaml`. Trials: "
        + ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
        + (f"; tuning took {tune_s:.0f} s." if tune_s is not None else " (a run reused)."),
        "",
        bench.table(rows),
        "",
        f"Workspace: the tuned schedule peaks at {auto['workspace_bytes']:,} B, the untuned chain at "
        f"{default['workspace_bytes']:,} B (untuned / tuned {default['workspace_bytes'] / auto['workspace_bytes']:.2f}); "
        "onnxruntime's and PyTorch's are not measured (`-`).  ",
        f"Best trial {best['trial']}: " + ", ".join(f"{k}={v}" for k, v in best["knobs"].items()) + ".",
        "",
        "Every system was checked against the workload's reference (the cut run by onnxruntime, NHWC at the "
        "edges) before it was timed. Ratios are medians over rounds of per-round ratios.",
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=64)
    parser.add_argument("--size", type=int, default=96)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--run-dir", default=str(REPO / "out" / "onnx_blocks_experiment"))
    parser.add_argument("--reuse", action="store_true", help="keep a finished run in --run-dir")
    parser.add_argument("--output", default=str(REPO / "results"))
    args = parser.parse_args()
    run_dir = Path(args.run_dir).resolve()
    config = prepare(run_dir, args.size)
    out, tune_s = run_tuning(config, args.trials, args.reuse)
    best = json.loads((out / "best.json").read_text(encoding="utf-8"))
    wl = load_workload(load_config(config).workload)
    inputs = wl.make_inputs(0)
    refs = wl.reference(*inputs)
    x_nchw = np.ascontiguousarray(inputs[0].transpose(0, 3, 1, 2))
    systems = [
        *autotune_systems(wl, best, inputs, refs),
        onnxruntime_system(run_dir / "mobilenet_blocks.onnx", x_nchw, refs),
        *torch_systems(run_dir / "mobilenet_blocks.onnx", x_nchw, refs),
    ]
    load_start = os.getloadavg()[0]
    bench.time_rounds(systems, args.rounds, args.repeats, 5000.0, 0.25, min_ms=100.0, warmup_ms=20.0)
    load_end = os.getloadavg()[0]
    bench.SYSTEMS = SYSTEMS  # summarize orders rows by this tuple
    rows = bench.summarize(wl, systems)
    text = report(args, wl, rows, best, trial_counts(out), tune_s, (load_start, load_end))
    output = Path(args.output)
    output.mkdir(parents=True, exist_ok=True)
    (output / "onnx_blocks.md").write_text(text, encoding="utf-8")
    record = {
        "rows": rows,
        "best": {k: best[k] for k in ("trial", "knobs", "pools", "peak_limit", "figures")},
        "trials": trial_counts(out),
        "tune_s": tune_s,
        "machine": bench._machine(),
    }
    (output / "onnx_blocks.json").write_text(
        json.dumps(record, indent=1, default=str) + "\n", encoding="utf-8"
    )
    print(text)


if __name__ == "__main__":
    main()
