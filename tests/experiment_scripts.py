"""The scripts under ``experiments/`` loaded as modules, for tests of their parts.

``tests/`` is on ``sys.path`` (pytest puts the directory of the top ``conftest.py`` there),
so any test module can ``from experiment_scripts import load_experiment``.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

EXPERIMENTS = Path(__file__).resolve().parents[1] / "experiments"


def load_experiment(name: str) -> ModuleType:
    """``experiments/<name>.py`` imported as the module ``name`` (registered in ``sys.modules``:
    dataclasses look their module up there)."""
    spec = importlib.util.spec_from_file_location(name, EXPERIMENTS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module
