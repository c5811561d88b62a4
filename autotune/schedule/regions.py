"""Keeping block regions right after a rewrite.

A block's ``reads``/``writes`` are the source of truth for compute_at and
compaction. They are re-inferred whenever a primitive changes a block's body,
except the ones named by an ``explicit_read_region``/``explicit_write_region``
annotation (``annotate_buffer_access``), which are kept as given.
"""

from __future__ import annotations

from dataclasses import replace

from .. import ir
from ..analysis.region import block_access_regions
from ..te import FULL_REGION_ANNOTATION

EXPLICIT = {"read": "explicit_read_region", "write": "explicit_write_region"}


def refresh_regions(block: ir.Block) -> ir.Block:
    """``block`` with its regions inferred again, explicit ones kept."""
    reads, writes, fallback = block_access_regions(block)
    explicit_r = set(ir.ann_get(block.annotations, EXPLICIT["read"], ()))
    explicit_w = set(ir.ann_get(block.annotations, EXPLICIT["write"], ()))
    old_r = {r.buffer: r for i, r in enumerate(block.reads) if i in explicit_r}
    old_w = {w.buffer: w for i, w in enumerate(block.writes) if i in explicit_w}
    new_reads = tuple(old_r.get(r.buffer, r) for r in reads)
    new_writes = tuple(old_w.get(w.buffer, w) for w in writes)
    # explicit annotations refer to positions: recompute them for the new order
    ann = block.annotations
    ann = ir.ann_set(ann, EXPLICIT["read"], tuple(i for i, r in enumerate(new_reads) if r.buffer in old_r) or None)
    ann = ir.ann_set(ann, EXPLICIT["write"], tuple(i for i, w in enumerate(new_writes) if w.buffer in old_w) or None)
    still_full = tuple(n for n in fallback if n not in {b.name for b in (*old_r, *old_w)})
    ann = ir.ann_set(ann, FULL_REGION_ANNOTATION, still_full or None)
    return replace(block, reads=new_reads, writes=new_writes, annotations=ann)
