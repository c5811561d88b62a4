"""The stored best schedules of the built-ins (results/<name>/best.json) stay reachable: their knobs,
applied in today's space, rebuild the very schedule their trace records."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from autotune.config import SPACES_DIR
from autotune.memory import Pool
from autotune.schedule import Schedule, load_trace
from autotune.search.records import trace_key
from autotune.search.space import load_space
from autotune.workloads import get


@pytest.mark.parametrize(("name", "space"), [("pool_chain", "cascade"), ("bottleneck", "cascade"), ("matmul", "gemm")])
def test_a_stored_best_schedule_is_a_point_of_todays_space(name: str, space: str) -> None:
    path = Path(__file__).resolve().parents[2] / "results" / name / "best.json"
    best = json.loads(path.read_text(encoding="utf-8"))
    wl = get(best["workload"]["name"], **best["workload"]["args"])
    pools = [Pool(p["name"], p["size"]) for p in best["pools"]]
    sch = load_space(SPACES_DIR / f"{space}.yaml", wl, pools).apply(wl.func, best["knobs"])
    stored = Schedule.replay(wl.func, load_trace(str(path)))
    assert trace_key(sch.trace_json()) == trace_key(stored.trace_json())
