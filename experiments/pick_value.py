"""What a measurement chosen by the cost model is worth beside one chosen at random, read from the
logs of model-guided runs.

    .venv/bin/python experiments/pick_value.py [--runs GLOB ...] [--output results]

Each round of a run with a cost model that ranks (``search.cost_model`` other than ``none``)
measures ``search.measure_per_round`` candidates chosen by
:func:`autotune.search.candidates.choose`: the best by prediction (one per feature row), then the
``round(epsilon * n)`` epsilon share at random among the rest (among the strategy's random
proposals first: :data:`autotune.search.rounds.EPSILON_FROM_DRAWS`). A trial's record says which
(``picked``: ``model``, ``random``, or ``every`` when the round had no more candidates than
measurements). Logs written before records said it are read by the order: the tuner numbers a
round's measurements as :func:`~autotune.search.candidates.choose` returns them, after the
round's invalid and infeasible trials, so a full round's measured trials (every status but
``infeasible`` and ``invalid``), in trial order, are the model's picks and then the random ones.
Only full rounds (``search.measure_per_round`` measurements) are counted, so that every place has
the same rounds.

Per place in the round (1 = the best predicted) and per share (model, random), over every run
matched by ``--runs`` (default: ``results/sample_efficiency_runs*/*/*-s*/``):

- *top k*: the share of the trials that end among their run's :data:`~autotune.search.best.TOP_K`
  fastest ``ok`` schedules (by the search's own medians, as the run's end picks from them,
  :func:`autotune.search.best.top_trials`);
- *median / run's best*: the median, over the ``ok`` trials, of the trial's median latency over
  its run's fastest;
- *cutoff*: the share stopped early as slower than a few times the best so far.

A place's trials all come from the same rounds as the other places', so the figures compare the
choices a round made, not early against late trials. Writes ``<output>/pick_value.md`` and ``.json``.
"""

from __future__ import annotations

import argparse
import glob
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

from autotune.search.best import TOP_K, top_trials
from autotune.search.log import load, load_sessions
from autotune.search.records import TrialRecord

REPO = Path(__file__).resolve().parents[1]
RUNS = ["results/sample_efficiency_runs*/*/*-s*/"]
UNMEASURED = ("infeasible", "invalid")


def run_config(directory: Path) -> dict[str, Any] | None:
    """The config and machine a run's first session recorded; None without one."""
    starts = [line["session"] for line in load_sessions(directory) if "session" in line]
    return (
        {**starts[0]["config"], "llvm_cpu": starts[0].get("machine", {}).get("llvm_cpu")} if starts else None
    )


def places(records: list[TrialRecord], per_round: int, epsilon: float) -> dict[int, tuple[int, str]]:
    """Trial number -> (1-based place in its round's choice, ``"model"`` or ``"random"``), for the
    full rounds of ``per_round`` measurements: the record's ``picked``, or for a record without it,
    the share its place gives (module docstring)."""
    rounds: dict[int, list[TrialRecord]] = defaultdict(list)
    for r in records:
        if r.status not in UNMEASURED:
            rounds[r.round].append(r)
    explore = round(epsilon * per_round)
    out = {}
    for measured in rounds.values():
        if len(measured) != per_round:
            continue
        for i, r in enumerate(sorted(measured, key=lambda x: x.trial)):
            share = r.picked or ("random" if i >= per_round - explore else "model")
            if share in ("model", "random"):
                out[r.trial] = (i + 1, share)
    return out


def tally(directories: list[Path]) -> dict[str, Any]:
    """Per place and per share: trials, those in the run's top 5, ok ones' latency over the run's best,
    cutoff ones; and the runs and hosts read."""
    by_place: dict[tuple[int, str], dict[str, Any]] = {}
    runs, hosts = [], set()
    for d in directories:
        cfg = run_config(d)
        if cfg is None or cfg.get("search.cost_model") in (None, "none") or not (d / "best.json").is_file():
            continue
        records = load(d / "trials.jsonl")
        top = top_trials(records, TOP_K)
        if not top or top[0].median_ms is None:
            continue
        best, tops = top[0].median_ms, {r.trial for r in top}
        placed = places(records, int(cfg["search.measure_per_round"]), float(cfg["search.epsilon"]))
        runs.append(str(d.relative_to(REPO) if d.is_relative_to(REPO) else d))
        hosts.add(cfg["llvm_cpu"])
        for r in records:
            if r.trial not in placed:
                continue
            t = by_place.setdefault(placed[r.trial], {"trials": 0, "top": 0, "cutoff": 0, "ratios": []})
            t["trials"] += 1
            t["top"] += r.trial in tops
            t["cutoff"] += r.status == "cutoff"
            if r.ok and r.median_ms is not None:
                t["ratios"].append(r.median_ms / best)
    rows = []
    for share in ("model", "random"):
        keys = sorted(k for k in by_place if k[1] == share)
        groups = [(f"{share} {k[0]}", [by_place[k]]) for k in keys] + [
            (f"{share}, all", [by_place[k] for k in keys])
        ]
        for label, parts in groups:
            trials = sum(p["trials"] for p in parts)
            ratios = [x for p in parts for x in p["ratios"]]
            rows.append({
                "place": label, "trials": trials, "top5": sum(p["top"] for p in parts) / trials,
                "ratio_median": statistics.median(ratios) if ratios else None,
                "cutoff": sum(p["cutoff"] for p in parts) / trials,
            })  # fmt: skip
    return {"runs": runs, "hosts": sorted(h for h in hosts if h), "rows": rows}


def markdown(summary: dict[str, Any], command: str) -> str:
    lines = [
        "# What a measurement chosen by the cost model is worth",
        "",
        f"`.venv/bin/python experiments/pick_value.py {command}` ({len(summary['runs'])} runs of model-guided",
        f"searches; hosts by LLVM cpu name: {', '.join(summary['hosts'])}). Each full round's measurements in",
        "the order the tuner chose them: the model's picks, best predicted first, then the epsilon share",
        "at random among the candidates the model did not pick (the strategy's random proposals first in",
        "runs made with ``EPSILON_FROM_DRAWS``; see the script's docstring).",
        "",
        f"| place in the round | trials | in the run's {TOP_K} fastest | median latency / run's best | cutoff |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for row in summary["rows"]:
        ratio = "-" if row["ratio_median"] is None else f"{row['ratio_median']:.2f}"
        lines.append(
            f"| {row['place']} | {row['trials']} | {row['top5']:.3f} | {ratio} | {row['cutoff']:.3f} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", nargs="+", default=RUNS, metavar="GLOB")
    p.add_argument("--output", type=Path, default=REPO / "results")
    args = p.parse_args(argv)
    directories = sorted({Path(x).resolve() for g in args.runs for x in glob.glob(str(REPO / g))})
    summary = tally(directories)
    if not summary["runs"]:
        print(f"pick_value: no finished model-guided run under {' '.join(args.runs)}", file=sys.stderr)
        return 1
    command = (
        "--runs "
        + " ".join(repr(g) for g in args.runs)
        + f" --output {args.output.relative_to(REPO) if args.output.is_relative_to(REPO) else args.output}"
    )
    args.output.mkdir(parents=True, exist_ok=True)
    (args.output / "pick_value.json").write_text(json.dumps({"command": command, **summary}, indent=1))
    text = markdown(summary, command)
    (args.output / "pick_value.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
