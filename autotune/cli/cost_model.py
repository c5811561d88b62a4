"""``autotune train-cost-model RUN [RUN...] --output model.json``: a ranking model from earlier runs.

Each RUN is a run directory (or its ``trials.jsonl``); see :mod:`autotune.search.cost_model_train`.
It prints, per run, how well a model fitted without them ranks the held-out trials (Spearman's
rank correlation with the measured latencies, and top-k recall), then writes the model fitted on
every trial. A config uses it as ``cost_model: {kind: xgboost, pretrained: model.json}``.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from ..search.cost_model_file import save_model
from ..search.cost_model_train import TOP_SHARE, log_rows, train
from .common import EXIT_OK


def _fmt(value: float) -> str:
    return "-" if math.isnan(value) else f"{value:.2f}"


def cmd_train_cost_model(args: argparse.Namespace) -> int:
    logs = [log_rows(path) for path in args.runs]
    model, held = train(logs, holdout=args.holdout, seed=args.seed)
    rows = [("run", "ok trials", "skipped", "held out", "spearman", "top-k recall")]
    by_name = {h.name: h for h in held}
    for log in logs:
        h = by_name.get(log.name)
        rows.append(
            (log.name, str(len(log.y)), str(log.skipped), str(h.held_out) if h else "0",
             _fmt(h.spearman) if h else "-", f"{_fmt(h.recall)} (k={h.k})" if h else "-")
        )  # fmt: skip
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    if not args.quiet:
        for r in rows:
            print("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
    meta = {
        "trained_on": [{"run": str(p), "ok_trials": len(log.y)} for p, log in zip(args.runs, logs)],
        "held_out": [h.to_json() for h in held],
        "holdout": args.holdout,
        "top_share": TOP_SHARE,
        "seed": args.seed,
    }
    out = save_model(model, Path(args.output), meta)
    print(f"wrote {out} ({sum(len(log.y) for log in logs)} trials of {len(logs)} runs)")
    return EXIT_OK


def add_cost_model_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("train-cost-model", help="train a ranking cost model on earlier runs' trial logs")
    p.add_argument("runs", nargs="+", metavar="RUN", help="a run directory or its trials.jsonl")
    p.add_argument("--output", required=True, metavar="FILE", help="the model file to write (JSON)")
    p.add_argument(
        "--holdout", type=float, default=0.25, metavar="SHARE",
        help="share of each run's trials held out to score the model (default 0.25)",
    )  # fmt: skip
    p.add_argument("--seed", type=int, default=0, metavar="S", help="seed of the split and the model")
    p.set_defaults(run=cmd_train_cost_model)
