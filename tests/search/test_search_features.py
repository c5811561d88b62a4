"""Features of lowered programs: fixed keys, deterministic, finite, and they see what schedules change."""

from __future__ import annotations

import math

import pytest

from autotune import workloads
from autotune.lowering import lower
from autotune.memory import Pool
from autotune.schedule import Schedule
from autotune.search.features import FEATURE_NAMES, L1_BYTES, feature_vector, features

SMALL = {"height": 20, "width": 20, "channels": 8}


@pytest.fixture(scope="module")
def pool() -> workloads.Workload:
    return workloads.get("pool_chain", **SMALL)


def cascade(func, tile: int, rolling: bool = False, parallel: bool = False) -> Schedule:  # type: ignore[no-untyped-def]
    """pool1 computed per ``tile`` rows of pool2 (recomputing the halo, or as a rolling buffer)."""
    sch = Schedule(func)
    sch = sch.split(sch.get_loops("pool2")[1], [None, tile])
    outer = sch.last[0]
    sch = sch.compute_at("pool1", outer)
    if rolling:
        sch = sch.rolling_buffer("pool1", 0)
    if parallel:
        sch = sch.parallel(outer)
    return sch


def feats(wl: workloads.Workload, sch: Schedule, pools: tuple[Pool, ...] = ()) -> dict[str, float]:
    lowered = lower(sch.func, pools=pools) if pools else lower(sch.func)
    return features(lowered.func, lowered.plan, original=wl.func)


def test_keys_are_fixed_ordered_and_floats(pool: workloads.Workload) -> None:
    for sch in (Schedule(pool.func), cascade(pool.func, 4, rolling=True)):
        x = feats(pool, sch)
        assert tuple(x) == FEATURE_NAMES
        assert all(isinstance(v, float) and math.isfinite(v) for v in x.values())
        assert feature_vector(x) == [x[n] for n in FEATURE_NAMES]


def test_features_are_deterministic(pool: workloads.Workload) -> None:
    sch = cascade(pool.func, 4)
    assert feats(pool, sch) == feats(pool, sch)
    # a schedule rebuilt from its trace has the same features
    assert feats(pool, Schedule.replay(pool.func, sch.trace_json())) == feats(pool, sch)


def test_default_schedule_figures(pool: workloads.Workload) -> None:
    x = feats(pool, Schedule(pool.func))
    pool1_bytes = 18 * 18 * 8 * 4
    assert x["n_nests"] == 2 and x["n_parallel"] == 0 and x["parallel"] == 0
    assert x["n_allocations"] == 1
    assert x["largest_inter_l1"] == pytest.approx(pool1_bytes / L1_BYTES)
    assert x["largest_fits_l2"] == 1.0
    assert x["log2_workspace_peak"] == pytest.approx(math.log2(1 + pool1_bytes))
    assert x["halo_max"] == pytest.approx(1.0)
    assert x["mod_index_frac"] == 0.0
    # each pool1 element is a max over 9 inputs: about 9 ops per stored element
    assert x["log2_ops"] == pytest.approx(math.log2(1 + 9 * (18 * 18 * 8 + 16 * 16 * 8)), abs=0.1)


def test_halo_recompute_against_rolling_buffer(pool: workloads.Workload) -> None:
    recompute = feats(pool, cascade(pool.func, 4))
    rolling = feats(pool, cascade(pool.func, 4, rolling=True))
    # 4-row tiles of a 3x3 pool read 6 rows: 16 output rows -> 4 tiles x 6 = 24 of 18 pool1 rows
    assert recompute["halo_max"] == pytest.approx(24 / 18, rel=0.05)
    assert rolling["halo_max"] == pytest.approx(1.0, rel=0.05)
    assert rolling["mod_index_frac"] > 0 and recompute["mod_index_frac"] == 0
    assert rolling["log2_ops"] < recompute["log2_ops"]
    # both keep 6 rows of pool1 instead of 18
    assert recompute["log2_inter_bytes"] == pytest.approx(math.log2(1 + 6 * 18 * 8 * 4))
    assert rolling["largest_inter_l1"] < feats(pool, Schedule(pool.func))["largest_inter_l1"]


def test_parallel_and_vectorized_loops_are_counted(pool: workloads.Workload) -> None:
    par = feats(pool, cascade(pool.func, 4, parallel=True))
    assert par["parallel"] == 1.0 and par["n_parallel"] == 1
    sch = Schedule(pool.func)
    sch = sch.vectorize(sch.get_loops("pool2")[3])
    vec = feats(pool, sch)
    assert vec["n_vectorized"] == 1
    # c holds only pool2's init store; the 9x more frequent update is under rh, rw
    assert 0.0 < vec["inner_vectorized_frac"] < 0.1


def test_pools_show_in_the_plan_features(pool: workloads.Workload) -> None:
    pools = (Pool("dtcm", 64 << 10), Pool("sram", 2 << 20))
    sch = cascade(pool.func, 4).set_pools("pool1", "pool1", ["sram"])
    x = feats(pool, sch, pools)
    assert x["n_pools_used"] == 1.0


def test_without_the_original_the_halo_is_against_the_allocation(pool: workloads.Workload) -> None:
    lowered = lower(cascade(pool.func, 4).func)
    x = features(lowered.func, lowered.plan)
    # 24 rows stored into a 6-row allocation
    assert x["halo_max"] == pytest.approx(24 / 6, rel=0.05)


@pytest.mark.parametrize("name", ["pool_chain", "bottleneck", "tiny_cnn"])
def test_every_built_in_chain_has_finite_features(name: str) -> None:
    wl = workloads.get(name)
    lowered = lower(wl.func)
    values = features(lowered.func, lowered.plan, original=wl.func)
    assert list(values) == list(FEATURE_NAMES) and all(math.isfinite(v) for v in values.values())
