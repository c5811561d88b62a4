"""Before a run: the knobs that decide memory, and the error when no schedule of the space fits."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from search_runs import InProcess, write_run_config

from autotune import cli, workloads
from autotune.config import load_config
from autotune.errors import AutotuneError, ConfigError, ScheduleError
from autotune.memory import Pool
from autotune.search import candidates, feasibility
from autotune.search import tuner as tuner_module
from autotune.search.log import TrialLog
from autotune.search.space import load_space
from autotune.search.tuner import tune

REPO = Path(__file__).resolve().parents[2]
WORKLOAD = {"name": "pool_chain", "args": {"height": 12, "width": 12, "channels": 4}}
NARROW = """name: narrow
family: cascade
knobs:
  tile_rows: [1, 2]
  strip: {value: 0}
  parallel: {value: none}
  fuse_*: {value: false}
  unroll_*: {value: false}
  vectorize: {value: false}
  stage_*: {value: none}
"""


def narrow_config(tmp_path: Path, memory: dict[str, Any], **search: Any) -> Path:
    """pool_chain 12x12x4 over a space of 2 tiles x (root | tile: recompute, rolling) x 2 pools."""
    (tmp_path / "narrow.yaml").write_text(NARROW, encoding="utf-8")
    knobs = {"trials": 3, "cost_model": "none", "batch": 4, "measure_per_round": 2, **search}
    return write_run_config(
        tmp_path, "run", WORKLOAD, memory=memory, space=str(tmp_path / "narrow.yaml"), **knobs
    )


# ---------------------------------------------------------------- which knobs decide memory


@pytest.mark.parametrize(
    ("name", "args", "space"),
    [
        ("pool_chain", {"height": 12, "width": 12, "channels": 4}, "cascade"),
        ("bottleneck", {"height": 8, "width": 8, "cin": 4, "expand": 8}, "cascade"),
        ("matmul", {"m": 16, "n": 32, "k": 16}, "gemm"),
    ],
)
def test_only_the_memory_knobs_change_a_schedules_peaks(name: str, args: dict[str, int], space: str) -> None:
    """On random schedules, every other value of every other knob gives the same peak in every pool."""
    wl = workloads.get(name, **args)
    pools = (Pool("dtcm", 4096), Pool("sram", 1 << 21))
    sp = load_space(REPO / "search_spaces" / f"{space}.yaml", wl, pools)
    memory = {k.name for k in feasibility.memory_knobs(sp)}
    others = [k for k in sp.knobs if k.name not in memory]
    assert memory and others
    rng = np.random.default_rng(7)

    def peaks(values: dict[str, Any]) -> tuple[int, tuple[tuple[str, int], ...]] | None:
        try:
            func = sp.apply(wl.func, values).func
        except ScheduleError:
            return None
        low = candidates.lower_candidate(func, pools, "greedy_by_size", 0, None)
        return low.peak, low.pool_bytes

    checked = 0
    while checked < 3:
        values = candidates.random_assignment(sp, rng)
        base = peaks(values)
        if base is None:
            continue
        checked += 1
        for knob in others:  # one other value each (a lowering costs 10-50 ms here)
            choice = knob.choices[int(rng.integers(len(knob.choices)))]
            changed = peaks({**values, knob.name: choice})
            assert changed in (None, base), (knob.name, choice, values)


# ---------------------------------------------------------------- no schedule fits


def test_a_peak_limit_below_every_schedule_is_refused_at_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pools = [{"name": "dtcm", "size": "8KiB"}, {"name": "sram", "size": "2MiB"}]
    path = narrow_config(tmp_path, {"pools": pools, "peak_limit": 100})
    expected = (
        "no schedule of the space fits the memory (pools dtcm 8,192, sram 2,097,152 bytes; peak_limit 100 bytes): "
        "the smallest total peak is 480 bytes (dtcm 480, sram 0; schedule: tile_rows=1, at_pool1=tile, "
        "mode_pool1=recompute, pool_pool1=dtcm). With the other limits as they are, a schedule fits with: "
        "no size of dtcm alone; no size of sram alone; peak_limit of at least 480 bytes. Tried: every one of the "
        "12 distinct schedules of the 12 combinations of the knobs that size buffers (at_pool1, tile_rows, "
        "mode_pool1, pool_pool1; the others at their defaults)"
    )  # one row per tile: a rolling window holds the same 3 rows x 10 columns x 4 channels as a recomputed one
    with pytest.raises(ConfigError) as info:
        tune(load_config(path), progress=False, executor=InProcess())
    assert str(info.value) == expected
    assert not (tmp_path / "run").exists()
    assert cli.main(["run", str(path), "--no-progress"]) == 2
    assert capsys.readouterr().err == f"autotune: error: {expected}\n"
    assert not (tmp_path / "run").exists()


def test_pools_too_small_for_every_schedule_name_the_size_that_would_fit(tmp_path: Path) -> None:
    path = narrow_config(tmp_path, {"pools": [{"name": "dtcm", "size": 100}, {"name": "sram", "size": 200}]})
    with pytest.raises(ConfigError, match=r"^no schedule of the space fits the memory \(pools dtcm 100, sram 200 "
                       r"bytes; no peak_limit\): the smallest total peak is 480 bytes .*a schedule fits with: "
                       r"dtcm of at least 480 bytes; sram of at least 480 bytes\. Tried: every one"):  # fmt: skip
        tune(load_config(path), progress=False, executor=InProcess())
    assert not (tmp_path / "run").exists()


def test_a_large_space_is_sampled_and_the_message_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(feasibility, "EXACT_LIMIT", 3)
    path = narrow_config(tmp_path, {"pools": [{"name": "sram", "size": "2MiB"}], "peak_limit": 100})
    with pytest.raises(ConfigError, match=r"Tried: the \d distinct schedules of a seeded sample of 3 of the 6 "
                       r"combinations .*a schedule outside the sample may need less$"):  # fmt: skip
        tune(load_config(path), progress=False, executor=InProcess())


# ---------------------------------------------------------------- the budget counts measured trials


def test_infeasible_trials_are_logged_and_do_not_use_the_budget(tmp_path: Path) -> None:
    """480 B (one row per tile) fits a 1 KiB limit; the other schedules of the space do not."""
    pools = [{"name": "sram", "size": "2MiB"}]
    cfg = load_config(narrow_config(tmp_path, {"pools": pools, "peak_limit": "1KiB"}, trials=2))
    tune(cfg, progress=False, executor=InProcess())
    logged = TrialLog.load(cfg.output / "trials.jsonl")
    measured = [r for r in logged if r.status != "infeasible"]
    infeasible = [r for r in logged if r.status == "infeasible"]
    assert len(measured) == 2 and infeasible
    assert all(
        r.peak_bytes is not None and r.peak_bytes > 1024 and "peak_limit" in r.reason for r in infeasible
    )
    assert len({r.trial for r in logged}) == len(logged)


def test_a_search_that_measures_nothing_stops(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Were the check before the run to miss (a sampled space), rounds that log only infeasible
    trials end the search instead of running for ever."""
    monkeypatch.setattr(tuner_module, "check_fits", lambda *args: None)
    monkeypatch.setattr(tuner_module, "IDLE_ROUNDS", 2)
    path = narrow_config(
        tmp_path, {"pools": [{"name": "sram", "size": "2MiB"}], "peak_limit": 100}, trials=50
    )
    executor = InProcess()
    with pytest.raises(AutotuneError, match=r"^no trial was ok \(\d+ infeasible\); the reasons are in"):
        tune(load_config(path), progress=False, executor=executor)
    logged = TrialLog.load(tmp_path / "run" / "trials.jsonl")
    assert executor.calls == 0 and logged and all(r.status == "infeasible" for r in logged)
    assert re.search(r"peak [\d,]+ bytes is over peak_limit 100 bytes", logged[0].reason)


@pytest.mark.parametrize("strategy", [{"strategy": "random"}, {"strategy": "optuna", "sampler": "tpe"}])
def test_without_a_model_a_round_tries_its_whole_batch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, strategy: dict[str, str]
) -> None:
    """Without a cost model a round tries its whole batch, as with one, and measures
    ``measure_per_round`` of the proposals that fit, at random: under a 1 KiB limit, where the
    first proposals of round 0 are over it, the round still measures two, where a round of
    ``measure_per_round`` proposals would have measured nothing and ended the search
    (``IDLE_ROUNDS`` 1)."""
    monkeypatch.setattr(tuner_module, "IDLE_ROUNDS", 1)
    memory = {"pools": [{"name": "sram", "size": "2MiB"}], "peak_limit": "1KiB"}
    path = narrow_config(tmp_path, memory, trials=2, batch=12, measure_per_round=2, seed=1, **strategy)
    tune(load_config(path), progress=False, executor=InProcess())
    logged = TrialLog.load(tmp_path / "run" / "trials.jsonl")
    assert [r.round for r in logged] == [0] * len(logged)
    statuses = [r.status for r in logged]
    assert statuses[0] == "infeasible" and statuses.count("ok") == 2
