"""flatten_buffers: physical shapes, separator groups, parameter aliases, errors."""

from __future__ import annotations

import re

import numpy as np
import pytest

from autotune import ir
from autotune.errors import LoweringError
from autotune.lowering.flatten import flatten_buffers


def banked_func(shape: tuple[int, ...] = (2, 2, 8), seps: tuple[int, ...] = (2,)) -> ir.Func:
    """``X[i, j] -> S[...] -> Y[i, j]`` with ``S`` an N-d intermediate, already lowered."""
    x = ir.decl_buffer("X", (4, 8))
    y = ir.decl_buffer("Y", (4, 8))
    t = ir.decl_buffer("S", shape, axis_separators=seps)
    i, j = ir.Var("i"), ir.Var("j")
    a, b = shape[0], shape[1]  # S[i // b, i % b, j]
    t_idx = (ir.FloorDiv(i, ir.const(b)), ir.FloorMod(i, ir.const(b)), j)
    assert a * b == 4
    body = ir.seq(
        ir.For(i, ir.const(0), ir.const(4), ir.ForKind.SERIAL,
               ir.For(j, ir.const(0), ir.const(8), ir.ForKind.SERIAL, ir.BufferStore(t, x[i, j] * 3.0, t_idx))),
        ir.For(i, ir.const(0), ir.const(4), ir.ForKind.SERIAL,
               ir.For(j, ir.const(0), ir.const(8), ir.ForKind.SERIAL, ir.BufferStore(y, ir.BufferLoad(t, t_idx), (i, j)))),
    )
    extents = tuple(ir.const(e) for e in t.physical_shape()) if seps else t.shape
    alloc = ir.Allocate(t.data, "float32", extents, ir.DeclBuffer(t, body))
    return ir.Func("banked", (x, y), alloc)


def test_flatten_banked_golden(golden):
    out = ir.verify(flatten_buffers(banked_func()))
    text = str(out)
    golden("lowering/flatten_banked", text)
    assert 'S_data = T.allocate([4, 8], "float32")' in text
    assert 'S = T.decl_buffer((4, 8), "float32", axis_separators=[1], data=S_data)' in text
    assert 'X_flat = T.decl_buffer((32,), "float32", data=X_data)' in text
    assert "Y_flat[i * 8 + j] = S[i, j]" in text  # [2, 2 | 8]: the first group is linearised (i // 2 * 2 + i % 2)


def test_flatten_without_separators_is_1d(golden):
    out = ir.verify(flatten_buffers(banked_func(seps=())))
    golden("lowering/flatten_1d", str(out))
    alloc = next(iter(ir.collect(out.body, ir.Allocate)))
    assert [ir.as_int(e) for e in alloc.extents] == [32]
    decl = next(d for d in ir.collect(out.body, ir.DeclBuffer) if d.buffer.data is alloc.data)
    assert decl.buffer.const_shape() == (32,) and decl.buffer.axis_separators == ()


def test_flatten_keeps_the_signature():
    func = banked_func()
    out = flatten_buffers(func)
    assert out.params == func.params
    aliases = [d.buffer for d in ir.collect(out.body, ir.DeclBuffer) if d.buffer.name.endswith("_flat")]
    assert [(a.name, a.data) for a in aliases] == [("X_flat", func.params[0].data), ("Y_flat", func.params[1].data)]


def test_one_dimensional_params_are_used_directly():
    x, y = ir.decl_buffer("X", (8,)), ir.decl_buffer("Y", (8,))
    i = ir.Var("i")
    func = ir.Func("copy", (x, y), ir.For(i, ir.const(0), ir.const(8), ir.ForKind.SERIAL, ir.BufferStore(y, x[i], (i,))))
    assert flatten_buffers(func).body is func.body


@pytest.mark.slow
def test_flatten_numbers():
    from autotune.codegen import build

    kernel = build(flatten_buffers(banked_func()))
    x = np.arange(32, dtype=np.float32).reshape(4, 8)
    y = np.full((4, 8), np.nan, dtype=np.float32)
    kernel(x, y)
    np.testing.assert_array_equal(y, x * 3.0)


def strided(func: ir.Func, strides: tuple[int, ...]) -> ir.Func:
    t = func.body.body.buffer  # type: ignore[attr-defined]
    return ir.substitute(func, bmap={t: t.with_(strides=tuple(ir.const(s) for s in strides))})


def test_overlapping_strides_are_an_error():
    with pytest.raises(
        LoweringError,
        match=re.escape("flatten_buffers: buffer 'S' has strides [1, 2, 4]; the stride of dimension 0 must be at least 4 so that its slices do not overlap"),
    ):
        flatten_buffers(strided(banked_func(), (1, 2, 4)))
    with pytest.raises(LoweringError, match=re.escape("has strides [12, 8, 1]; the stride of dimension 0 must be at least 16")):
        flatten_buffers(strided(banked_func(seps=()), (12, 8, 1)))


def test_symbolic_or_missing_strides_are_an_error():
    func = banked_func(seps=())
    t = func.body.body.buffer  # type: ignore[attr-defined]
    for strides, shown in (((ir.Var("s"), ir.const(8), ir.const(1)), "[s, 8, 1]"), ((ir.const(8), ir.const(1)), "[8, 1]")):
        bad = ir.substitute(func, bmap={t: t.with_(strides=strides)})
        with pytest.raises(LoweringError, match=re.escape(f"buffer 'S' has strides {shown}; expected one constant stride per dimension (3)")):
            flatten_buffers(bad)


def test_parameters_must_be_row_major():
    func = banked_func()
    x = func.params[0]
    bad = ir.substitute(func, bmap={x: x.with_(strides=(ir.const(16), ir.const(1)))})
    bad = ir.Func(bad.name, (x.with_(strides=(ir.const(16), ir.const(1))), *bad.params[1:]), bad.body)
    with pytest.raises(LoweringError, match=re.escape("parameter buffer 'X' has strides [16, 1]; a parameter is a row-major array")):
        flatten_buffers(bad)


def test_row_major_strides_are_fine():
    # strides count inside each axis group: [2, 2 | 8] is row-major with [2, 1, 1]
    assert str(flatten_buffers(strided(banked_func(), (2, 1, 1)))) == str(flatten_buffers(banked_func()))
    assert str(flatten_buffers(strided(banked_func(seps=()), (16, 8, 1)))) == str(flatten_buffers(banked_func(seps=())))


def padded_func() -> ir.Func:
    """``S`` of shape [2, 2, 8] with its first dimension's slices 20 elements apart (4 of padding after each)."""
    return strided(banked_func(seps=()), (20, 8, 1))


def test_padded_strides_index_and_allocate_the_span():
    text = str(ir.verify(flatten_buffers(padded_func())))
    # the span: 2 slices of 20 elements, the padding after the last one included
    assert 'S_data = T.allocate([40], "float32")' in text
    assert 'S = T.decl_buffer((40,), "float32", data=S_data)' in text
    assert "S[i // 2 * 20 + i % 2 * 8 + j] = X_flat[i * 8 + j] * 3.0" in text
    assert "Y_flat[i * 8 + j] = S[i // 2 * 20 + i % 2 * 8 + j]" in text


@pytest.mark.slow
def test_padded_strides_numbers():
    from autotune.codegen import build

    kernel = build(flatten_buffers(padded_func()))
    x = np.arange(32, dtype=np.float32).reshape(4, 8)
    y = np.full((4, 8), np.nan, dtype=np.float32)
    kernel(x, y)
    np.testing.assert_array_equal(y, x * 3.0)


def test_blocks_are_an_error():
    x = ir.decl_buffer("X", (8,))
    func = ir.Func("f", (x,), ir.Block("root", (), (), ir.Evaluate(ir.const(0))))
    with pytest.raises(LoweringError, match="block 'root' is still there; run lower_blocks first"):
        flatten_buffers(func)
