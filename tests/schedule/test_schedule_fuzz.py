"""Random primitive sequences on random small chains either refuse at once or compute the reference.

Each example draws a chain (``fuzz_chains``: NHWC and NCHW convolutions, depthwise, max and
average pools, dense with and without bias, relu, relu6, add, resize, a diamond, a final
reduction; float32, int32, int8) and up to eight calls of any of the primitives (hoist_padding
included) with arguments biased toward valid ones
(``fuzz_steps.draw_step``). A ``ScheduleError`` must name the primitive that raised it, and the
refused step is dropped; the steps accepted must replay from the trace, lower with the verifier, and give the numpy
reference. Everything else is a defect and fails the test with the chain and the steps.

Cost: the kernel of every example is generated and run as plain Python on its planned storage
(parallel loops in reverse order), a few ms on these shapes; every 50th example run is also
compiled with numba and run (counted in the test, so the share does not depend on the draws;
a numba compile costs about a second). The draws are derandomized, so the suite runs the same
200 examples every time.
``experiments/fuzz_schedules.py`` runs the same examples by the thousand.
"""

from __future__ import annotations

import itertools

from fuzz_chains import HypothesisChooser, RandomChooser
from fuzz_steps import run_example
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

COMPILE_ONE_IN = 50
_RUNS = itertools.count(1)


@settings(
    max_examples=200,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(st.data())
def test_random_schedules_refuse_or_match_numpy(data):
    ch = HypothesisChooser(data)
    outcome = run_example(ch, compile_kernel=next(_RUNS) % COMPILE_ONE_IN == 0)
    assert outcome.defect is None, outcome.report()


def test_the_fuzzer_reaches_kernels_and_refusals():
    # the generator is not degenerate: most examples run a kernel, and some steps are refused
    outcomes = [run_example(RandomChooser(seed), compile_kernel=False) for seed in range(40)]
    assert [o.defect for o in outcomes if o.defect] == []
    assert sum(o.ran for o in outcomes) >= 30
    assert sum(len(o.steps) for o in outcomes) >= 60
    assert any(o.refusals for o in outcomes)
