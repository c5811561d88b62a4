"""Storage: views at planned offsets into one aligned array per pool, banks, plan lookups."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from codegen_funcs import banked, padded_conv

from autotune import ir
from autotune.codegen import StorageArg, build
from autotune.codegen.storage import allocate_storage, placements_of
from autotune.errors import CodegenError
from autotune.memory import Allocation, MemoryPlan, Placement, Pool, plan_memory
from autotune.workloads.arrays import ALIGNMENT

POOLS = (Pool("dtcm", 4096), Pool("sram", 65536))


def _addr(a: np.ndarray) -> int:
    return int(a.ctypes.data)


def test_storage_without_plan_is_one_aligned_array_each() -> None:
    args = (StorageArg("A_data", "A", "float32", (10,)), StorageArg("B_data", "B", "float64", (3,)))
    st = allocate_storage(args)
    a, b = st.arrays
    assert a.dtype == np.float32 and a.shape == (10,) and np.isnan(a).all()
    assert b.dtype == np.float64 and b.shape == (3,)
    assert all(_addr(x) % ALIGNMENT == 0 for x in st.arrays)
    assert st.pools == {} and st.workspace_bytes == 40 + 24


def test_planned_views_alias_the_pool_array() -> None:
    args = (StorageArg("A_data", "A", "float32", (16,)), StorageArg("B_data", "B", "float32", (8,)))
    plan = plan_memory([Allocation("A", 64, 0, 1, ("dtcm",)), Allocation("B", 32, 1, 2, ("dtcm",))], POOLS)
    st = allocate_storage(args, plan)
    pool = st.pools["dtcm"]
    assert set(st.pools) == {"dtcm"} and _addr(pool) % ALIGNMENT == 0
    assert st.workspace_bytes == plan.total_peak
    for arg, view in zip(args, st.arrays):
        offset = plan.placement(arg.name).offset
        assert _addr(view) == _addr(pool) + offset and _addr(view) % ALIGNMENT == 0
        assert np.shares_memory(view, pool)
        # write through the pool, read through the view (and back)
        pool[offset : offset + 4] = np.frombuffer(np.float32(3.5).tobytes(), np.uint8)
        assert view[0] == np.float32(3.5)
        view[1] = 7.0
        assert pool[offset + 4 : offset + 8].view(np.float32)[0] == 7.0


def test_allocations_with_disjoint_lifetimes_share_bytes() -> None:
    args = (StorageArg("A_data", "A", "float32", (16,)), StorageArg("B_data", "B", "float32", (16,)))
    plan = plan_memory([Allocation("A", 64, 0, 0), Allocation("B", 64, 1, 1)], POOLS)
    a, b = allocate_storage(args, plan).arrays
    assert np.shares_memory(a, b)  # the planner reused the bytes; the views follow it


def test_annotations_take_precedence_over_plan_names() -> None:
    arg = StorageArg("T_data", "T", "float32", (16,), (("offset", 128), ("pool", "sram")))
    plan = MemoryPlan((Placement("T", "dtcm", 0, 64, 0, 1),), POOLS, "manual")
    assert placements_of(arg, plan) == [("sram", 128, None)]
    st = allocate_storage((arg,), plan)
    assert _addr(st.arrays[0]) == _addr(st.pools["sram"]) + 128


def test_banked_storage_from_annotations_and_from_names() -> None:
    by_ann = StorageArg("T_data", "T", "float32", (2, 16), (("offset", (0, 64)), ("pool", ("dtcm", "dtcm"))))
    plan = MemoryPlan(
        (Placement("T.bank0", "dtcm", 64, 64, 0, 1), Placement("T.bank1", "sram", 0, 64, 0, 1)),
        POOLS,
        "manual",
    )
    (banks,) = allocate_storage((by_ann,), plan).arrays
    assert isinstance(banks, tuple) and len(banks) == 2 and all(b.shape == (16,) for b in banks)
    by_name = replace(by_ann, annotations=())
    assert placements_of(by_name, plan) == [("dtcm", 64, 64), ("sram", 0, 64)]
    st = allocate_storage((by_name,), plan)
    b0, b1 = st.arrays[0]
    assert _addr(b0) == _addr(st.pools["dtcm"]) + 64 and _addr(b1) == _addr(st.pools["sram"])


def test_plan_errors() -> None:
    arg = StorageArg("T_data", "T", "float32", (16,))
    plan = MemoryPlan((Placement("U", "dtcm", 0, 64, 0, 1),), POOLS, "manual")
    with pytest.raises(CodegenError, match="places no allocation 'T' \\(known: U\\)"):
        allocate_storage((arg,), plan)
    small = MemoryPlan((Placement("T", "dtcm", 0, 32, 0, 1),), POOLS, "manual")
    with pytest.raises(CodegenError, match="needs 64 bytes, the plan gives 32"):
        allocate_storage((arg,), small)
    banked_arg = StorageArg("T_data", "T", "float32", (2, 16), (("offset", (0,)), ("pool", ("dtcm",))))
    with pytest.raises(CodegenError, match="has 2 bank"):
        allocate_storage((banked_arg,), plan)
    unknown = StorageArg("T_data", "T", "float32", (16,), (("offset", 0), ("pool", "l3")))
    with pytest.raises(CodegenError, match="unknown pool 'l3'"):
        allocate_storage((unknown,), plan)


@pytest.mark.slow
def test_kernel_computes_in_planned_pool() -> None:
    func, reference = padded_conv(height=5, width=4)
    (alloc,) = ir.collect(func, ir.Allocate)
    size = 1 * 7 * 6 * 3 * 4
    plan = plan_memory([Allocation("pad", size, 0, 1, ("dtcm",))], POOLS)
    kernel = build(func, plan)
    pad = kernel.storage[0]
    assert np.shares_memory(pad, kernel.pools["dtcm"]) and kernel.workspace_bytes == plan.total_peak
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1, 5, 4, 3)).astype(np.float32)
    w = rng.standard_normal((3, 3, 3, 4)).astype(np.float32)
    out = np.full((1, 5, 4, 4), np.nan, np.float32)
    kernel(x, w, out)
    np.testing.assert_allclose(out, reference(x, w)[0], rtol=1e-5, atol=1e-5)
    # the padded input really lives in the pool bytes
    assert (
        kernel.pools["dtcm"][: pad.nbytes].view(np.float32).reshape(1, 7, 6, 3)[0, 1, 1, 0] == x[0, 0, 0, 0]
    )
    assert alloc.data.name == "pad_data"


@pytest.mark.slow
def test_banked_kernel_with_banks_in_two_pools() -> None:
    func, reference = banked(32)
    plan = MemoryPlan(
        (Placement("T.bank0", "dtcm", 128, 64, 0, 1), Placement("T.bank1", "sram", 64, 64, 0, 1)),
        POOLS,
        "manual",
    )
    kernel = build(func, plan)
    b0, b1 = kernel.storage[0]
    assert _addr(b0) == _addr(kernel.pools["dtcm"]) + 128 and _addr(b1) == _addr(kernel.pools["sram"]) + 64
    x = np.arange(32, dtype=np.float32)
    out = np.full(32, np.nan, np.float32)
    kernel(x, out)
    np.testing.assert_array_equal(out, reference(x)[0])
    np.testing.assert_array_equal(b0, x[:16] * 2)
    np.testing.assert_array_equal(b1, x[16:] * 2)
