"""A register tile keeps its accumulators in registers over a whole nest of reduction loops.

For reductions over 1 (matmul), 2 (max and sum windows) and 3 (convolution) loops, in int8, int32
and float32, with the tile's inits left in the block (``hoist_guards`` peels them out of every
reduction loop) or decomposed by ``decompose_reduction``, and for a reduction split in two and
reordered: the lowered IR has a ``local`` accumulator, no access to the output between the
tile's init and its copy-out, and the kernel's output equals numpy.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from autotune import ir, te
from autotune.codegen import build
from autotune.lowering import lower
from autotune.measure import empty_outputs
from autotune.schedule import Schedule
from autotune.schedule.tree import get_block
from autotune.workloads import ops

DTYPES = ("int8", "int32", "float32")


def _matmul(dtype: str) -> tuple[ir.Func, Callable[..., np.ndarray]]:
    a = te.placeholder((4, 6), dtype, name="A")
    b = te.placeholder((6, 8), dtype, name="B")
    return te.create_func([a, b], [ops.matmul(a, b, name="out")], name="mm"), lambda x, w: x @ w


def _window(size: int) -> Callable[[np.ndarray], list[np.ndarray]]:
    return lambda x: [x[:, dy : dy + size, dx : dx + size, :] for dy in range(3) for dx in range(3)]


def _max_pool(dtype: str) -> tuple[ir.Func, Callable[..., np.ndarray]]:
    data = te.placeholder((1, 6, 6, 4), dtype, name="data")
    func = te.create_func([data], [ops.max_pool2d(data, 3, name="out")], name="pool")
    return func, lambda x: np.maximum.reduce(_window(4)(x))


def _depthwise(dtype: str) -> tuple[ir.Func, Callable[..., np.ndarray]]:
    data = te.placeholder((1, 6, 6, 4), dtype, name="data")
    weight = te.placeholder((3, 3, 4), dtype, name="weight")
    func = te.create_func([data, weight], [ops.depthwise_conv2d_nhwc(data, weight, name="out")], name="dw")
    return func, lambda x, w: sum(p * w[k // 3, k % 3] for k, p in enumerate(_window(4)(x)))


def _conv(dtype: str) -> tuple[ir.Func, Callable[..., np.ndarray]]:
    data = te.placeholder((1, 6, 6, 4), dtype, name="data")
    weight = te.placeholder((3, 3, 4, 8), dtype, name="weight")
    func = te.create_func([data, weight], [ops.conv2d_nhwc(data, weight, name="out")], name="conv")
    return func, lambda x, w: sum(p @ w[k // 3, k % 3] for k, p in enumerate(_window(4)(x)))


CHAINS = {"matmul": (_matmul, 1), "max_pool": (_max_pool, 2), "depthwise": (_depthwise, 2), "conv": (_conv, 3)}


def _tile(func: ir.Func, decompose: bool, split: bool = False) -> Schedule:
    """The last two spatial loops as a register tile under every reduction loop (the column loop
    split by 2); ``split``: the last reduction loop split in two, its inner part moved outermost."""
    sch = Schedule(func)
    reductions = _reduction_loops(sch)
    spatial = [loop for loop in sch.get_loops("out") if loop not in reductions]
    col, chan = spatial[-2:]
    sch = sch.split(col, [None, 2])
    col_0, col_1 = sch.last
    if split:
        sch = sch.split(reductions[-1], [2, None])
        reductions = [sch.last[1], *reductions[:-1], sch.last[0]]
    sch = sch.reorder(col_0, *reductions, col_1, chan).unroll(col_1).unroll(chan)
    return sch.decompose_reduction("out", reductions[0]) if decompose else sch


def _reduction_loops(sch: Schedule) -> list[str]:
    """The loops above block ``out`` that its reduce iter vars are bound to, outermost first."""
    blk = get_block(sch.func, "out", "test")
    bound = {v.name for iv, b in zip(blk.iter_vars, blk.bindings) if iv.kind == "reduce" for v in ir.free_vars(b)}
    return [loop for loop in sch.get_loops("out") if loop in bound]


def _inputs(func: ir.Func, dtype: str) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(7)
    if dtype == "float32":
        return tuple(rng.standard_normal(b.const_shape()).astype(np.float32) for b in func.inputs)
    # int8 sums wrap around; numpy's int8 arithmetic wraps the same way
    return tuple(rng.integers(-100, 100, b.const_shape()).astype(dtype) for b in func.inputs)


def _accumulates_in_registers(lowered: ir.Func) -> None:
    """One ``local`` accumulator, and no access to ``out`` inside the loop nest that fills it."""
    accs = [a for a in ir.collect(lowered.body, ir.Allocate) if ir.ann_get(a.annotations, "scope", "") == "local"]
    assert len(accs) == 1, str(lowered)
    out = lowered.params[-1]
    reduction = next(f for f in ir.collect(accs[0].body, ir.For) if f.kind == ir.ForKind.SERIAL)
    touched = [n for n in ir.collect(reduction, (ir.BufferLoad, ir.BufferStore)) if n.buffer.data is out.data]
    assert not touched, str(lowered)
    copy_out = [n for n in ir.collect(lowered.body, ir.BufferStore) if n.buffer.data is out.data]
    assert copy_out and all(isinstance(n.value, ir.BufferLoad) and n.value.buffer.data is accs[0].data for n in copy_out)


@pytest.mark.slow
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("chain", sorted(CHAINS))
@pytest.mark.parametrize("decompose", [False, True], ids=["init_in_block", "decomposed"])
def test_register_tile_over_a_reduction_nest(chain: str, dtype: str, decompose: bool) -> None:
    make, loops = CHAINS[chain]
    func, reference = make(dtype)
    sch = _tile(func, decompose)
    assert len(_reduction_loops(sch)) == loops
    lowered = lower(sch.func, verify=True)
    _accumulates_in_registers(lowered.func)
    inputs = _inputs(func, dtype)
    outputs = empty_outputs(lowered.func)
    build(lowered.func, lowered.plan)(*inputs, *outputs)
    expected = reference(*inputs).astype(dtype)
    if dtype == "float32":
        np.testing.assert_allclose(outputs[0], expected, rtol=1e-5, atol=1e-5)
    else:
        np.testing.assert_array_equal(outputs[0], expected)


@pytest.mark.slow
@pytest.mark.parametrize("decompose", [False, True], ids=["init_in_block", "decomposed"])
def test_a_split_and_reordered_reduction_keeps_the_tile(decompose: bool) -> None:
    func, reference = _conv("float32")
    sch = _tile(func, decompose, split=True)
    assert _reduction_loops(sch) == ["rc_1", "rh", "rw", "rc_0"]
    lowered = lower(sch.func, verify=True)
    _accumulates_in_registers(lowered.func)
    inputs = _inputs(func, "float32")
    outputs = empty_outputs(lowered.func)
    build(lowered.func, lowered.plan)(*inputs, *outputs)
    np.testing.assert_allclose(outputs[0], reference(*inputs), rtol=1e-5, atol=1e-5)


def test_a_split_reduction_starts_once_per_loop() -> None:
    # lower_blocks says "the first iteration" of rc_0 * 2 + rc_1 per loop, which hoist_guards peels
    func, _ = _conv("float32")
    sch = Schedule(func)
    sch = sch.split(sch.get_loops("out")[-1], [None, 2])
    text = str(lower(sch.func, until="lower_blocks").func)
    assert "if rh == 0 and rw == 0 and rc_0 == 0 and rc_1 == 0:" in text
