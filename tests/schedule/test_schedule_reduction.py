"""decompose_reduction: golden IR on a convolution and a matmul, trace replay, numbers, each refusal."""

from __future__ import annotations

import numpy as np
import pytest

from autotune import ir, te
from autotune.codegen import build
from autotune.errors import ScheduleError
from autotune.lowering import lower
from autotune.measure import empty_outputs
from autotune.schedule import Schedule
from autotune.workloads import ops


def _conv() -> ir.Func:
    """A 3x3 NHWC convolution with padding 1, 6x6x4 -> 8 channels."""
    data = te.placeholder((1, 6, 6, 4), "float32", name="data")
    weight = te.placeholder((3, 3, 4, 8), "float32", name="weight")
    return te.create_func([data, weight], [ops.conv2d_nhwc(data, weight, padding=1, name="conv")], name="conv3x3")


def _matmul() -> ir.Func:
    a = te.placeholder((8, 12), "float32", name="A")
    b = te.placeholder((12, 16), "float32", name="B")
    return te.create_func([a, b], [ops.matmul(a, b, name="C")], name="mm")


def _conv_tile() -> Schedule:
    """Columns by 2 x all 8 channels accumulated over rh, rw, rc; the init decomposed at rh."""
    sch = Schedule(_conv())
    _, _, x, o, rh, rw, rc = sch.get_loops("conv")
    sch = sch.split(x, [None, 2])
    x_0, x_1 = sch.last
    sch = sch.reorder(x_0, rh, rw, rc, x_1, o).unroll(x_1).unroll(o)
    return sch.decompose_reduction("conv", rh)


def _mm_tile() -> Schedule:
    """A 4x8 tile of C accumulated over k split in two, the init decomposed at k_0."""
    sch = Schedule(_matmul())
    i, j, k = sch.get_loops("C")
    sch = sch.split(i, [None, 4])
    i_0, i_1 = sch.last
    sch = sch.split(j, [None, 8])
    j_0, j_1 = sch.last
    sch = sch.split(k, [None, 4])
    k_0, k_1 = sch.last
    sch = sch.reorder(i_0, j_0, k_0, k_1, i_1, j_1).unroll(i_1).unroll(j_1)
    return sch.decompose_reduction("C", k_0)


def _run(func: ir.Func, seed: int = 0) -> tuple[np.ndarray, ...]:
    lowered = lower(func, verify=True)
    rng = np.random.default_rng(seed)
    inputs = tuple(rng.standard_normal(b.const_shape()).astype(np.float32) for b in func.inputs)
    outputs = empty_outputs(lowered.func)
    build(lowered.func, lowered.plan)(*inputs, *outputs)
    return (*inputs, *outputs)


def _conv_ref(data: np.ndarray, weight: np.ndarray) -> np.ndarray:
    padded = np.pad(data, ((0, 0), (1, 1), (1, 1), (0, 0)))
    return sum(padded[:, dy : dy + 6, dx : dx + 6, :] @ weight[dy, dx] for dy in range(3) for dx in range(3))


def test_decompose_reduction_conv_golden_and_replay(golden) -> None:
    sch = _conv_tile()
    golden("schedule/decompose_reduction_conv", str(sch.func))
    assert sch.last == ("conv_init",)
    assert str(Schedule.replay(_conv(), sch.trace_json()).func) == str(sch.func)
    init = next(b for b in ir.collect(sch.func.body, ir.Block) if b.name == "conv_init")
    update = next(b for b in ir.collect(sch.func.body, ir.Block) if b.name == "conv")
    assert update.init is None and init.init is None
    assert [iv.kind for iv in init.iter_vars] == ["spatial"] * 4


def test_decompose_reduction_matmul_golden_and_replay(golden) -> None:
    sch = _mm_tile()
    golden("schedule/decompose_reduction_matmul", str(sch.func))
    assert str(Schedule.replay(_matmul(), sch.trace_json()).func) == str(sch.func)


@pytest.mark.slow
def test_decompose_reduction_numbers() -> None:
    data, weight, out = _run(_conv_tile().func)
    np.testing.assert_allclose(out, _conv_ref(data, weight), rtol=1e-5, atol=1e-5)
    a, b, c = _run(_mm_tile().func)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)


@pytest.mark.slow
def test_decompose_reduction_at_a_spatial_loop_initialises_every_element_it_covers() -> None:
    # at x_0, a spatial loop above the reduction: the init covers the whole row before any update
    sch = Schedule(_conv())
    sch = sch.decompose_reduction("conv", sch.get_loops("conv")[2])
    text = str(sch.func)
    assert "for x_init in T.serial(6):" in text and "for o_init in T.serial(8):" in text
    data, weight, out = _run(sch.func)
    np.testing.assert_allclose(out, _conv_ref(data, weight), rtol=1e-5, atol=1e-5)


def test_refuses_a_block_that_is_not_a_reduction() -> None:
    data = te.placeholder((4, 4), "float32", name="data")
    func = te.create_func([data], [te.compute((4, 4), lambda i, j: data[i, j] * 2.0, name="B")])
    with pytest.raises(ScheduleError, match=r"decompose_reduction: block 'B' has no init: it is not a reduction"):
        Schedule(func).decompose_reduction("B", "i")


def test_refuses_a_loop_that_is_not_above_the_block() -> None:
    sch = Schedule(_matmul())
    with pytest.raises(ScheduleError, match=r"loop 'k_9' is not above block 'C' \(loops above it: i, j, k\)"):
        sch.decompose_reduction("C", "k_9")


def test_refuses_a_loop_below_a_reduction_loop() -> None:
    sch = Schedule(_matmul())
    i, j, k = sch.get_loops("C")
    sch = sch.reorder(k, i, j)
    with pytest.raises(
        ScheduleError,
        match=r"loop 'i' is below reduction loop 'k' of block 'C': the init would run again on every iteration of 'k'",
    ):
        sch.decompose_reduction("C", i)


def test_refuses_a_predicate_on_a_reduction_loop() -> None:
    sch = Schedule(_matmul())
    sch = sch.split(sch.get_loops("C")[2], [None, 5])  # 5 does not divide 12: k_0 * 5 + k_1 < 12
    with pytest.raises(ScheduleError, match=r"the predicate of block 'C' tests a reduction loop"):
        sch.decompose_reduction("C", sch.last[0])


def test_refuses_a_loop_that_binds_spatial_and_reduction_iter_vars() -> None:
    sch = Schedule(_matmul())
    _, j, k = sch.get_loops("C")
    sch = sch.fuse(j, k)
    with pytest.raises(ScheduleError, match=r"loop 'j_k_fused' binds both a spatial and a reduction iter var of block 'C'"):
        sch.decompose_reduction("C", sch.last[0])


def test_refuses_when_the_loops_below_compute_elements_twice():
    """pool1 computed per 2-row tile of pool2 computes 4 rows a tile, 2 of them again in the next
    tile: decomposed above the tile loop, one init would let both tiles' updates accumulate."""
    from autotune import workloads

    sch = Schedule(workloads.get("pool_chain", height=8, width=8, channels=4).func)
    _, y, *_ = sch.get_loops("pool2")
    sch = sch.split(y, [None, 2])
    tile = sch.last[0]
    sch = sch.compute_at("pool1", tile)
    with pytest.raises(
        ScheduleError,
        match=rf"^decompose_reduction: consecutive iterations of loop '{tile}' compute overlapping elements of 'pool1'",
    ):
        sch.decompose_reduction("pool1", tile)
    inner = sch.get_loops("pool1")[2]  # at pool1's own row loop, below the tile loop: once per tile
    assert sch.decompose_reduction("pool1", inner).last == ("pool1_init",)
