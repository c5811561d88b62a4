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
    intermediate buffer that is not inlined, and ``pool_<stage>_<input>`` of each staged input
    (:class:`~autotune.search.rules.staging.Staging`), when the config has pools. The planner places each allocation in its pool
    and the candidate is infeasible (never compiled) where a pool overflows."""

    name = "pools"

    patterns = ("pool_*",)

    def domains(self, chain: Chain) -> list[Domain]:
        if not chain.pools:
            return []
        return [
            *(
                choice_domain(f"pool_{block}", chain.pools, kept(chain, block), kind="pool")
                for block, _ in chain.cascade.buffers
            ),
            *(
                choice_domain(
                    f"pool_{stage}_{buf}", chain.pools, ((f"stage_{stage}_{buf}", ("tile",)),), kind="pool"
                )
                for stage, buf in chain.cascade.stageable
            ),
        ]

    def apply(
        self, sch: Schedule, c: Cascade, values: Mapping[str, Any], nest: Nest, target: Target
    ) -> Schedule:
        for block, buffer in c.buffers:
            if f"pool_{block}" in values and not values.get(f"inline_{block}", False):
                sch = sch.set_pools(block, buffer, [values[f"pool_{block}"]])
        for stage, buf in c.stageable:
            copy = nest.staged.get((stage, buf))
            if copy is not None and f"pool_{stage}_{buf}" in values:
                sch = sch.set_pools(copy, copy, [values[f"pool_{stage}_{buf}"]])
        return sch
