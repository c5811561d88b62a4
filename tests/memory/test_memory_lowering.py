"""The memory-planning pass (autotune.memory.lowering) on hand-built lowered IR."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from autotune import ir
from autotune.errors import ConfigError, LoweringError, PoolOverflowError
from autotune.memory import Allocation, MemoryPlan, Pool, parse_pools
from autotune.memory.lowering import (
    allocations_of,
    annotate_plan,
    empty_plan,
    peak_memory,
    plan_memory_pass,
    plan_of,
)

X = ir.decl_buffer("X", [4096])
Y = ir.decl_buffer("Y", [4096])


@dataclass
class Options:
    """The fields of ``LowerOptions`` that the pass reads and writes."""

    pools: tuple[Pool, ...]
    planner: str = "greedy_by_size"
    seed: int = 0
    plan: MemoryPlan | None = None


def alloc(buf: ir.Buffer, body: ir.Stmt, pools: tuple[str, ...] = ()) -> ir.Allocate:
    """``Allocate`` of ``buf`` (N-d by its axis separators) around a ``DeclBuffer``."""
    extents = tuple(ir.const(e) for e in buf.physical_shape())
    ann = ir.ann_set((), "candidate_memory_pools", pools or None)
    return ir.Allocate(buf.data, buf.dtype, extents, ir.DeclBuffer(buf, body), ann)


def copy(dst: ir.Buffer, src: ir.Buffer, n: int) -> ir.For:
    """``for i in range(n): dst[i] = src[i]`` on flat buffers."""
    i = ir.Var("i")
    return ir.For(i, ir.const(0), ir.const(n), ir.ForKind.SERIAL, ir.BufferStore(dst, src[i], (i,)))


def chain(*sizes: int, pools: tuple[tuple[str, ...], ...] = ()) -> ir.Func:
    """X -> T0 -> T1 -> ... -> Y, each ``Tk`` a flat float32 buffer of ``sizes[k]`` elements."""
    temps = [ir.decl_buffer(f"T{k}", [n]) for k, n in enumerate(sizes)]
    srcs, dsts = [X, *temps], [*temps, Y]
    body: ir.Stmt = ir.seq(*(copy(d, s, min(4096, *sizes)) for s, d in zip(srcs, dsts)))
    for k in reversed(range(len(temps))):
        body = alloc(temps[k], body, pools[k] if pools else ())
    return ir.Func("chain", (X, Y), body)


def annotations(func: ir.Func) -> dict[str, tuple[object, object]]:
    """``{data var name: (pool, offset)}`` from the ``Allocate`` annotations."""
    return {
        a.data.name: (ir.ann_get(a.annotations, "pool"), ir.ann_get(a.annotations, "offset"))
        for a in ir.collect(func.body, ir.Allocate)
    }


def test_allocations_named_sized_and_timed_from_the_ir() -> None:
    f = chain(1024, 256, 1024, pools=(("sram",), (), ("dtcm", "sram")))
    assert allocations_of(f) == [
        Allocation("T0", 4096, 0, 1, ("sram",)),
        Allocation("T1", 1024, 1, 2),
        Allocation("T2", 4096, 2, 3, ("dtcm", "sram")),
    ]


def test_pass_writes_pool_and_offset_and_sets_the_plan() -> None:
    options = Options(parse_pools("dtcm=16KiB"))
    out = plan_memory_pass(chain(1024, 1024, 1024), options)
    assert options.plan is not None
    # T0 [0, 1] and T2 [2, 3] share bytes; T1 [1, 2] is live with both.
    assert annotations(out) == {"T0_data": ("dtcm", 0), "T1_data": ("dtcm", 4096), "T2_data": ("dtcm", 0)}
    assert options.plan.total_peak == 8192
    assert [p.name for p in options.plan.placements] == ["T0", "T1", "T2"]
    assert "annotations=" in str(out) and "pool" in str(out)


def test_banked_allocation_gets_one_placement_per_bank() -> None:
    banked = ir.decl_buffer("B", [2, 4096], axis_separators=(1,))
    i, j = ir.Var("i"), ir.Var("j")
    body = ir.seq(
        ir.For(
            i, ir.const(0), ir.const(4096), ir.ForKind.SERIAL, ir.BufferStore(banked, X[i], (ir.const(0), i))
        ),
        ir.For(
            j, ir.const(0), ir.const(4096), ir.ForKind.SERIAL, ir.BufferStore(banked, X[j], (ir.const(1), j))
        ),
        copy(Y, X, 4096),
    )
    f = ir.Func("banked", (X, Y), alloc(banked, body, ("dtcm", "sram")))
    options = Options(parse_pools("dtcm=16KiB,sram=1MiB"))
    out = plan_memory_pass(f, options)
    assert options.plan is not None
    assert [(p.name, p.pool, p.offset, p.size) for p in options.plan.placements] == [
        ("B.bank0", "dtcm", 0, 16384),
        ("B.bank1", "sram", 0, 16384),
    ]
    assert annotations(out) == {"B_data": (("dtcm", "sram"), (0, 0))}


def test_candidate_pools_are_honoured_in_order() -> None:
    f = chain(1024, 1024, 1024, pools=(("sram",), ("dtcm", "sram"), ()))
    out = annotate_plan(f, plan_of(f, parse_pools("dtcm=8KiB,sram=8KiB")))
    # T1 prefers dtcm; T2 (every pool) takes dtcm, the first pool, where T0 is not.
    assert annotations(out) == {"T0_data": ("sram", 0), "T1_data": ("dtcm", 0), "T2_data": ("dtcm", 4096)}


def test_overflow_propagates_with_its_fields() -> None:
    options = Options(parse_pools("dtcm=6KiB"))
    with pytest.raises(PoolOverflowError) as info:
        plan_memory_pass(chain(1024, 1024, 1024), options)
    err = info.value
    assert (err.pool, err.needed, err.available, err.suggested) == ("dtcm", 8192, 6144, 8192)
    assert "'dtcm'" in str(err) and options.plan is None


def test_unknown_candidate_pool_is_a_config_error() -> None:
    f = chain(16, pools=(("itcm",),))
    with pytest.raises(ConfigError, match="candidate pool 'itcm' is not one of the pools 'dtcm'"):
        plan_memory_pass(f, Options(parse_pools("dtcm=1KiB")))


def test_symbolic_extent_is_a_lowering_error() -> None:
    n = ir.Var("n")
    buf = ir.decl_buffer("S", [n])
    f = ir.Func("f", (X, Y), ir.Allocate(buf.data, "float32", (n,), ir.DeclBuffer(buf, copy(Y, X, 4))))
    with pytest.raises(LoweringError, match="allocation S_data needs constant positive extents"):
        allocations_of(f)


def test_repeated_names_are_made_unique() -> None:
    a1, a2 = ir.decl_buffer("A", [16]), ir.decl_buffer("A", [16])
    body = ir.seq(copy(a1, X, 16), alloc(a2, ir.seq(copy(a2, a1, 16), copy(Y, a2, 16))))
    f = ir.Func("f", (X, Y), alloc(a1, body))
    assert [a.name for a in allocations_of(f)] == ["A", "A_1"]
    out = plan_memory_pass(f, Options(parse_pools("dtcm=1KiB")))
    placed = [
        (ir.ann_get(a.annotations, "pool"), ir.ann_get(a.annotations, "offset"))
        for a in ir.collect(out.body, ir.Allocate)
    ]
    assert sorted(placed) == [("dtcm", 0), ("dtcm", 64)]


def test_peak_memory_and_empty_plan() -> None:
    pools = parse_pools("dtcm=64KiB")
    f = chain(1024, 256, 1024)
    assert peak_memory(f, pools) == plan_of(f, pools).total_peak == 4096 + 1024
    assert peak_memory(ir.Func("none", (X, Y), copy(Y, X, 4)), pools) == 0
    plan = empty_plan(pools)
    assert plan.placements == () and plan.pools == pools and plan.total_peak == 0


@pytest.mark.parametrize("planner", ["greedy_by_size", "greedy_by_conflicts", "hill_climb"])
def test_every_planner_gives_a_valid_plan(planner: str) -> None:
    options = Options(parse_pools("dtcm=8KiB,sram=64KiB"), planner=planner, seed=3)
    out = plan_memory_pass(chain(2048, 512, 1024, 2048, 256), options)
    assert options.plan is not None
    options.plan.verify()
    assert all(ir.ann_get(a.annotations, "pool") is not None for a in ir.collect(out.body, ir.Allocate))


def test_per_iteration_allocations_share_bytes() -> None:
    a, b = ir.decl_buffer("A", [1024]), ir.decl_buffer("B", [1024])
    i = ir.Var("i")
    body = ir.seq(
        alloc(a, ir.seq(copy(a, X, 1024), copy(Y, a, 1024))),
        alloc(b, ir.seq(copy(b, X, 1024), copy(Y, b, 1024))),
    )
    f = ir.Func("f", (X, Y), ir.For(i, ir.const(0), ir.const(4), ir.ForKind.SERIAL, body))
    options = Options(parse_pools("dtcm=4KiB"))
    out = plan_memory_pass(f, options)
    assert annotations(out) == {"A_data": ("dtcm", 0), "B_data": ("dtcm", 0)}
    assert options.plan is not None and options.plan.total_peak == 4096
