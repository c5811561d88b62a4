"""What a search keeps of the candidates it applied and lowered (``autotune.search.prepared``): each
set of knobs is applied once to be keyed, each schedule lowered once until it is forgotten, and the
figures kept are those of the lowering."""

from __future__ import annotations

from pathlib import Path

import pytest
from search_runs import count_lowerings, write_run_config

from autotune import workloads
from autotune.config import load_config, load_workload
from autotune.search import candidates
from autotune.search.prepared import Fit, Over, Prepared
from autotune.search.space import load_space
from autotune.search.stopwatch import Stopwatch

# a 12x12x4 pool chain under a 1 KiB peak limit: a tile of rows fits, pool1 whole at root does not
WORKLOAD = {"name": "pool_chain", "args": {"height": 12, "width": 12, "channels": 4}}
MEMORY = {"pools": [{"name": "sram", "size": "2MiB"}], "peak_limit": "1KiB"}


def _prepared(tmp_path: Path) -> Prepared:
    cfg = load_config(write_run_config(tmp_path, "run", WORKLOAD, memory=MEMORY, trials=2))
    wl = load_workload(cfg.workload)
    return Prepared(cfg, wl, load_space(cfg.search.space, wl, cfg.memory.pools), Stopwatch())


def test_a_schedule_is_lowered_once_until_forgotten_and_keeps_its_lowerings_figures(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    prepared = _prepared(tmp_path)
    space, cfg = prepared.space, prepared.cfg
    fits = candidates.complete(space, {"tile_rows": 1, "strip": 0})
    over = candidates.complete(space, {"at_pool1": "root"})
    real = candidates.lower_candidate
    lowered = count_lowerings(monkeypatch)

    key, sch, trace = prepared.key(fits)
    assert sch is not None and trace is not None
    assert prepared.key(fits) == (key, None, None)  # keyed before: not applied again
    fit = prepared.prepare(fits, key, sch, trace)
    assert isinstance(fit, Fit) and fit.trace == trace and len(lowered) == 1
    low = real(sch.func, cfg.memory.pools, cfg.memory.planner, cfg.search.seed, cfg.memory.peak_limit)
    assert (fit.peak, fit.pool_bytes, fit.excess) == (low.peak, low.pool_bytes, low.excess)
    assert fit.peak <= 1024 and fit.excess <= 0 and len(fit.row) > 0
    assert prepared.prepare(fits, key, None, None) is fit and len(lowered) == 1  # kept

    over_key, _, _ = prepared.key(over)
    unfit = prepared.prepare(over, over_key, None, None)  # keyed only: applied again to be lowered
    assert isinstance(unfit, Over) and unfit.lowering.lowered is None and unfit.lowering.peak > 1024
    assert unfit.lowering.excess > 0 and "peak_limit" in unfit.lowering.reason
    assert prepared.prepare(over, over_key, None, None) is unfit and len(lowered) == 2

    prepared.forget(key)
    prepared.forget(over_key)
    assert key not in prepared.fits and over_key not in prepared.unfit
    assert isinstance(prepared.prepare(fits, key, None, None), Fit) and len(lowered) == 3  # lowered anew


def test_a_logged_trace_gets_its_row_and_one_that_no_longer_applies_gets_none(tmp_path: Path) -> None:
    prepared = _prepared(tmp_path)
    knobs = candidates.complete(prepared.space, {"tile_rows": 2})
    key, sch, trace = prepared.key(knobs)
    assert trace is not None
    fit = prepared.prepare(knobs, key, sch, trace)
    assert isinstance(fit, Fit) and prepared.replay_row(trace) == fit.row
    other = Prepared(prepared.cfg, workloads.get("matmul", m=16, n=32, k=16), prepared.space, Stopwatch())
    assert other.replay_row(trace) is None  # a log of another workload: its blocks are not there
