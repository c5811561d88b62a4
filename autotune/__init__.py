"""autotune: a memory-aware schedule autotuner for chains of tensor operators.

The package facade. Heavy layers (numba, pandas, optuna...) load on first use.
"""

from __future__ import annotations

import importlib
from typing import Any

from . import errors, ir, te
from .errors import AutotuneError

__version__ = "0.1.0"

_LAZY = {
    "workloads": ("autotune.workloads", None),
    "Schedule": ("autotune.schedule", "Schedule"),
    "lower": ("autotune.lowering", "lower"),
    "load_results": ("autotune.report", "load_results"),
    "tune": ("autotune.api", "tune"),
    "load_best": ("autotune.api", "load_best"),
    "Tuned": ("autotune.api", "Tuned"),
}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'autotune' has no attribute {name!r}")
    module, attr = _LAZY[name]
    mod = importlib.import_module(module)
    return mod if attr is None else getattr(mod, attr)


__all__ = [
    "AutotuneError", "Schedule", "Tuned", "errors", "ir", "load_best", "load_results", "lower", "te", "tune",
    "workloads",
]  # fmt: skip
