"""The region of a buffer at a site: the one computation that compaction and ``set_scope`` share."""

from __future__ import annotations

import re

import pytest

from autotune import ir, te
from autotune.analysis.region import buffer_users, common_loops, compact_box, region_at_site
from autotune.errors import IRError
from autotune.schedule import Schedule


def _two_stages() -> Schedule:
    """``B = A + 1; C = B * 2`` on [8, 4], C's row loop split in two-row tiles (``io``, ``ii``)."""
    a = te.placeholder((8, 4), "float32", name="A")
    b = te.compute((8, 4), lambda i, j: a[i, j] + 1.0, name="B")
    c = te.compute((8, 4), lambda i, j: b[i, j] * 2.0, name="C")
    return Schedule(te.create_func([a], [c], name="two")).split("i_1", [None, 2], names=["io", "ii"])


def _buffer(func: ir.Func, name: str) -> ir.Buffer:
    return next(r.buffer for b in ir.collect(func.body, ir.Block) for r in b.writes if r.buffer.name == name)


def test_users_are_the_blocks_that_name_the_buffer_with_their_paths() -> None:
    func = _two_stages().compute_at("B", "io").func
    users = buffer_users(func.body, _buffer(func, "B"))
    assert [b.name for b, _ in users] == ["B", "C"]
    for block, path in users:
        assert path[0] is func.body and path[-1] is block
    assert [f.loop_var.name for f in common_loops(users)] == ["io"]


def test_region_at_the_tile_loop_is_the_tile_and_its_box_is_offset_by_the_tile_start() -> None:
    func = _two_stages().compute_at("B", "io").func
    buf = _buffer(func, "B")
    users = buffer_users(func.body, buf)
    site = common_loops(users)[-1]
    region = region_at_site(users, buf, site)
    assert str(region) == "B[io * 2:io * 2 + 2, 0:4]"
    assert [(str(o), e) for o, e in compact_box(buf, region)] == [("io * 2", 2), ("0", 4)]


def test_region_at_the_root_is_the_whole_buffer_and_its_box_keeps_every_dimension() -> None:
    func = _two_stages().func
    buf = _buffer(func, "B")
    users = buffer_users(func.body, buf)
    assert common_loops(users) == []
    region = region_at_site(users, buf, None)
    assert str(region) == "B[0:8, 0:4]"
    assert [(str(o), e) for o, e in compact_box(buf, region)] == [("0", 8), ("0", 4)]


def test_a_buffer_no_block_accesses_has_no_region() -> None:
    func = _two_stages().func
    other = ir.decl_buffer("D", (8, 4))
    assert buffer_users(func.body, other) == []
    with pytest.raises(IRError, match="^" + re.escape("region_at_site: no block accesses 'D'") + "$"):
        region_at_site([], other, None)
