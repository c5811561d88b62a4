"""Each bank of an axis-separated buffer pinned to its own pool (``set_pools(..., per_bank=True)``).

The seed's scratchpad: a staged tile laid out ``[2, bank]`` with an axis separator is two
physical allocations; pinned per bank, bank 0 lands in ``tcm0`` and bank 1 in ``tcm1``, each
pool holding exactly one bank. Double-buffered, the tile has four banks (slot x bank), and bank
``k`` goes to pool ``k % 2``.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest

from autotune import ir, te
from autotune.errors import PoolOverflowError, ScheduleError
from autotune.lowering import lower
from autotune.memory import Pool
from autotune.schedule import AXIS_SEPARATOR, Schedule

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "schedule"))
from fuzz_steps import run_source

N, TILE, BANK = 4096, 2048, 1024
BANK_BYTES = BANK * 4


def scratchpad() -> Schedule:
    """``B = A * 2`` over N elements in tiles of TILE, A staged per tile as ``A_global[2, BANK]``."""
    a = te.placeholder((N,), "float32", name="A")
    b = te.compute((N,), lambda i: a[i] * 2.0, name="B")
    sch = Schedule(te.create_func([a], [b], name="scratch")).split("i", [None, TILE], names=["io", "ii"])
    sch = sch.cache_read("B", 0, "global").compute_at("A_global", "io")
    return sch.transform_layout("A_global", "A_global", lambda i: [i // BANK, AXIS_SEPARATOR, i % BANK])


def placements(sch: Schedule, pools: tuple[Pool, ...]) -> dict[str, tuple[str, int]]:
    lowered = lower(sch.func, pools=pools, verify=True)
    x = np.arange(N, dtype=np.float32)
    out = np.full(N, np.nan, np.float32)
    run_source(lowered, (x,), [out])
    np.testing.assert_array_equal(out, x * 2)
    return {p.name: (p.pool, p.offset) for p in lowered.plan.placements}


def test_each_bank_lands_in_its_own_pool():
    sch = scratchpad().set_pools("A_global", "A_global", ["tcm0", "tcm1"], per_bank=True)
    pools = (Pool("tcm0", BANK_BYTES), Pool("tcm1", BANK_BYTES))
    assert placements(sch, pools) == {"A_global.bank0": ("tcm0", 0), "A_global.bank1": ("tcm1", 0)}
    assert str(Schedule.replay(scratchpad().original, sch.trace).func) == str(sch.func)
    assert '"per_bank": true' in sch.trace_json()


def test_without_pinning_both_banks_may_share_a_pool():
    sch = scratchpad().set_pools("A_global", "A_global", ["tcm0", "tcm1"])
    pools = (Pool("tcm0", 2 * BANK_BYTES), Pool("tcm1", 2 * BANK_BYTES))
    assert placements(sch, pools) == {"A_global.bank0": ("tcm0", 0), "A_global.bank1": ("tcm0", BANK_BYTES)}
    assert "per_bank" not in sch.trace_json()


def test_a_pinned_bank_does_not_move_to_another_pool():
    sch = scratchpad().set_pools("A_global", "A_global", ["tcm0", "tcm1"], per_bank=True)
    # tcm1 cannot hold bank 1, and tcm0 has room for it: pinned, it stays out of tcm0
    with pytest.raises(PoolOverflowError):
        lower(sch.func, pools=(Pool("tcm0", 4 * BANK_BYTES), Pool("tcm1", BANK_BYTES // 2)))


def test_a_double_buffered_scratchpad_alternates_its_banks_between_the_pools():
    sch = scratchpad().set_pools("A_global", "A_global", ["tcm0", "tcm1"], per_bank=True).double_buffer("A_global")
    pools = (Pool("tcm0", 2 * BANK_BYTES), Pool("tcm1", 2 * BANK_BYTES))
    got = placements(sch, pools)
    assert {name: pool for name, (pool, _) in got.items()} == {
        "A_global.bank0": "tcm0", "A_global.bank1": "tcm1", "A_global.bank2": "tcm0", "A_global.bank3": "tcm1",
    }


def test_pinning_needs_banks():
    a = te.placeholder((N,), "float32", name="A")
    b = te.compute((N,), lambda i: a[i] * 2.0, name="B")
    sch = Schedule(te.create_func([a], [b], name="scratch")).split("i", [None, TILE], names=["io", "ii"])
    sch = sch.cache_read("B", 0, "global").compute_at("A_global", "io")
    message = "set_pools: 'A_global' has no axis separators, so one bank: transform_layout it into banks first"
    with pytest.raises(ScheduleError, match="^" + re.escape(message) + "$"):
        sch.set_pools("A_global", "A_global", ["tcm0", "tcm1"], per_bank=True)
    allocs = [a for a in ir.collect(lower(scratchpad().func).func.body, ir.Allocate)]
    assert [len(a.extents) for a in allocs] == [2]
