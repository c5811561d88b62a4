"""Search strategies: what proposes knob assignments to the tuner and learns from their trials.

One module per strategy, each registered by name for ``search.strategy`` in a config:

- ``optuna`` (:mod:`.optuna_study`, the default): Optuna's TPE, NSGA-II (latency and peak
  memory) or random sampler, as ``search.sampler`` says;
- ``evolutionary`` (:mod:`.evolutionary`): mutations of the fastest measured assignments, bred
  for a few generations on the cost model's predictions, plus a random share (MetaSchedule's
  evolutionary search);
- ``random`` (:mod:`.random_search`): uniform draws, the control.

The interface and its contract are in :mod:`.base`; a new strategy is one class with
``@register_strategy``. :mod:`.optuna_storage` keeps the Optuna strategy's copy of the trial log
in a database (``search.storage``) that optuna-dashboard opens.
"""

from __future__ import annotations

from . import evolutionary, optuna_storage, optuna_study, random_search
from .base import (
    STRATEGIES,
    Assignment,
    Outcome,
    Proposal,
    Scorer,
    SearchStrategy,
    complete,
    make_strategy,
    random_assignment,
    register_strategy,
)

__all__ = [
    "STRATEGIES",
    "Assignment",
    "Outcome",
    "Proposal",
    "Scorer",
    "SearchStrategy",
    "complete",
    "evolutionary",
    "make_strategy",
    "optuna_storage",
    "optuna_study",
    "random_assignment",
    "random_search",
    "register_strategy",
]
