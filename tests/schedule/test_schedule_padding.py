"""hoist_padding: golden IR, numbers against numpy (at root, at a tile loop, under a register tile),
trace replay, and each refusal."""

from __future__ import annotations

import numpy as np
import pytest

from autotune import ir, te
from autotune.analysis.padding import padded_reads
from autotune.codegen import build
from autotune.errors import ScheduleError
from autotune.lowering import lower
from autotune.measure import empty_outputs
from autotune.schedule import Schedule
from autotune.workloads import ops


def _conv_chain() -> ir.Func:
    """relu fused into a padded 3x3 convolution's reads, then a 3x3 max pool with padding 1."""
    data = te.placeholder((1, 6, 7, 4), "float32", name="data")
    weight = te.placeholder((3, 3, 4, 8), "float32", name="weight")
    conv = ops.conv2d_nhwc(data, weight, padding=1, name="conv", data_act=ops.relu_expr)
    pool = ops.max_pool2d(conv, 3, stride=1, padding=1, name="pool")
    return te.create_func([data, weight], [pool], name="conv_pool")


def _reference(data: np.ndarray, weight: np.ndarray) -> np.ndarray:
    x = np.pad(np.maximum(data, 0), ((0, 0), (1, 1), (1, 1), (0, 0)))
    h, w = data.shape[1:3]
    conv = np.zeros((1, h, w, weight.shape[3]), np.float64)
    for rh in range(3):
        for rw in range(3):
            conv += np.einsum("nyxc,co->nyxo", x[:, rh : rh + h, rw : rw + w, :], weight[rh, rw])
    padded = np.pad(conv, ((0, 0), (1, 1), (1, 1), (0, 0)), constant_values=-np.inf)
    return np.max([padded[:, i : i + h, j : j + w, :] for i in range(3) for j in range(3)], axis=0)


def _check(sch: Schedule) -> None:
    lowered = lower(sch.func, verify=True)
    rng = np.random.default_rng(0)
    data = rng.standard_normal((1, 6, 7, 4)).astype(np.float32)
    weight = rng.standard_normal((3, 3, 4, 8)).astype(np.float32)
    (out,) = empty_outputs(lowered.func)
    build(lowered.func, lowered.plan)(data, weight, out)
    np.testing.assert_allclose(out, _reference(data, weight), rtol=1e-5, atol=1e-5)


def test_hoist_padding_golden(golden) -> None:
    sch = Schedule(_conv_chain()).hoist_padding("conv", 1)
    assert sch.last == ("data_pad",)
    sch = sch.hoist_padding("pool", 1)
    assert sch.last == ("conv_pad",)
    golden("schedule/hoist_padding", str(sch))


def test_the_padded_copy_holds_what_the_block_reads() -> None:
    func = _conv_chain()
    conv = next(b for b in ir.collect(func.body, ir.Block) if b.name == "conv")
    (read,) = padded_reads(conv)
    assert read.buffer.name == "data"
    assert read.lo == (0, -1, -1, 0) and read.shape == (1, 8, 9, 4)
    assert read.low == (False, True, True, False) and read.high == (False, True, True, False)


def test_replay_gives_the_same_ir() -> None:
    sch = Schedule(_conv_chain()).hoist_padding("conv", 1).hoist_padding("pool", 1)
    assert str(Schedule.replay(_conv_chain(), sch.trace_json())) == str(sch)


def test_padded_copies_at_root_match_numpy() -> None:
    _check(Schedule(_conv_chain()).hoist_padding("conv", 1).hoist_padding("pool", 1))


def test_padded_copy_at_a_tile_loop_matches_numpy() -> None:
    """The copy of the input computed at the row-tile loop of the convolution: compaction shrinks it
    to the tile's window, and the halo rows at the image border are the padding."""
    sch = Schedule(_conv_chain()).hoist_padding("conv", 1)
    pad = sch.last[0]
    _, y, *_ = sch.get_loops("conv")
    sch = sch.split(y, [None, 2])
    sch = sch.compute_at(pad, sch.last[0])
    lowered = lower(sch.func)
    alloc = next(a for a in ir.collect(lowered.func.body, ir.Allocate) if a.data.name.startswith(pad))
    assert int(np.prod([ir.as_int(e) for e in alloc.extents])) == 4 * 9 * 4  # 2 rows + a 2-row halo
    _check(sch)


def test_a_register_tile_over_the_copy_keeps_plain_loads() -> None:
    """Under a 2-column x 8-channel register tile the reduction reads the copy with no select."""
    sch = Schedule(_conv_chain()).hoist_padding("conv", 1)
    _, _, x, o, rh, rw, rc = sch.get_loops("conv")
    sch = sch.split(x, [None, 7])
    x_0, x_1 = sch.last
    sch = sch.reorder(x_0, rh, rw, rc, x_1, o).unroll(x_1).unroll(o)
    conv = next(b for b in ir.collect(sch.func.body, ir.Block) if b.name == "conv")
    assert not ir.collect(conv.body, ir.Select)
    _check(sch)


def test_refuses_a_read_without_padding() -> None:
    with pytest.raises(ScheduleError, match=r"hoist_padding: block 'conv': block 'conv' reads 'weight' under no select"):
        Schedule(_conv_chain()).hoist_padding("conv", 2)


def test_refuses_a_buffer_index_out_of_range() -> None:
    with pytest.raises(ScheduleError, match=r"block 'conv' reads 3 buffers, buffer_index 5 is out of range"):
        Schedule(_conv_chain()).hoist_padding("conv", 5)


def test_refuses_a_select_that_is_not_the_bounds() -> None:
    data = te.placeholder((8,), "float32", name="data")
    out = te.compute((8,), lambda i: te.if_then_else(i < 4, data[i], 0.0), name="half")
    func = te.create_func([data], [out], name="half")
    with pytest.raises(ScheduleError, match=r"the select's condition `.*` is not a bound of an index of 'data'"):
        Schedule(func).hoist_padding("half", 0)


def test_a_one_sided_select_and_one_that_misses_a_side() -> None:
    data = te.placeholder((8,), "float32", name="data")
    out = te.compute((8,), lambda i: te.if_then_else(i - 1 >= 0, data[i - 1] + data[i - 1], 0.0), name="shift")
    func = te.create_func([data], [out], name="shift")
    text = str(Schedule(func).hoist_padding("shift", 0).func)  # the index never reaches 8: one side
    assert "T.Select(v_ax0 - 1 >= 0, data[v_ax0 - 1] + data[v_ax0 - 1], 0.0)" in text
    assert "shift[v_i] = data_pad[v_i]" in text
    wide = te.compute((10,), lambda i: te.if_then_else(i - 1 >= 0, data[i - 1], 0.0), name="shift")
    with pytest.raises(ScheduleError, match=r"the select does not test the high bound of index 0 of 'data' \(v_i - 1\)"):
        Schedule(te.create_func([data], [wide], name="wide")).hoist_padding("shift", 0)


def test_refuses_a_value_that_varies_outside_the_load() -> None:
    data = te.placeholder((8,), "float32", name="data")
    scale = te.placeholder((8,), "float32", name="scale")
    out = te.compute((8,), lambda i: te.if_then_else(i - 1 >= 0, data[i - 1] * scale[i], 0.0), name="scaled")
    func = te.create_func([data, scale], [out], name="scaled")
    with pytest.raises(ScheduleError, match=r"the padded value also reads 'scale'"):
        Schedule(func).hoist_padding("scaled", 0)


def test_refuses_a_buffer_written_in_the_same_nest() -> None:
    """The convolution's output is written under the tile loop where the pool now reads it."""
    sch = Schedule(_conv_chain())
    _, y, *_ = sch.get_loops("pool")
    sch = sch.split(y, [None, 2])
    sch = sch.compute_at("conv", sch.last[0])
    with pytest.raises(ScheduleError, match=r"block 'conv' writes 'conv' in or after the loop nest of 'pool'"):
        sch.hoist_padding("pool", 1)
