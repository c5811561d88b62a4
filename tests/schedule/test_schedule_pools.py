"""set_pools and set_scope: candidate memory pools (RFC 0023) from the schedule to the memory plan.

``set_pools`` annotates the allocating block with ``candidate_memory_pools``;
lowering copies each buffer's entry onto its ``Allocate`` (wherever compaction
moved it) and the planner adds ``pool`` and ``offset``.
"""

from __future__ import annotations

import re

import pytest
from ir_helpers import allocations

from autotune import ir, te, workloads
from autotune.errors import ConfigError, PoolOverflowError, ScheduleError
from autotune.lowering import lower
from autotune.memory import Pool
from autotune.schedule import Schedule
from autotune.schedule.recipes import cascade

DTCM, SRAM = Pool("dtcm", 64 * 1024), Pool("sram", 2 * 1024 * 1024)
POOLS = (DTCM, SRAM)


@pytest.fixture(scope="module")
def pool():
    return workloads.get("pool_chain", height=14, width=9, channels=4)


@pytest.fixture(scope="module")
def neck():
    return workloads.get("bottleneck", height=7, width=5, cin=4, expand=8)


def placed(neck) -> Schedule:  # type: ignore[no-untyped-def]
    """The bottleneck row by row, expand rolling; expand only in sram, depthwise preferably in dtcm."""
    sch = cascade(neck.func, "project", ["depthwise", "expand"], tile=1, rolling=["expand"])
    return sch.set_pools("expand", "expand", ["sram"]).set_pools("depthwise", "depthwise", ["dtcm", "sram"])


def allocate_annotations(func: ir.Func) -> dict[str, dict[str, object]]:
    return {
        a.data.name.removesuffix("_data"): dict(a.annotations) for a in ir.collect(func.body, ir.Allocate)
    }


def same_text(func: ir.Func, sch: Schedule) -> None:
    assert str(Schedule.replay(func, sch.trace).func) == str(sch.func)
    assert str(Schedule.replay(func, sch.trace_json()).func) == str(sch.func)


# ---- golden IR and the lowered annotations ---------------------------------
def test_set_pools_golden(neck, golden):
    sch = placed(neck).set_scope("depthwise", "depthwise", "shared")
    text = str(sch.func)
    golden("schedule/set_pools", text)
    assert (
        'T.block_attr({"candidate_memory_pools": {"depthwise": ["dtcm", "sram"], "expand": ["sram"]}})'
        in text
    )
    assert 'depthwise = T.alloc_buffer((1, 7, 5, 8), "float32", scope="shared")' in text
    lowered = lower(sch.func, pools=POOLS, verify=True)
    golden("schedule/set_pools_lowered", str(lowered.func))
    assert allocate_annotations(lowered.func) == {
        "expand": {"candidate_memory_pools": ("sram",), "pool": "sram", "offset": 0},
        "depthwise": {"candidate_memory_pools": ("dtcm", "sram"), "pool": "dtcm", "offset": 0},
        # promoted accumulators live in registers: no candidates, no pool, no offset
        "expand_acc": {"scope": "local"},
        "depthwise_acc": {"scope": "local"},
        "project_flat_acc": {"scope": "local"},
    }
    same_text(neck.func, sch)


def test_sram_only_lands_in_sram_when_dtcm_has_room(pool):
    for sch in (Schedule(pool.func), cascade(pool.func, "pool2", ["pool1"], tile=4, rolling=["pool1"])):
        free = lower(sch.func, pools=POOLS, verify=True)
        assert free.plan.placement("pool1").pool == "dtcm"  # no candidates: the first pool that fits
        pinned = sch.set_pools("pool1", "pool1", ["sram"])
        lowered = lower(pinned.func, pools=POOLS, verify=True)
        ann = allocate_annotations(lowered.func)["pool1"]
        assert ann == {"candidate_memory_pools": ("sram",), "pool": "sram", "offset": 0}
        assert lowered.plan.pool_peaks == {"dtcm": 0, "sram": free.plan.total_peak}
        same_text(pool.func, pinned)


def test_compacted_allocation_keeps_its_pools(pool):
    """compact_buffers moves pool1 into the tile loop; its candidates go with it."""
    sch = cascade(pool.func, "pool2", ["pool1"], tile=4).set_pools("pool1", "pool1", ["sram"])
    lowered = lower(sch.func, pools=POOLS, verify=True)
    assert allocations(lowered.func)["pool1"] == (6 * 7 * 4,)
    assert allocate_annotations(lowered.func)["pool1"]["pool"] == "sram"


def test_second_candidate_when_the_first_is_full(neck):
    small_dtcm = (Pool("dtcm", 256), SRAM)
    sch = cascade(neck.func, "project", ["depthwise", "expand"], tile=1, rolling=["expand"])
    sch = sch.set_pools("expand", "expand", ["dtcm", "sram"]).set_pools(
        "depthwise", "depthwise", ["dtcm", "sram"]
    )
    plan = lower(sch.func, pools=small_dtcm, verify=True).plan
    # expand's 3-row window (480 B) does not fit 256 B; depthwise's row (160 B) does
    assert plan.placement("expand").pool == "sram"
    assert plan.placement("depthwise").pool == "dtcm"


def test_set_pools_twice_replaces(pool):
    sch = Schedule(pool.func).set_pools("pool1", "pool1", ["dtcm"]).set_pools("pool1", "pool1", ["sram"])
    assert 'T.block_attr({"candidate_memory_pools": {"pool1": ["sram"]}})' in str(sch.func)
    assert lower(sch.func, pools=POOLS).plan.placement("pool1").pool == "sram"
    same_text(pool.func, sch)


# ---- pools that cannot hold the schedule -----------------------------------
def test_pools_too_small(pool):
    sch = cascade(pool.func, "pool2", ["pool1"], tile=4, rolling=["pool1"])
    message = (
        "allocation 'pool1' (672 bytes) does not fit pool 'dtcm': needs 672 bytes at peak, "
        "pool has 256; a 'dtcm' of at least 672 bytes would fit"
    )
    with pytest.raises(PoolOverflowError, match=f"^{re.escape(message)}$") as info:
        lower(sch.func, pools=(Pool("dtcm", 256),))
    assert (info.value.pool, info.value.needed, info.value.available) == ("dtcm", 672, 256)


def test_restricted_to_a_pool_too_small(pool):
    """sram has room, but the allocation may only go to dtcm."""
    sch = Schedule(pool.func).set_pools("pool1", "pool1", ["dtcm"])
    with pytest.raises(
        PoolOverflowError,
        match=re.escape("does not fit pool 'dtcm': needs 1,344 bytes at peak, pool has 256"),
    ) as info:
        lower(sch.func, pools=(Pool("dtcm", 256), SRAM))
    assert (info.value.pool, info.value.needed, info.value.available) == ("dtcm", 1344, 256)


def test_unknown_pool_is_named_at_lowering(pool):
    sch = Schedule(pool.func).set_pools("pool1", "pool1", ["l2"])
    message = "allocation 'pool1': candidate pool 'l2' is not one of the pools 'dtcm', 'sram'"
    with pytest.raises(ConfigError, match=f"^{re.escape(message)}$"):
        lower(sch.func, pools=POOLS)


# ---- preconditions ---------------------------------------------------------
def raises(message: str):  # type: ignore[no-untyped-def]
    return pytest.raises(ScheduleError, match=f"^{re.escape(message)}$")


@pytest.mark.parametrize(
    ("block", "buffer", "pools", "message"),
    [
        (
            "pool2",
            "pool2",
            ["dtcm"],
            "'pool2' is a function parameter; only intermediate allocations can be placed",
        ),
        (
            "pool1",
            "data",
            ["dtcm"],
            "'data' is a function parameter; only intermediate allocations can be placed",
        ),
        ("pool1", "pool1", [], "pools must be a non-empty list of pool names, got []"),
        ("pool1", "pool1", [""], "pools must be a non-empty list of pool names, got ['']"),
        ("pool1", "pool1", ["dtcm", "sram", "dtcm"], "pools repeated in ['dtcm', 'sram', 'dtcm']"),
        ("pool1", "ghost", ["dtcm"], "block 'pool1' does not access a buffer named 'ghost'"),
        ("nope", "pool1", ["dtcm"], "no block named 'nope' (blocks: pool1, pool2)"),
    ],
    ids=["output", "input", "empty", "empty-name", "repeated", "unknown-buffer", "unknown-block"],
)
def test_set_pools_preconditions(pool, block, buffer, pools, message):
    with raises(f"set_pools: {message}"):
        Schedule(pool.func).set_pools(block, buffer, pools)


@pytest.mark.parametrize(
    ("buffer", "scope", "message"),
    [
        ("pool1", "", "scope must be a non-empty string, got ''"),
        ("data", "local", "'data' is a function parameter; only intermediate allocations can be placed"),
        ("ghost", "local", "block 'pool1' does not access a buffer named 'ghost'"),
    ],
    ids=["empty", "input", "unknown-buffer"],
)
def test_set_scope_preconditions(pool, buffer, scope, message):
    with raises(f"set_scope: {message}"):
        Schedule(pool.func).set_scope("pool1", buffer, scope)


# ---- numbers ---------------------------------------------------------------
@pytest.mark.slow
def test_pool_chain_numbers(pool, run_func):
    sch = cascade(pool.func, "pool2", ["pool1"], tile=4, rolling=["pool1"])
    sch = sch.set_pools("pool1", "pool1", ["sram"]).set_scope("pool1", "pool1", "shared")
    lowered = run_func(pool, sch.func, pools=POOLS)
    assert lowered.plan.placement("pool1").pool == "sram"
    same_text(pool.func, sch)


@pytest.mark.slow
def test_bottleneck_numbers(neck, run_func):
    lowered = run_func(neck, placed(neck).func, pools=POOLS)
    assert {p.name: p.pool for p in lowered.plan.placements} == {"expand": "sram", "depthwise": "dtcm"}
    # and unscheduled: both full-size intermediates, pinned to different pools
    sch = (
        Schedule(neck.func)
        .set_pools("expand", "expand", ["sram"])
        .set_pools("depthwise", "depthwise", ["dtcm"])
    )
    lowered = run_func(neck, sch.func, pools=POOLS)
    assert {p.name: p.pool for p in lowered.plan.placements} == {"expand": "sram", "depthwise": "dtcm"}


# ---- with double_buffer ---------------------------------------------------
def test_double_buffer_keeps_pools():
    a = te.placeholder((64,), "float32", name="A")
    b = te.compute((64,), lambda i: a[i] * 2.0, name="B")
    sch = Schedule(te.create_func([a], [b], name="stage")).split("i", [None, 16], names=["io", "ii"])
    sch = sch.cache_read("B", 0, "shared")
    cache = sch.last[0]
    sch = sch.compute_at(cache, "io").set_pools(cache, cache, ["sram"]).double_buffer(cache)
    lowered = lower(sch.func, pools=POOLS, verify=True)
    assert allocate_annotations(lowered.func)[cache]["pool"] == ("sram", "sram")


def test_double_buffer_inside_another_compacted_buffer_keeps_pools():
    a = te.placeholder((8, 64), "float32", name="A")
    c = te.placeholder((8, 64), "float32", name="C")
    b = te.compute((8, 64), lambda i, j: a[i, j] * 2.0 + c[i, j], name="B")
    sch = Schedule(te.create_func([a, c], [b], name="stage2")).split("j", [None, 16], names=["jo", "ji"])
    sch = sch.cache_read("B", 0, "global").compute_at("A_global", "i")
    sch = sch.cache_read("B", 1, "shared").compute_at("C_shared", "jo")
    sch = sch.set_pools("C_shared", "C_shared", ["sram"]).double_buffer("C_shared")
    lowered = lower(sch.func, pools=POOLS, verify=True)
    assert allocate_annotations(lowered.func)["C_shared"]["pool"] == ("sram", "sram")


def test_pools_and_registers_exclude_each_other() -> None:
    w = workloads.get("pool_chain", height=8, width=8, channels=4)
    unrolled = Schedule(w.func)  # a local buffer is indexed by unrolled loops only (set_scope checks)
    for block in ("pool1", "pool2"):
        for loop in unrolled.get_loops(block):
            unrolled = unrolled.unroll(loop)
    local = unrolled.set_scope("pool1", "pool1", "local")
    with pytest.raises(ScheduleError, match=r"^set_pools: 'pool1' has scope local: it lives in registers, in no pool$"):
        local.set_pools("pool1", "pool1", ["dtcm"])
    placed = Schedule(w.func).set_pools("pool1", "pool1", ["dtcm"])
    with pytest.raises(ScheduleError, match=r"^set_scope: 'pool1' has candidate pools \(set_pools\); a local buffer lives in registers$"):
        placed.set_scope("pool1", "pool1", "local")
