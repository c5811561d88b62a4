"""Analyses of the IR: linear forms, integer intervals, simplification, access regions."""

from __future__ import annotations

from .arith import Analyzer, simplify
from .interval import Interval, eval_interval, loop_interval
from .linear import Linear, sum_form, to_linear
from .region import (
    block_access_regions,
    clip_region,
    region_extents_const,
    relax_region,
    substitute_bindings,
    union_regions,
)

__all__ = [
    "Analyzer",
    "Interval",
    "Linear",
    "block_access_regions",
    "clip_region",
    "eval_interval",
    "loop_interval",
    "region_extents_const",
    "relax_region",
    "simplify",
    "substitute_bindings",
    "sum_form",
    "to_linear",
    "union_regions",
]
