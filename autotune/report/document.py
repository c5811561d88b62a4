"""``report.md``: the summary, the best schedule and the figures of a run directory.

:func:`write_report` reads ``trials.jsonl`` (and ``best.json`` when the run
finished), writes ``trials.parquet``/``trials.csv``, ``convergence.png``,
``pareto.png``, ``pools.png`` (the memory plan of the best schedule, rebuilt
by replaying its trace on the workload and lowering it with the run's pools)
and ``report.md``, which links them. It can be rerun at any time, also on a
run still in progress (then without the best schedule's sections).
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

from ..config import WorkloadConfig, load_workload
from ..files import write_atomic
from ..lowering import lower
from ..measure.task import SLOWER_ONE_ROUND
from ..memory import Pool, draw, format_size
from ..schedule import Schedule
from .analysis import (
    CONTENDED,
    NOISE_THRESHOLD,
    contended,
    cost_model_quality,
    format_ms,
    knob_importance,
    noisy,
)
from .plots import plot_convergence, plot_pareto
from .results import load_results, summary, write_tables

__all__ = ["draw_best_plan", "read_best", "result_line", "run_lines", "trace_text", "write_report"]


def read_best(directory: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The contents of ``best.json``, or None if the run has not finished."""
    path = Path(directory) / "best.json"
    if not path.exists():
        return None
    data = json.loads(path.read_text(encoding="utf-8"))
    return data if isinstance(data, dict) else None


def draw_best_plan(best: dict[str, Any], path: str | os.PathLike[str]) -> Path:
    """Replay the best trace, lower it with the run's pools and draw its memory plan."""
    wl_cfg = best["workload"]
    wl = load_workload(
        WorkloadConfig(wl_cfg.get("name"), wl_cfg.get("path"), tuple(wl_cfg.get("args", {}).items()))
    )
    sch = Schedule.replay(wl.func, json.dumps(best["trace"]))
    pools = tuple(Pool(p["name"], p["size"]) for p in best["pools"])
    lowered = lower(sch.func, pools=pools, planner=best["planner"], seed=best["seed"])
    return draw(lowered.plan, path)


def _ms(value: Any) -> str:
    return format_ms(value)


def trace_text(trace: dict[str, Any]) -> str:
    """A trace as JSON with one step per line."""
    steps = ",\n".join("  " + json.dumps(step) for step in trace.get("steps", []))
    head = json.dumps({k: v for k, v in trace.items() if k != "steps"})[:-1]
    return f'{head}, "steps": [\n{steps}\n]}}' if steps else json.dumps(trace)


def result_line(best: dict[str, Any]) -> str:
    """``best: X ms, N.NNx faster than the default schedule (Y ms), uses 1/M of its workspace (A vs B bytes)``."""
    fig, default = best["figures"], best["default"]
    text = f"best: {_ms(fig['median_ms'])}"
    speedup = best.get("speedup")
    if speedup is not None and speedup >= 1:
        text += f", {speedup:.2f}x faster than the default schedule ({_ms(default['median_ms'])})"
    elif speedup is not None:  # the re-measure can find the best trial slower than the default
        text += f", {1 / speedup:.2f}x slower than the default schedule ({_ms(default['median_ms'])})"
    else:
        text += f", the default schedule could not be timed ({default['status']})"
    mine, theirs = fig["peak_bytes"], default["peak_bytes"]
    if not mine:
        text += f", uses no workspace (0 vs {theirs:,} bytes)"
    elif not theirs:
        text += f", uses {mine:,} bytes of workspace where the default uses none"
    elif mine <= theirs:
        text += f", uses 1/{theirs / mine:.1f} of its workspace ({mine:,} vs {theirs:,} bytes)"
    else:
        text += f", uses {mine / theirs:.1f}x its workspace ({mine:,} vs {theirs:,} bytes)"
    return text


def _result_lines(best: dict[str, Any]) -> list[str]:
    fig, default = best["figures"], best["default"]
    wl = best["workload"]
    args = ", ".join(f"{k}={v}" for k, v in wl.get("args", {}).items())
    pools = ", ".join(f"{p['name']} {format_size(p['size'])}" for p in best["pools"])
    limit = best.get("peak_limit")
    lines = [
        f"Workload `{wl.get('name') or wl.get('path')}`({args}); pools: {pools}; "
        f"peak_limit: {'none' if limit is None else f'{limit:,} bytes'}; planner {best['planner']}.",
        "",
        "| schedule | median | min | IQR | peak workspace |",
        "| --- | ---: | ---: | ---: | ---: |",
        f"| best (trial {best['trial']}) | {_ms(fig['median_ms'])} | {_ms(fig['min_ms'])} | "
        f"{_ms(fig['iqr_ms'])} | {fig['peak_bytes']:,} bytes |",
        f"| default | {_ms(default['median_ms'])} | {_ms(default['min_ms'])} | "
        f"{_ms(default['iqr_ms'])} | {default['peak_bytes']:,} bytes |",
        "",
        _remeasure_line(best),
        "",
        f"**{result_line(best)}**",
    ]
    if default["status"] != "ok":
        lines.append(f"The default schedule: {default['status']}: {default.get('reason', '')}")
    knobs = ", ".join(f"`{k}={v}`" for k, v in best["knobs"].items())
    lines += ["", f"Knobs: {knobs or '(none)'}."]
    return lines


def _remeasure_line(best: dict[str, Any]) -> str:
    rounds, default = best["remeasure"]["rounds"], best["default"].get("rounds")
    text = f"Both re-measured on one worker, alternating, {rounds} rounds"
    if default is not None and default < rounds:
        text += (
            f"; the default, over {SLOWER_ONE_ROUND:g} times slower than the fastest in the first round,"
            f" in {default} round{'s' if default != 1 else ''} only"
        )
    return text + "."


def _noise_lines(df: Any) -> list[str]:
    flags = noisy(df)
    ok = int((df["status"] == "ok").sum())
    lines = [
        f"Noisy trials: {int(flags.sum())} of {ok} ok trials have a median - min or an IQR above "
        f"{NOISE_THRESHOLD:.0%} of their median (marked `*` above); their latency is less certain.",
        "",
    ]
    if flags.any():
        shown = ", ".join(str(t) for t in df.loc[flags, "trial"].head(20))
        lines[-2] += f" Trials: {shown}{', ...' if int(flags.sum()) > 20 else ''}."
    busy = contended(df)
    if busy.any():
        shown = ", ".join(str(t) for t in df.loc[busy, "trial"].head(20))
        lines += [
            f"Contended trials: {int(busy.sum())} of {ok} ok trials were timed while another process had "
            f"the cores they needed (their threads waited for a CPU more than {CONTENDED:.0%} of the "
            f"time, in both timings when re-timed); their latency is a busy machine's. Trials: {shown}"
            f"{', ...' if int(busy.sum()) > 20 else ''}.",
            "",
        ]
    return lines


def _importance_lines(df: Any, top: int = 10) -> list[str]:
    table = knob_importance(df)
    if table.empty:
        return []
    lines = [
        "## Which knobs mattered",
        "",
        "Share of the variance of log(median latency) over the ok trials explained by each knob's value "
        "alone (eta squared, one knob at a time). Descriptive, not causal: knobs drawn together share "
        "credit, so the shares overlap and need not sum to 1.",
        "",
        "| knob | share | values seen | fastest value (mean) |",
        "| --- | ---: | ---: | --- |",
    ]
    for _, row in table.head(top).iterrows():
        lines.append(f"| `{row['knob']}` | {row['share']:.0%} | {row['values']} | `{row['best']}` |")
    return [*lines, ""]


def _cost_model_lines(df: Any, best: dict[str, Any] | None) -> list[str]:
    quality = cost_model_quality(df)
    folds = ((best or {}).get("cost_model") or {}).get("cross_validated")
    if quality is None and folds is None:
        return []
    lines = ["## Cost model", ""]
    if quality is not None:
        lines += [
            f"On {int(quality['trials'])} held-out trials (each ok trial predicted before it was measured, by "
            "the model fitted on the trials before it): Spearman rank correlation of predicted and measured "
            f"latency {_rho(quality['spearman'])}; top-{int(quality['k'])} recall "
            f"{quality['recall']:.2f} (the share of the {int(quality['k'])} fastest trials that are among the "
            f"{int(quality['k'])} predicted fastest).",
            "",
        ]
    if folds is not None:
        n, k = int(folds["trials"]), int(folds["k"])
        recall = "-" if folds["recall"] is None else f"{folds['recall']:.2f}"
        lines += [
            f"Out of fold, after the search ({int(folds['folds'])} folds of the {n} ok trials, each predicted by "
            "a model of the run's kind fitted on the other folds and the cutoff trials): Spearman "
            f"{_rho(folds['spearman'])}; top-{k} recall {recall}."
            + (
                " Each trial above was predicted by a model that had seen only the rounds before it, and the "
                "model chose most of them as the fastest it predicted: out of fold it has seen the whole run, "
                "so this figure says how well the features order this workload's schedules."
                if quality is not None
                else ""
            ),
            "",
        ]
    return lines


def _rho(value: float | None) -> str:
    return "-" if value is None or math.isnan(value) else f"{value:.2f}"


def run_lines(run: dict[str, Any]) -> list[str]:
    """best.json's ``run`` as Markdown: when, on what machine, with which versions, which config."""
    host = run.get("machine", {})
    isa = ", ".join(host.get("isa", [])) or "none recorded"
    versions = ", ".join(f"{k} {v}" for k, v in run.get("versions", {}).items() if v)
    return [
        f"Started {run.get('started') or '?'}, ended {run.get('ended') or '?'} "
        f"({run.get('sessions', '?')} session{'s' * (run.get('sessions') != 1)}).",
        "",
        f"Machine: {host.get('cpu', '?')} (LLVM `{host.get('llvm_cpu', '?')}`; {isa}), "
        f"{host.get('usable_cores', '?')} of {host.get('cores', '?')} cores usable; "
        f"{host.get('os', '?')}, Python {host.get('python', '?')}.",
        "",
        f"Versions: {versions}.",
        "",
        f"Config fingerprint: `{run.get('fingerprint', '?')}`.",
    ]


def write_report(directory: str | os.PathLike[str]) -> Path:
    """Write the tables, the figures and ``report.md`` of the run in ``directory``; return report.md."""
    out = Path(directory)
    df = load_results(out)
    write_tables(out)
    best = read_best(out)
    plot_convergence(df, out / "convergence.png")
    plot_pareto(df, out / "pareto.png", None if best is None else best.get("peak_limit"))
    title = best["name"] if best else out.name
    md = [f"# autotune report: {title}", ""]
    if best is not None:
        draw_best_plan(best, out / "pools.png")
        md += ["## Result", "", *_result_lines(best), ""]
        if isinstance(best.get("run"), dict):
            md += ["## Run", "", *run_lines(best["run"]), ""]
    else:
        md += ["The run has not finished: there is no `best.json` yet.", ""]
    md += ["## Trials", "", "```text", summary(df), "```", "", *_noise_lines(df), *_importance_lines(df)]
    md += _cost_model_lines(df, best)
    if best is not None:
        md += ["## Best schedule (trace)", "", "```json", trace_text(best["trace"]), "```", ""]
        md += ["Lowered IR: [best_ir.txt](best_ir.txt); kernel: [best_kernel.py](best_kernel.py).", ""]
    md += [
        "## Figures",
        "",
        "![convergence](convergence.png)",
        "",
        "![latency against peak memory](pareto.png)",
        "",
    ]
    if best is not None:
        md += ["![memory plan of the best schedule](pools.png)", ""]
    md += ["Every trial: [trials.csv](trials.csv), [trials.parquet](trials.parquet), `trials.jsonl`.", ""]
    return write_atomic(out / "report.md", "\n".join(md))
