"""Workloads: the operator library, named operator chains and their numpy references.

``get("pool_chain", height=20, width=20, channels=8)`` builds a :class:`Workload`
(its ``func``, ``reference``, ``make_inputs``, ``flops``, ``intermediate_bytes``);
``names()`` lists the chains and ``describe(name)`` gives their default parameters.
"""

from __future__ import annotations

from . import chains, flops, ops, reference
from .registry import (
    Chain,
    Workload,
    describe,
    description,
    fan_in_scale,
    get,
    intermediate_bytes,
    names,
    register,
)

__all__ = [
    "Chain",
    "Workload",
    "chains",
    "describe",
    "description",
    "fan_in_scale",
    "flops",
    "get",
    "intermediate_bytes",
    "names",
    "ops",
    "reference",
    "register",
]
