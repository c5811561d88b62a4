"""Access regions: block regions, relaxation under tile loops, clipping, union, fallback."""

from __future__ import annotations

import random

import pytest
from analysis_exprs import evaluate

from autotune import ir
from autotune.analysis import (
    Analyzer,
    Interval,
    block_access_regions,
    clip_region,
    region_extents_const,
    relax_region,
    substitute_bindings,
    union_regions,
)
from autotune.errors import IRError

I = ir.IntImm
n, ho, hi, w, c, rh, rw = (ir.Var(s) for s in ("n", "ho", "hi", "w", "c", "rh", "rw"))
v_n, v_h, v_w, v_c, v_rh, v_rw = (ir.Var("v_" + s) for s in ("n", "h", "w", "c", "rh", "rw"))


def _iv(var: ir.Var, extent: int, kind: str = "spatial") -> ir.IterVar:
    return ir.IterVar(var, ir.Range.of(0, extent), kind)


def _texts(regions: tuple[ir.BufferRegion, ...]) -> list[str]:
    return [str(r) for r in regions]


def _pool_block(a: ir.Buffer, out: ir.Buffer, stride: int = 1) -> ir.Block:
    """out[n, h, w, c] = max over rh, rw of a[n, h*stride + rh, w + rw, c], tiled as h = ho*4 + hi."""
    point = (v_n, v_h, v_w, v_c)
    body = ir.BufferStore(out, ir.max_(out[point], a[v_n, v_h * stride + v_rh, v_w + v_rw, v_c]), point)
    init = ir.BufferStore(out, ir.FloatImm(-3.0e38), point)
    ivs = (
        _iv(v_n, 1),
        _iv(v_h, 32),
        _iv(v_w, 8),
        _iv(v_c, 8),
        _iv(v_rh, 3, "reduce"),
        _iv(v_rw, 3, "reduce"),
    )
    return ir.Block("pool", ivs, (n, ho * 4 + hi, w, c, rh, rw), body, init=init)


TILE = {hi: ir.Range.of(0, 4), rh: ir.Range.of(0, 3), w: ir.Range.of(0, 8), rw: ir.Range.of(0, 3)}


def test_pool_block_reads_its_window_and_the_reduction_output() -> None:
    a, out = ir.decl_buffer("A", (1, 34, 10, 8)), ir.decl_buffer("B", (1, 32, 8, 8))
    reads, writes, fallback = block_access_regions(_pool_block(a, out))
    assert _texts(reads) == ["B[v_n, v_h, v_w, v_c]", "A[v_n, v_h + v_rh, v_w + v_rw, v_c]"]
    assert _texts(writes) == ["B[v_n, v_h, v_w, v_c]"]
    assert fallback == ()


def test_pool_region_relaxed_under_tile_loops_is_six_rows() -> None:
    a, out = ir.decl_buffer("A", (1, 34, 10, 8)), ir.decl_buffer("B", (1, 32, 8, 8))
    block = _pool_block(a, out)
    loops = substitute_bindings(block_access_regions(block)[0][1], block)
    assert str(loops) == "A[n, ho * 4 + hi + rh, w + rw, c]"
    region = relax_region(loops, TILE)
    assert str(region) == "A[n, ho * 4:ho * 4 + 6, 0:10, c]"
    assert str(region.region[1].min) == "ho * 4" and region_extents_const(region) == (1, 6, 10, 1)


def test_stride_two_window_is_nine_rows() -> None:
    a, out = ir.decl_buffer("A", (1, 65, 10, 8)), ir.decl_buffer("B", (1, 32, 8, 8))
    block = _pool_block(a, out, stride=2)
    region = relax_region(substitute_bindings(block_access_regions(block)[0][1], block), TILE)
    assert str(region) == "A[n, ho * 8:ho * 8 + 9, 0:10, c]"


def test_union_of_neighbouring_points_in_a_block() -> None:
    src, dst = ir.decl_buffer("C", (17,)), ir.decl_buffer("D", (16,))
    block = ir.Block("u", (_iv(v_h, 16),), (n,), ir.BufferStore(dst, src[v_h] + src[v_h + 1], (v_h,)))
    assert _texts(block_access_regions(block)[0]) == ["C[v_h:v_h + 2]"]
    wide = ir.Block("u", (_iv(v_h, 16),), (n,), ir.BufferStore(dst, src[v_h + 1] + src[v_h - 1], (v_h,)))
    (region,) = block_access_regions(wide)[0]
    assert str(region) == "C[v_h - 1:v_h - 1 + 3]"
    assert str(region.region[0].min) == "v_h - 1" and region_extents_const(region) == (3,)


def test_padded_window_is_clipped_at_the_borders() -> None:
    p = ir.decl_buffer("P", (32, 32))
    window = ir.BufferRegion(p, (ir.Range(ho * 4 + hi - 1 + rh, I(1)), ir.Range(w, I(1))))
    region = relax_region(window, {hi: ir.Range.of(0, 4), rh: ir.Range.of(0, 3), w: ir.Range.of(0, 32)})
    assert str(region) == "P[ho * 4 - 1:ho * 4 - 1 + 6, 0:32]"
    an = Analyzer({ho: Interval(0, 7)})
    clipped = clip_region(region, an)
    lo, extent = clipped.region[0].min, clipped.region[0].extent
    assert str(lo) == "T.max(ho * 4 - 1, 0)"
    assert str(extent) == "T.min(ho * 4 + 5, 32) - T.max(ho * 4 - 1, 0)"
    assert clipped.region[1] is region.region[1]
    for tile in range(8):  # the numbers: exactly the rows of the window inside the buffer
        start, size = evaluate(lo, {ho: tile}), evaluate(extent, {ho: tile})
        assert list(range(start, start + size)) == [
            r for r in range(tile * 4 - 1, tile * 4 + 5) if 0 <= r < 32
        ]


def test_clip_keeps_a_region_that_stays_inside() -> None:
    p = ir.decl_buffer("P", (32, 32))
    region = ir.BufferRegion(p, (ir.Range(ho * 4 - 1, I(6)), ir.Range.of(0, 32)))
    assert clip_region(region, Analyzer({ho: Interval(1, 6)})) == region
    upper = clip_region(region, Analyzer({ho: Interval(1, 7)}))
    assert str(upper.region[0].min) == "ho * 4 - 1"
    assert str(upper.region[0].extent) == "T.min(ho * 4 + 5, 32) - ho * 4 + 1"
    constant = ir.BufferRegion(p, (ir.Range.of(-1, 6), ir.Range.of(30, 4)))
    assert str(clip_region(constant)) == "P[0:5, 30:32]"


def test_float_index_falls_back_to_the_full_extent() -> None:
    src, dst = ir.decl_buffer("R", (16, 16)), ir.decl_buffer("O", (8, 8))
    row = ir.Cast("int32", ir.floor(ir.Cast("float32", v_h) * 2.0 + 0.5))
    block = ir.Block(
        "resize", (_iv(v_h, 8), _iv(v_w, 8)), (n, w), ir.BufferStore(dst, src[row, v_w * 2], (v_h, v_w))
    )
    reads, writes, fallback = block_access_regions(block)
    assert _texts(reads) == ["R[0:16, v_w * 2]"]
    assert _texts(writes) == ["O[v_h, v_w]"]
    assert fallback == ("R",)


def test_select_and_gather_indices_fall_back() -> None:
    src, idx, dst = ir.decl_buffer("S", (10,)), ir.decl_buffer("G", (8,), "int32"), ir.decl_buffer("O", (8,))
    value = src[ir.select(v_h < 4, v_h, v_h + 2)] + src[idx[v_h]]
    block = ir.Block("g", (_iv(v_h, 8),), (n,), ir.BufferStore(dst, value, (v_h,)))
    reads, _, fallback = block_access_regions(block)
    assert _texts(reads) == ["S[0:10]", "G[v_h]"]
    assert fallback == ("S",)


def test_inner_loops_allocations_and_nested_blocks() -> None:
    src, dst = ir.decl_buffer("S", (64,)), ir.decl_buffer("O", (16,))
    tmp = ir.decl_buffer("T", (4,))
    k, v_k = ir.Var("k"), ir.Var("v_k")
    inner = ir.Block("inner", (_iv(v_k, 4),), (k,), ir.BufferStore(tmp, src[v_h * 4 + v_k], (v_k,)))
    body = ir.seq(
        ir.For(k, I(0), I(4), ir.ForKind.SERIAL, inner),
        ir.For(k, I(0), I(4), ir.ForKind.SERIAL, ir.BufferStore(dst, tmp[k] + src[v_h * 4 + k // 2], (v_h,))),
    )
    block = ir.Block("outer", (_iv(v_h, 16),), (n,), body, alloc_buffers=(tmp,))
    reads, writes, fallback = block_access_regions(block)
    assert _texts(reads) == ["S[v_h * 4:v_h * 4 + 4]"]
    assert _texts(writes) == ["O[v_h]"]
    assert fallback == ()


def test_relax_quasi_affine_indices() -> None:
    buf = ir.decl_buffer("C", (64,))
    dom = {hi: ir.Range.of(0, 4)}

    def relaxed(index: ir.Expr) -> str:
        return str(relax_region(ir.BufferRegion(buf, (ir.Range(index, I(1)),)), dom))

    assert relaxed((ho * 4 + hi) // 2) == "C[ho * 2:ho * 2 + 2]"
    assert relaxed((ho * 3 + hi) // 2) == "C[ho * 3 // 2:ho * 3 // 2 + 3]"
    assert relaxed((ho * 4 + hi) % 8) == "C[0:8]"
    assert relaxed((ho * 8 + hi) % 8) == "C[0:4]"
    assert relaxed(ir.min_(hi, 2) + ho) == "C[ho:ho + 3]"
    assert relaxed(ir.Cast("int32", ir.floor(ir.Cast("float32", hi) * 2.0))) == "C[0:64]"
    assert relaxed(ho * 2) == "C[ho * 2]"


def test_relax_domain_with_symbolic_min() -> None:
    buf = ir.decl_buffer("C", (64,))
    region = ir.BufferRegion(buf, (ir.Range(w + rh, I(1)),))
    doms = {w: ir.Range(ho * 4, I(4)), rh: ir.Range.of(0, 3)}
    assert str(relax_region(region, doms)) == "C[ho * 4:ho * 4 + 6]"


def test_relax_domain_whose_start_a_rolling_buffer_made_conditional() -> None:
    """A rolling buffer's first tile computes every row of its window, later tiles the new ones:
    ``for y in [select(ho == 0, 0, 2), 3)``; y runs within [0, 2] and the window of ``w[ho + y + rh]``
    is 5 rows at ``ho``, not the whole buffer."""
    buf = ir.decl_buffer("C", (64,))
    first = ir.Select(ir.EQ(ho, I(0)), I(0), I(2))
    doms = {w: ir.Range(first, I(3) - first), rh: ir.Range.of(0, 3)}
    region = ir.BufferRegion(buf, (ir.Range(ho + w + rh, I(1)),))
    assert str(relax_region(region, doms)) == "C[ho:ho + 5]"
    # united with the rows a copy writes at ho (a padded copy at the same tile loop): still 5
    written = ir.BufferRegion(buf, (ir.Range(ho, I(5)),))
    assert str(union_regions(relax_region(region, doms), written)) == "C[ho:ho + 5]"


@pytest.mark.parametrize("seed", range(4))
def test_relaxed_region_holds_every_index(seed: int) -> None:
    rng = random.Random(seed)
    buf = ir.decl_buffer("C", (1000,))
    a, b = ir.Var("a"), ir.Var("b")
    doms = {a: ir.Range.of(0, 3), b: ir.Range.of(0, 5)}
    for _ in range(40):
        index: ir.Expr = (
            ho * rng.choice((-3, 2, 4, 6))
            + a * rng.randint(-3, 3)
            + b * rng.randint(0, 2)
            + rng.randint(-4, 4)
        )
        if rng.random() < 0.5:
            index = (ir.FloorDiv if rng.random() < 0.5 else ir.FloorMod)(index, I(rng.choice((-3, 2, 4))))
        rg = relax_region(ir.BufferRegion(buf, (ir.Range(index, I(rng.randint(1, 2))),)), doms).region[0]
        for outer in range(-3, 4):
            lo, ext = evaluate(rg.min, {ho: outer}), evaluate(rg.extent, {})
            for va in range(3):
                for vb in range(5):
                    value = evaluate(index, {ho: outer, a: va, b: vb})
                    assert lo <= value < lo + ext, (str(index), str(rg), outer)


def test_union_regions() -> None:
    buf = ir.decl_buffer("C", (64, 8))
    first = ir.BufferRegion(buf, (ir.Range(ho * 4, I(6)), ir.Range(n, I(1))))
    second = ir.BufferRegion(buf, (ir.Range(ho * 4 + 2, I(6)), ir.Range(w, I(1))))
    assert str(union_regions(first, second)) == "C[ho * 4:ho * 4 + 8, 0:8]"
    assert union_regions(first, first) == first
    with pytest.raises(IRError, match="different buffers"):
        union_regions(first, ir.BufferRegion(ir.decl_buffer("C", (64, 8)), first.region))


def test_region_extents_const() -> None:
    buf = ir.decl_buffer("C", (64, 8))
    assert region_extents_const(ir.BufferRegion(buf, (ir.Range(ho, I(6)), ir.Range(n, (n + 2) - n)))) == (
        6,
        2,
    )
    assert region_extents_const(ir.BufferRegion(buf, (ir.Range(ho, n), ir.Range.of(0, 8)))) is None
