"""Every workload computes the same outputs with pool-planned memory as with separate allocations."""

from __future__ import annotations

import numpy as np
import pytest

from autotune import workloads
from autotune.codegen import build
from autotune.lowering import lower
from autotune.memory import Pool

SMALL = {
    "pool_chain": {"height": 12, "width": 10, "channels": 4},
    "bottleneck": {"height": 6, "width": 5, "cin": 4, "expand": 8},
    "resize_conv": {"channels": 2, "height": 16, "width": 12},
    "matmul": {"m": 8, "n": 6, "k": 5},
    "tiny_cnn": {"height": 16, "width": 16},
}
POOLS = (Pool("dtcm", 2048), Pool("sram", 1 << 20))


def _run(w: workloads.Workload, lowered, plan) -> list[np.ndarray]:  # type: ignore[no-untyped-def]
    kernel = build(lowered.func, plan)
    inputs = w.make_inputs(3)
    outputs = [np.full(b.const_shape(), np.nan, dtype=b.dtype) for b in w.func.outputs]
    kernel(*inputs, *outputs)
    return outputs


@pytest.mark.parametrize("name", sorted(SMALL))
def test_planned_equals_separate(name):
    w = workloads.get(name, **SMALL[name])
    lowered = lower(w.func, pools=POOLS, planner="hill_climb")
    planned = _run(w, lowered, lowered.plan)
    separate = _run(w, lowered, None)
    for a, b in zip(planned, separate):
        np.testing.assert_array_equal(a, b)
    for a, ref in zip(planned, w.reference(*w.make_inputs(3))):
        np.testing.assert_allclose(a, ref, rtol=1e-4, atol=1e-4)


def test_tiny_cnn_reuses_bytes():
    w = workloads.get("tiny_cnn", **SMALL["tiny_cnn"])
    plan = lower(w.func, pools=POOLS).plan
    sizes = sum(p.size for p in plan.placements)
    # intermediates with disjoint lifetimes share offsets: the peak is below the sum
    assert plan.total_peak < sizes
