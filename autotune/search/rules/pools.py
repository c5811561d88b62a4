"""Memory pools: which of the config's pools each intermediate allocation goes to."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...analysis.chain import Cascade
from ...schedule import Schedule
from ..space_family import Domain, choice_domain
from ..target import Target
from .base import Chain, Nest, Rule
from .location import kept

__all__ = ["Pools"]


class Pools(Rule):
    """``pool_<stage>``: the pool of the buffer each block writes (``set_pools``), for every
    intermediate buffer that is not inlined, when the config has pools. The planner places each allocation in its pool
    and the candidate is infeasible (never compiled) where a pool overflows."""

    name = "pools"

    patterns = ("pool_*",)

    def domains(self, chain: Chain) -> list[Domain]:
        if not chain.pools:
            return []
        return [
            choice_domain(f"pool_{block}", chain.pools, kept(chain, block), kind="pool")
            for block, _ in chain.cascade.buffers
        ]

    def apply(
        self, sch: Schedule, c: Cascade, values: Mapping[str, Any], nest: Nest, target: Target
    ) -> Schedule:
        for block, buffer in c.buffers:
            if f"pool_{block}" in values and not values.get(f"inline_{block}", False):
                sch = sch.set_pools(block, buffer, [values[f"pool_{block}"]])
        return sch
