"""clamp_at_producer: a clamp that every read of an intermediate applies moves to its stores."""

from __future__ import annotations

import re

from autotune import ir, te, workloads
from autotune.lowering import lower
from autotune.lowering.clamps import clamp_at_producer


def _bottleneck() -> ir.Func:
    return lower(workloads.get("bottleneck", height=4, width=4, cin=2, expand=4).func).func


def test_relu6_moves_to_the_stores_of_both_intermediates():
    text = str(_bottleneck())
    # expand and depthwise store relu6 of their accumulator ...
    assert re.search(r"expand\[[^\]]+\] = T\.min\(T\.max\(expand_acc\[0\], 0\.0\), 6\.0\)", text), text
    assert re.search(r"depthwise\[[^\]]+\] = T\.min\(T\.max\(depthwise_acc\[0\], 0\.0\), 6\.0\)", text), text
    # ... and their readers read plain values; the output keeps its value unclamped
    # (the other min/max keep the padded window's loads inside expand: clamp_guarded_loads)
    assert text.count("T.min(T.max(") == 2 and text.count(", 0.0), 6.0)") == 2
    assert re.search(r"T\.Select\([^)]*, expand\[", text), text
    assert re.search(r"project_flat_acc\[0\] \+ depthwise\[[^\]]+\] \* w_project_flat", text), text


def test_the_pass_is_in_the_pipeline_after_promotion():
    func = workloads.get("bottleneck", height=4, width=4, cin=2, expand=4).func
    before, after = (lower(func, until=name).func for name in ("promote_accumulators", "clamp_at_producer"))
    assert str(clamp_at_producer(before)) == str(after) != str(before)
    assert clamp_at_producer(after) == after  # nothing left to move


def _two_readers(second: str) -> ir.Func:
    """``B = A * 2`` read by ``C = relu6(B)`` and by ``D = <second>``."""
    a = te.placeholder((8,), "float32", name="A")
    b = te.compute((8,), lambda i: a[i] * 2.0, name="B")
    c = te.compute((8,), lambda i: ir.min_(ir.max_(b[i], 0.0), 6.0), name="C")
    exprs = {
        "bare": lambda i: b[i] + 1.0,
        "other": lambda i: ir.max_(b[i], 0.0),
        "same": lambda i: ir.min_(ir.max_(b[i], 0.0), 6.0) * 3.0,
    }
    d = te.compute((8,), exprs[second], name="D")
    return lower(te.create_func([a], [c, d], "two")).func


def test_same_clamp_in_every_reader_moves():
    text = str(_two_readers("same"))
    assert "B[i] = T.min(T.max(A[i] * 2.0, 0.0), 6.0)" in text, text
    assert "C[i_1] = B[i_1]" in text and "D[i_2] = B[i_2] * 3.0" in text, text


def test_a_bare_read_or_another_clamp_keeps_the_clamps_where_they_are():
    for second, read in (("bare", "B[i_2] + 1.0"), ("other", "T.max(B[i_2], 0.0)")):
        text = str(_two_readers(second))
        assert "B[i] = A[i] * 2.0" in text, text
        assert "C[i_1] = T.min(T.max(B[i_1], 0.0), 6.0)" in text and f"D[i_2] = {read}" in text, text


def test_a_store_that_accumulates_in_memory_keeps_its_readers_clamped():
    i = ir.Var("i")
    buf = ir.decl_buffer("B", (4,), "float32")
    out = ir.decl_buffer("O", (4,), "float32")
    add = ir.BufferStore(buf, ir.BufferLoad(buf, (i,)) + 1.0, (i,))
    relu = ir.BufferStore(out, ir.max_(ir.BufferLoad(buf, (i,)), 0.0), (i,))
    body = ir.seq(*(ir.For(i, ir.const(0), ir.const(4), ir.ForKind.SERIAL, s) for s in (add, relu)))
    alloc = ir.Allocate(buf.data, "float32", (ir.const(4),), ir.DeclBuffer(buf, body))
    func = ir.Func("acc", (out,), alloc, 1)
    assert clamp_at_producer(func) is func
