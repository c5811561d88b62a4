"""Dot-product register tiles (``dot_<stage>``) against channel tiles over packed weights, on chains
whose operands are contiguous along the reduction.

    .venv/bin/python experiments/dot_tiles.py [--chains mlp attention] [--rounds 5] [--min-ms 100]
        [--output results]

Each chain is one of experiments/generality_chains.py, scheduled in the rules' space (``cascade``)
from the knobs of its tuned schedule (``results/generality/<chain>/best.json``, 64 trials; the
``tuned`` row) with the knobs of each variant put over them:

- ``no tile``: every ``regtile_<stage>`` 0 (a dot product per output, vectorised along k);
- ``channels RxC``: a register tile of R rows by C channels vectorised along the channels, the
  weight copied channels-last per block of channels (``pack_<stage>: block``), for every row tile;
- ``dot RxC``: R rows by C channels vectorised along the reduction (``dot_<stage>: C``), no copy.

Every variant keeps the chain's ``peak_limit`` (``experiments/configs/generality/<chain>.yaml``;
a variant over it is reported, not timed), is checked against the numpy reference, and is timed
with PyTorch eager (2 threads) in turn each round (the median of back-to-back calls over
``--min-ms``); ``/ torch`` is the median over rounds of the per-round ratio. Writes
``<output>/dot_tiles.md`` and ``.json``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_vs_baselines as bench  # sets the thread counts before numpy is imported
import generality_chains as chains
import yaml
from generality import RUNS, workload
from thread_scaling import _median_ms, write_results

from autotune.codegen import build
from autotune.config import SPACES_DIR
from autotune.lowering import lower
from autotune.measure import compare, empty_outputs
from autotune.memory import Pool
from autotune.search.space import load_space

REPO = bench.REPO
SPACE = SPACES_DIR / "cascade.yaml"


def variants(stages: Sequence[str], tuned: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The knob sets to compare: the tuned schedule's, then each variant put over them."""
    out: dict[str, dict[str, Any]] = {"tuned": dict(tuned), "no tile": {f"regtile_{s}": 0 for s in stages}}
    for rows, channels in ((4, 16), (8, 16)):
        out[f"channels {rows}x{channels}"] = {
            k: v
            for s in stages
            for k, v in {
                f"regtile_{s}": rows,
                f"dot_{s}": 0,
                f"chblock_{s}": channels,
                f"pack_{s}": "block",
            }.items()
        }
    for rows, channels in ((2, 8), (4, 4), (4, 2), (8, 2)):
        out[f"dot {rows}x{channels}"] = {
            k: v for s in stages for k, v in {f"regtile_{s}": rows, f"dot_{s}": channels}.items()
        }
    return out


def measure(name: str, rounds: int, min_ms: float) -> dict[str, Any]:
    wl = workload(name)
    config = yaml.safe_load((REPO / "experiments" / "configs" / "generality" / f"{name}.yaml").read_text())
    peak_limit = int(config["memory"]["peak_limit"])
    pools = (Pool("sram", 64 << 20),)
    space = load_space(SPACE, wl, pools)
    names = {k.name for k in space.knobs}
    stages = sorted(n.removeprefix("dot_") for n in names if n.startswith("dot_"))
    tuned = json.loads((RUNS / name / "best.json").read_text(encoding="utf-8"))["knobs"]
    inputs = wl.make_inputs(0)
    refs = (wl.reference(*inputs),)
    systems: list[bench.System] = []
    rows: dict[str, dict[str, Any]] = {}
    for label, knobs in variants(stages, tuned).items():
        values = space.default() | tuned | {k: v for k, v in knobs.items() if k in names}
        start = time.perf_counter()
        lowered = lower(space.apply(wl.func, values).func, pools=pools)
        row: dict[str, Any] = {"peak B": lowered.plan.total_peak, "knobs": space.active_values(values)}
        rows[label] = row
        if lowered.plan.total_peak > peak_limit:
            row["error"] = f"peak {lowered.plan.total_peak} B over the limit {peak_limit} B"
            continue
        kernel = build(lowered.func, lowered.plan)
        outputs = empty_outputs(lowered.func)
        kernel(*inputs, *outputs)
        row["build s"] = time.perf_counter() - start
        ok, err = compare(tuple(outputs), refs)
        if not ok:
            row["error"] = f"WRONG max abs error {err:.3g}"
            continue
        systems.append(bench.System(label, lambda k=kernel, o=outputs: k(*inputs, *o), None, ""))
    run = chains.torch_runner(name, inputs)
    systems.append(bench.System("torch", run, None, ""))
    ms: dict[str, list[float]] = {s.name: [] for s in systems}
    for r in range(rounds):
        for s in systems[r % len(systems) :] + systems[: r % len(systems)]:
            ms[s.name].append(_median_ms(s.run, min_ms))
    for label, times in ms.items():
        row = rows.setdefault(label, {})
        row["ms"] = statistics.median(times)
        row["GFLOP/s"] = wl.flops / row["ms"] / 1e6
        row["/ torch"] = statistics.median(a / b for a, b in zip(times, ms["torch"]))
    return {"chain": name, "gflop": wl.flops / 1e9, "peak_limit": peak_limit, "rows": rows}


def report(results: list[dict[str, Any]], argv: Sequence[str]) -> list[str]:
    md = [
        "# Dot-product register tiles against channel tiles over packed weights",
        "",
        f"`.venv/bin/python experiments/dot_tiles.py {' '.join(argv)}`, "
        f"{dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC. {bench._machine()}.",
        "",
        "Each variant's knobs are put over the chain's tuned schedule (`results/generality/<chain>/best.json`);"
        " `/ torch`: median over rounds of the per-round ratio to PyTorch eager (2 threads).",
    ]
    for res in results:
        md += [
            "",
            f"## {res['chain']} ({res['gflop']:.3f} GFLOP, peak limit {res['peak_limit']:,} B)",
            "",
            "| schedule | ms | GFLOP/s | / torch | peak B | build s | note |",
            "| --- | ---: | ---: | ---: | ---: | ---: | --- |",
        ]
        for label, row in res["rows"].items():
            cells = [
                f"{row['ms']:.3f}" if "ms" in row else "-",
                f"{row['GFLOP/s']:.0f}" if "GFLOP/s" in row else "-",
                f"{row['/ torch']:.2f}" if "/ torch" in row else "-",
                f"{row['peak B']:,}" if "peak B" in row else "-",
                f"{row['build s']:.1f}" if "build s" in row else "-",
                row.get("error", ""),
            ]
            md.append(f"| {label} | " + " | ".join(cells) + " |")
    return md


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--chains", nargs="+", default=["mlp", "attention"], choices=sorted(chains.CHAINS))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--min-ms", type=float, default=100.0)
    parser.add_argument("--output", type=Path, default=REPO / "results")
    args = parser.parse_args(argv)
    results = [measure(name, args.rounds, args.min_ms) for name in args.chains]
    write_results(args.output, "dot_tiles", report(results, argv), {"argv": argv, "results": results})
    return 0


if __name__ == "__main__":
    sys.exit(main())
