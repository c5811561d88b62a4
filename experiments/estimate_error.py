"""How far the roofline estimate is from the host on the knob sweeps' variants, by the current code.

    .venv/bin/python experiments/estimate_error.py SWEEP [SWEEP ...] [--output DIR]

Each ``SWEEP`` is a ``knob_sweep_<knob>.json`` written by ``experiments/knob_sweep.py``, or a folder
of them. Every sweep's variants are built again from its logs and lowered, and their roofline
estimate computed by the code that runs this script (nothing is timed: the host's ratios are the
sweep's). Per variant that the sweep timed, other than its base's own value: the host's ratio to the
base and the estimate's; per sweep and over all, the mean of ``|log(estimate ratio / host ratio)|``
and the pairs that the two put on opposite sides of their base by more than 3% each (misordered).
Run it with ``PYTHONPATH`` at another checkout to measure that checkout's estimate on the same
timings. Writes ``DIR/estimate_error.md`` and ``.json`` (``DIR`` defaults to ``results``).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from knob_sweep import variants
from thread_scaling import write_results

MISORDER = 0.03
"""How far on each side of its base a ratio must be for a pair to count as misordered."""


def sweep_files(paths: Sequence[Path]) -> list[Path]:
    files: list[Path] = []
    for p in paths:
        files.extend(sorted(p.glob("knob_sweep_*.json")) if p.is_dir() else [p])
    return files


def pairs(sweep: dict[str, Any]) -> list[dict[str, Any]]:
    """The sweep's timed variants beside the current code's estimate ratio."""
    logs = [Path(p) for p in sweep["logs"]]
    made = variants(Path(sweep["config"]), logs, sweep["knob"], sweep["values"], sweep["bases"])
    own = {r["base"]: r for r in made["rows"] if r["own"]}
    out = []
    for timed, now in zip(sweep["rows"], made["rows"]):
        if timed["value"] != now["value"] or timed["base"] != now["base"]:
            raise SystemExit(
                f"{sweep['config']} {sweep['knob']}: the logs give other variants than the sweep's"
            )
        base = own[now["base"]]
        if timed["own"] or "ratio" not in timed or "estimate_ms" not in now or "estimate_ms" not in base:
            continue
        host, estimate = timed["ratio"], now["estimate_ms"] / base["estimate_ms"]
        apart = min(abs(host - 1.0), abs(estimate - 1.0)) > MISORDER
        misordered = apart and (host - 1.0) * (estimate - 1.0) < 0
        out.append({
            "base": now["base"], "value": now["value"], "host": host, "estimate": estimate,
            "error": abs(math.log(estimate / host)), "misordered": misordered,
        })  # fmt: skip
    return out


def summary(rows: Sequence[dict[str, Any]]) -> str:
    if not rows:
        return "no timed variant"
    mean = sum(r["error"] for r in rows) / len(rows)
    misordered = sum(r["misordered"] for r in rows)
    return f"{len(rows)} variants, mean log error {mean:.3f}, misordered {misordered}"


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sweeps", nargs="+", type=Path)
    parser.add_argument("--output", type=Path, default=Path("results"))
    args = parser.parse_args(argv)
    results = []
    for path in sweep_files(args.sweeps):
        sweep = json.loads(path.read_text(encoding="utf-8"))
        if "logs" not in sweep or "bases" not in sweep:
            raise SystemExit(f"{path}: no 'logs' and 'bases': written by an older knob_sweep.py")
        results.append(
            {"sweep": str(path), "config": sweep["config"], "knob": sweep["knob"], "pairs": pairs(sweep)}
        )
        print(f"{path}: {summary(results[-1]['pairs'])}", file=sys.stderr, flush=True)
    every = [p for r in results for p in r["pairs"]]
    date = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        "# The roofline estimate against the host on the knob sweeps",
        "",
        f"Command: `.venv/bin/python experiments/estimate_error.py {' '.join(argv or sys.argv[1:])}`  ",
        f"Date: {date}  ",
        "Host ratios: each sweep's timings (its own report names the host). Estimate ratios: the code that "
        "ran this command. A variant's log error: the absolute natural log of its estimate ratio over its "
        f"host ratio; misordered: the two on opposite sides of the base by more than {MISORDER:.0%} each.",
        "",
        f"**All: {summary(every)}.**",
        "",
        "| config | knob | summary | base:value host/estimate (! misordered) |",
        "| --- | --- | --- | --- |",
    ]
    for r in results:
        cells = " ".join(
            f"{p['base']}:{p['value']} {p['host']:.2f}/{p['estimate']:.2f}{'!' if p['misordered'] else ''}"
            for p in r["pairs"]
        )
        lines.append(f"| {r['config']} | {r['knob']} | {summary(r['pairs'])} | {cells} |")
    write_results(args.output, "estimate_error", lines, {"sweeps": results, "misorder": MISORDER})


if __name__ == "__main__":
    main()
