"""Tensor expressions and their lowering to a first loop nest."""

from __future__ import annotations

from .lower import FULL_REGION_ANNOTATION, create_func, lower_stage, topo_order
from .tensor import (
    Reduce,
    ReduceAxis,
    Tensor,
    cast,
    compute,
    const,
    floor,
    if_then_else,
    int_limits,
    max,
    max_value,
    min,
    min_value,
    placeholder,
    reduce_axis,
    sqrt,
    sum,
)

__all__ = [name for name in dir() if not name.startswith("_")]
