"""Schedule primitives: pure functions ``(func, **args) -> (func, new names)``, one module per family.

``PRIMITIVES`` maps each primitive's name (as written in traces) to its function.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ... import ir
from . import buffers, cache, compute_at, layout, loops, memory, padding, reduction, sample

Primitive = Callable[..., tuple[ir.Func, tuple[str, ...]]]

PRIMITIVES: dict[str, Primitive] = {
    "split": loops.split,
    "reorder": loops.reorder,
    "fuse": loops.fuse,
    "parallel": loops.parallel,
    "vectorize": loops.vectorize,
    "unroll": loops.unroll,
    "compute_at": compute_at.compute_at,
    "reverse_compute_at": compute_at.reverse_compute_at,
    "compute_inline": compute_at.compute_inline,
    "reverse_compute_inline": compute_at.reverse_compute_inline,
    "decompose_reduction": reduction.decompose_reduction,
    "cache_read": cache.cache_read,
    "cache_write": cache.cache_write,
    "hoist_padding": padding.hoist_padding,
    "annotate_buffer_access": buffers.annotate_buffer_access,
    "rolling_buffer": buffers.rolling_buffer,
    "double_buffer": buffers.double_buffer,
    "transform_layout": layout.transform_layout,
    "set_pools": memory.set_pools,
    "set_scope": memory.set_scope,
    "set_vectorizer": memory.set_vectorizer,
    "sample": sample.sample,
}

__all__ = ["PRIMITIVES", "Primitive", "Any"]
