"""experiments/knob_sweep.py's bases and variants, on a log written here for the small example's
space (nothing is timed)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from experiment_scripts import load_experiment

from autotune.config import load_config
from autotune.config.workload import load_workload
from autotune.search.log import TrialLog
from autotune.search.records import TrialRecord, trace_key
from autotune.search.space import load_space

CONFIG = Path(__file__).resolve().parents[2] / "examples" / "small.yaml"


@pytest.fixture(scope="module")
def ks() -> Any:
    return load_experiment("knob_sweep")


def write_log(path: Path, trials: list[tuple[dict[str, Any], str, float | None]]) -> list[str]:
    """A log of the small example's schedules ``(knobs, status, median ms)``; their traces."""
    cfg = load_config(CONFIG)
    wl = load_workload(cfg.workload)
    space = load_space(cfg.search.space, wl, cfg.memory.pools)
    traces = []
    with TrialLog(path) as log:
        for i, (knobs, status, ms) in enumerate(trials):
            trace = space.apply(wl.func, knobs).trace_json()
            times = {} if ms is None else {"median_ms": ms, "min_ms": ms, "iqr_ms": 0.0}
            reason = "" if status == "ok" else "failed"
            log.append(TrialRecord(i, 0, tuple(knobs.items()), status, reason=reason, trace=trace, **times))
            traces.append(trace)
    return traces


def test_the_bases_are_the_fastest_distinct_ok_schedules_that_decide_the_knob(
    ks: Any, tmp_path: Path
) -> None:
    log = tmp_path / "trials.jsonl"
    unrolled = {"tile_rows": 4, "unroll_pool1": True, "jam_pool1": 2}
    traces = write_log(
        log,
        [
            ({"tile_rows": 4}, "ok", 1.0),  # unroll_pool1 off: jam_pool1 is not decided
            ({**unrolled, "strip": 8}, "ok", 3.0),
            (unrolled, "ok", 2.5),
            (unrolled, "ok", 2.0),  # the same schedule again, quicker: its best median counts
            ({**unrolled, "strip": 4}, "error", None),
            ({**unrolled, "strip": 16}, "ok", 4.0),
        ],
    )
    assert ks.bases([log], "jam_pool1", 2) == [(2.0, traces[2]), (3.0, traces[1])]


def test_each_base_is_replayed_with_every_choice_of_the_knob_and_the_rest_held(
    ks: Any, tmp_path: Path
) -> None:
    log = tmp_path / "trials.jsonl"
    write_log(log, [({"tile_rows": 32, "unroll_pool1": True, "jam_pool1": 4, "strip": 0}, "ok", 1.0)])
    made = ks.variants(CONFIG, [log], "tile_rows", None, 1)
    rows = made["rows"]
    assert [r["value"] for r in rows] == [1, 2, 4, 8, 16, 32]
    assert [r["value"] for r in rows if r.get("own")] == [32]
    for r in rows:
        assert {k: r["knobs"][k] for k in ("unroll_pool1", "jam_pool1", "strip")} == {
            "unroll_pool1": True, "jam_pool1": 4, "strip": 0,
        }  # fmt: skip
    # unstripped, the example's 32 KiB limit needs tile_rows <= 8: the others are listed with the reason
    over = {r["value"]: r for r in rows if r["value"] in (16, 32)}
    assert "is over peak_limit 32,768 bytes" in over[16]["error"]
    assert over[32]["error"].startswith("pools overflow: allocation 'pool1'")
    assert not any("key" in r for r in over.values())
    fits = [r for r in rows if r["value"] <= 8]
    assert all(r["estimate_ms"] > 0 and r["peak_bytes"] <= 32 * 1024 for r in fits)
    assert sorted(made["tasks"]) == sorted(r["key"] for r in fits)
    assert len({r["key"] for r in fits}) == 4
    assert all(trace_key(made["tasks"][r["key"]].trace) == r["key"] for r in fits)


def test_a_knob_the_space_does_not_choose_is_refused_by_name(ks: Any, tmp_path: Path) -> None:
    log = tmp_path / "trials.jsonl"
    write_log(log, [({"tile_rows": 4}, "ok", 1.0)])
    with pytest.raises(SystemExit, match="the space has no knob 'tile_cols' with a choice"):
        ks.variants(CONFIG, [log], "tile_cols", None, 1)


def test_every_timed_row_gets_its_ratio_to_its_base_whatever_the_order(ks: Any) -> None:
    # base 0's own value comes last; base 1's own row failed to time: its rows have no ratio
    rows: list[dict[str, Any]] = [
        {"base": 0, "own": False, "key": "a", "estimate_ms": 3.0},
        {"base": 0, "own": False, "error": "pools overflow"},
        {"base": 0, "own": True, "key": "b", "estimate_ms": 2.0},
        {"base": 1, "own": True, "key": "c", "estimate_ms": 1.0},
        {"base": 1, "own": False, "key": "d", "estimate_ms": 1.0},
    ]
    timed = {"a": [3.0, 6.0, 3.0], "b": [2.0, 2.0, 2.0], "c": [1.0, None, 1.0], "d": [1.0, 1.0, 1.0]}
    ks.attach_times(rows, timed, {"c": "timed out"})
    assert rows[0]["ms"] == 3.0 and rows[0]["ratio"] == 1.5 and rows[0]["estimate_ratio"] == 1.5
    assert rows[2]["ratio"] == 1.0 and "ratio" not in rows[1]
    assert rows[3]["error"] == "timed out" and "ms" not in rows[3]
    assert rows[4]["ms"] == 1.0 and "ratio" not in rows[4]


def test_estimate_error_sets_the_sweeps_host_ratios_beside_the_current_estimate(
    ks: Any, tmp_path: Path
) -> None:
    ee = load_experiment("estimate_error")
    log = tmp_path / "trials.jsonl"
    write_log(log, [({"tile_rows": 4, "unroll_pool1": True, "jam_pool1": 4, "strip": 0}, "ok", 1.0)])
    made = ks.variants(CONFIG, [log], "tile_rows", [2, 4, 8], 1)
    estimates = {r["value"]: r["estimate_ms"] for r in made["rows"]}
    rows = [{**r, "ratio": ratio} for r, ratio in zip(made["rows"], (1.5, 1.0, 0.5))]
    sweep = {"config": str(CONFIG), "logs": [str(log)], "knob": "tile_rows", "values": [2, 4, 8], "bases": 1}
    pairs = ee.pairs({**sweep, "rows": rows})
    assert [(p["value"], p["host"]) for p in pairs] == [(2, 1.5), (8, 0.5)]
    for p in pairs:
        assert p["estimate"] == pytest.approx(estimates[p["value"]] / estimates[4])
        apart = min(abs(p["host"] - 1), abs(p["estimate"] - 1)) > ee.MISORDER
        assert p["misordered"] == (apart and (p["host"] > 1) != (p["estimate"] > 1))
    with pytest.raises(SystemExit, match="the logs give other variants than the sweep's"):
        ee.pairs({**sweep, "rows": rows[::-1]})
