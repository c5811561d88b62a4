"""Every built-in chain, at a small size, compiles and matches its numpy reference.

Each chain is built twice: after ``lower_blocks`` alone (N-d buffers, no plan) and
after the whole lowering pipeline (flat buffers, storage placed by the memory plan).
"""

from __future__ import annotations

import numpy as np
import pytest

from autotune import workloads
from autotune.codegen import build
from autotune.lowering import lower, lower_blocks

pytestmark = pytest.mark.slow

SMALL = {
    "pool_chain": {"height": 12, "width": 12, "channels": 4},
    "matmul": {"m": 16, "n": 12, "k": 8},
    "bottleneck": {"height": 8, "width": 8, "cin": 4, "expand": 8},
    "resize_conv": {"channels": 4, "height": 12, "width": 12},
    "tiny_cnn": {"height": 16, "width": 16},
}


def test_every_chain_has_a_small_size() -> None:
    assert set(SMALL) == set(workloads.names())


@pytest.mark.parametrize("pipeline", ["lower_blocks", "lower"])
@pytest.mark.parametrize("name", sorted(SMALL))
def test_chain_matches_reference(name: str, pipeline: str) -> None:
    work = workloads.get(name, **SMALL[name])
    if pipeline == "lower":
        lowered = lower(work.func)
        kernel = build(lowered.func, lowered.plan)
        assert kernel.workspace_bytes == lowered.plan.total_peak
        for pool in kernel.pools.values():
            assert pool.ctypes.data % 64 == 0
    else:
        kernel = build(lower_blocks(work.func))
    inputs = work.make_inputs(seed=0)
    outputs = [np.full(b.const_shape(), np.nan, b.dtype) for b in work.func.outputs]
    kernel(*inputs, *outputs)
    for out, ref in zip(outputs, work.reference(*inputs)):
        np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4 * max(1.0, float(np.abs(ref).max())))
