"""Random search, the control: every active knob drawn uniformly, assignments already tried skipped.

``search.strategy: random``. Nothing is learned but which assignments have a trial, so a
strategy that learns must beat this one to earn its keep (``results/sample_efficiency.md``).
"""

from __future__ import annotations

import numpy as np

from .base import Assignment, SearchStrategy, random_assignment, register_strategy

__all__ = ["RandomSearch"]


@register_strategy
class RandomSearch(SearchStrategy):
    """Uniform draws over the space, without repeating an assignment that has a trial."""

    name = "random"

    def _draw(self, n: int, rng: np.random.Generator) -> list[tuple[Assignment, str]]:
        return self._fresh(n, lambda: (random_assignment(self.space, rng), "random"))
