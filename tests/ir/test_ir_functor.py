"""The generic walks of ``autotune.ir.functor`` against a plain reference walk.

The reference descends into every dataclass field (no field is skipped) and tests each value
with ``isinstance``; the functor skips the fields declared ``str``/``int``/``float``/``bool`` and
classifies values by their class once. Both must visit the same nodes in the same order, on the
IR of scheduled and lowered workloads.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any

import pytest

from autotune import ir, workloads
from autotune.ir.expr import Node
from autotune.ir.functor import statement_fields, walked_fields
from autotune.lowering import lower
from autotune.schedule import Schedule


def _reference_pre_order(node: Any, out: list[Any]) -> None:
    """Every node under ``node`` (itself included), in pre order; buffers below ``node`` are leaves."""
    out.append(node)
    for f in fields(node):
        _reference_value(getattr(node, f.name), out)


def _reference_value(value: Any, out: list[Any]) -> None:
    if isinstance(value, ir.Buffer):
        return
    if isinstance(value, Node):
        _reference_pre_order(value, out)
    elif isinstance(value, tuple):
        for item in value:
            _reference_value(item, out)


def _funcs() -> list[ir.Func]:
    pool = workloads.get("pool_chain", height=16, width=16, channels=8).func
    sch = (
        Schedule(pool).split("y_1", [None, 4], names=["oi", "ii"]).split("c_1", [None, 4], names=["oc", "ic"])
    )
    sch = sch.reorder("oi", "oc", "ii", "x_1").compute_at("pool1", "oc").rolling_buffer("pool1")
    mm = workloads.get("matmul", m=8, n=8, k=8).func
    tiled = Schedule(mm).split("i", [None, 2], names=["io", "ii"]).reorder("io", "k", "ii", "j").func
    bottleneck = workloads.get("bottleneck", height=8, width=8, cin=4, expand=8).func
    return [
        pool,
        sch.func,
        lower(sch.func).func,
        mm,
        tiled,
        lower(tiled).func,
        bottleneck,
        lower(bottleneck).func,
    ]


FUNCS = _funcs()


@pytest.mark.parametrize("func", FUNCS, ids=lambda f: f.name)
def test_collect_matches_the_reference_walk(func: ir.Func) -> None:
    everything: list[Any] = []
    _reference_pre_order(func, everything)
    for cls in (ir.Var, ir.Block, ir.For, ir.BufferLoad, (ir.Var, ir.Block), Node):
        want = [n for n in everything if isinstance(n, cls)]
        got = ir.collect(func, cls)
        assert len(got) == len(want) and all(a is b for a, b in zip(got, want))
    assert ir.free_vars(func) == {n for n in everything if isinstance(n, ir.Var)}


@pytest.mark.parametrize("func", FUNCS, ids=lambda f: f.name)
def test_visitors_match_the_reference_walk(func: ir.Func) -> None:
    everything: list[Any] = []
    _reference_pre_order(func, everything)
    post: list[Any] = []
    ir.post_order_visit(func, post.append)
    assert sorted(map(id, post)) == sorted(map(id, everything))
    assert post[-1] is func

    class Loads(ir.Visitor):
        def __init__(self) -> None:
            self.seen: list[Any] = []

        def visit_BufferLoad(self, node: ir.BufferLoad) -> None:
            self.seen.append(node)
            self.generic_visit(node)

    loads = Loads()
    loads.visit(func)
    assert [id(n) for n in loads.seen] == [id(n) for n in everything if isinstance(n, ir.BufferLoad)]
    assert ir.substitute(func, {ir.Var("unused"): ir.IntImm(0)}) is func  # nothing changed: same object


@pytest.mark.parametrize("func", FUNCS, ids=lambda f: f.name)
def test_skipped_fields_hold_no_node(func: ir.Func) -> None:
    everything: list[Any] = []
    _reference_pre_order(func, everything)
    for node in everything:
        walked = walked_fields(type(node))
        for f in fields(node):
            if f.name not in walked:
                assert not isinstance(getattr(node, f.name), (Node, tuple)), (type(node).__name__, f.name)


def test_root_buffer_is_walked() -> None:
    n = ir.Var("n")
    buf = ir.decl_buffer("A", (4,)).with_(shape=(n,))
    assert ir.collect(buf, ir.Var) == [n, buf.data]
    with pytest.raises(TypeError):
        ir.collect((n,), ir.Var)


@pytest.mark.parametrize("func", FUNCS, ids=lambda f: f.name)
def test_fields_without_statements_hold_none(func: ir.Func) -> None:
    everything: list[Any] = []
    _reference_pre_order(func, everything)
    for node in everything:
        kept = statement_fields(type(node))
        for f in fields(node):
            if f.name not in kept:
                below: list[Any] = []
                _reference_value(getattr(node, f.name), below)
                assert not any(isinstance(n, ir.Stmt) for n in below), (type(node).__name__, f.name)
