"""Measurement: build a lowered function, run it, check it against numpy, time it.

:func:`measure` returns a :class:`MeasureResult` (``ok``, ``wrong`` or ``error``);
:func:`measure_in_subprocess` runs it in a child process so that crashes and
hangs become ``crashed`` and ``timeout`` results.
"""

from __future__ import annotations

from .check import compare, tolerance
from .isolate import measure_in_subprocess
from .result import STATUSES, MeasureResult
from .run import empty_outputs, measure, reference_outputs
from .timing import cpu_lock, time_kernel, timing_lock, timing_section

__all__ = [
    "STATUSES",
    "MeasureResult",
    "compare",
    "cpu_lock",
    "empty_outputs",
    "measure",
    "measure_in_subprocess",
    "reference_outputs",
    "time_kernel",
    "timing_lock",
    "timing_section",
    "tolerance",
]
