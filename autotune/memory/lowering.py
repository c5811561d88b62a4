"""The memory-planning lowering pass: IR ``Allocate`` nodes <-> planner allocations.

:func:`allocations_of` turns every ``Allocate`` of a lowered function into
:class:`Allocation` records (sizes from the extents, lifetimes from
:mod:`autotune.analysis.liveness`, candidates from the RFC 0023
``candidate_memory_pools`` annotation); :func:`plan_memory_pass` plans them and
writes the result back onto each ``Allocate``::

    A_data = T.allocate([1024], "float32")                  -> annotations={"offset": 0, "pool": "dtcm"}
    B_data = T.allocate([2, 4096], "float32",               -> annotations={..., "offset": (0, 16384),
        annotations={"candidate_memory_pools": ("dtcm",)})                  "pool": ("dtcm", "dtcm")}

An allocation is named after its data variable without the ``_data`` suffix
(``A``). A banked allocation (2+ physical axes, kept by axis separators) is one
allocation per bank, ``B.bank0``, ``B.bank1``...: the banks are the entries of
every physical axis but the last (the codegen's layout: a tuple of 1-d arrays),
each of ``extents[-1]`` elements, and each may land in its own pool. Candidates given per
bank (``candidate_memory_pools`` of one-pool tuples, ``set_pools(..., per_bank=True)``) pin
bank ``k`` to entry ``k`` modulo their number.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from math import prod
from typing import Protocol

from autotune import ir
from autotune.analysis.liveness import allocate_nodes, allocation_lifetimes
from autotune.errors import LoweringError
from autotune.memory.plan import Allocation, MemoryPlan
from autotune.memory.planner import plan_memory
from autotune.memory.pools import Pool

__all__ = [
    "CANDIDATES",
    "EMPTY_ALGORITHM",
    "PlanOptions",
    "allocation_names",
    "allocations_of",
    "annotate_plan",
    "bank_layout",
    "empty_plan",
    "in_registers",
    "peak_memory",
    "plan_memory_pass",
    "plan_of",
]

#: The ``Allocate`` annotation listing candidate pools, in order of preference.
CANDIDATES = "candidate_memory_pools"
#: The ``algorithm`` of a plan that places nothing.
EMPTY_ALGORITHM = "none"


class PlanOptions(Protocol):
    """What the pass reads from the lowering options (``LowerOptions``) and where it writes."""

    pools: tuple[Pool, ...]
    planner: str
    seed: int
    plan: MemoryPlan | None


def empty_plan(pools: Iterable[Pool]) -> MemoryPlan:
    """A plan of ``pools`` with no placements (for a function lowered without planning)."""
    return MemoryPlan((), tuple(pools), EMPTY_ALGORITHM)


def bank_layout(node: ir.Allocate) -> tuple[int, int]:
    """``(banks, elements per bank)`` of ``node``; ``banks == 1`` for a flat allocation.

    :class:`LoweringError` when an extent is not a positive constant.
    """
    extents = [ir.as_int(e) for e in node.extents]
    if not extents or any(e is None or e <= 0 for e in extents):
        text = ", ".join(str(e) for e in node.extents)
        raise LoweringError(
            f"plan_memory: allocation {node.data.name} needs constant positive extents, got [{text}]"
        )
    sizes = [e for e in extents if e is not None]
    return prod(sizes[:-1]), sizes[-1]


def _is_banked(node: ir.Allocate) -> bool:
    return len(node.extents) > 1


def allocation_names(func: ir.Func) -> dict[ir.Var, str]:
    """The allocation name of each ``Allocate`` data variable, unique within ``func``.

    The name is the variable's without ``_data``; a name already taken gets
    ``_1``, ``_2``... appended.
    """
    names: dict[ir.Var, str] = {}
    taken: set[str] = set()
    for node in allocate_nodes(func):
        if node.data in names:
            continue
        base = node.data.name.removesuffix("_data") or node.data.name
        name, k = base, 0
        while name in taken:
            k += 1
            name = f"{base}_{k}"
        taken.add(name)
        names[node.data] = name
    return names


def in_registers(node: ir.Allocate) -> bool:
    """Whether ``node`` is a ``local`` (register) allocation: scalar variables, in no pool."""
    return ir.ann_get(node.annotations, "scope") == ir.REGISTER_SCOPE


def _candidates(node: ir.Allocate, bank: int = 0) -> tuple[str, ...]:
    """The candidate pools of ``node``'s bank ``bank``: the annotation's list, or, when its entries are
    lists (``set_pools(..., per_bank=True)``), entry ``bank`` modulo their number."""
    value = ir.ann_get(node.annotations, CANDIDATES, ())
    if isinstance(value, str):
        return (value,)
    if value and all(isinstance(v, tuple) for v in value):
        return tuple(value[bank % len(value)])
    return tuple(value)


def allocations_of(func: ir.Func) -> list[Allocation]:
    """One :class:`Allocation` per ``Allocate`` of ``func`` (one per bank when banked),
    in program order."""
    lifetimes = allocation_lifetimes(func)
    names = allocation_names(func)
    seen: set[ir.Var] = set()
    out: list[Allocation] = []
    for node in allocate_nodes(func):
        if node.data in seen or in_registers(node):
            continue
        seen.add(node.data)
        banks, elems = bank_layout(node)
        size = elems * ir.dtype_bytes(node.dtype)
        start, end = lifetimes[node.data]
        name = names[node.data]
        labels = [f"{name}.bank{k}" for k in range(banks)] if _is_banked(node) else [name]
        out.extend(Allocation(label, size, start, end, _candidates(node, k)) for k, label in enumerate(labels))
    return out


class _Annotator(ir.Transformer):
    """Writes ``pool`` and ``offset`` onto every ``Allocate`` from a plan."""

    def __init__(self, plan: MemoryPlan, names: dict[ir.Var, str]) -> None:
        self.plan = plan
        self.names = names

    def visit_Allocate(self, node: ir.Allocate) -> ir.Allocate:
        body = self.visit(node.body)
        if in_registers(node):
            return replace(node, body=body)
        name = self.names[node.data]
        if _is_banked(node):
            banks, _ = bank_layout(node)
            placed = [self.plan.placement(f"{name}.bank{k}") for k in range(banks)]
            pool: object = tuple(p.pool for p in placed)
            offset: object = tuple(p.offset for p in placed)
        else:
            placement = self.plan.placement(name)
            pool, offset = placement.pool, placement.offset
        ann = ir.ann_set(ir.ann_set(node.annotations, "pool", pool), "offset", offset)
        return replace(node, body=body, annotations=ann)


def annotate_plan(func: ir.Func, plan: MemoryPlan) -> ir.Func:
    """``func`` with each ``Allocate`` annotated with its ``pool`` and ``offset`` in ``plan``
    (a str and an int, or tuples with one entry per bank)."""
    return replace(func, body=_Annotator(plan, allocation_names(func)).visit(func.body))


def plan_of(
    func: ir.Func, pools: Iterable[Pool], planner: str = "greedy_by_size", seed: int = 0
) -> MemoryPlan:
    """Plan the allocations of the lowered ``func`` into ``pools`` with ``planner``.

    Raises :class:`PoolOverflowError` when they do not fit and
    :class:`ConfigError` when a candidate names an unknown pool or the planner
    is unknown.
    """
    return plan_memory(allocations_of(func), tuple(pools), algorithm=planner, seed=seed)


def peak_memory(func: ir.Func, pools: Iterable[Pool], planner: str = "greedy_by_size", seed: int = 0) -> int:
    """Total workspace bytes (sum of the pools' peaks) of ``func`` as planned by ``planner``."""
    return plan_of(func, pools, planner, seed).total_peak


def plan_memory_pass(func: ir.Func, options: PlanOptions) -> ir.Func:
    """The lowering pass: plan with ``options.pools``/``planner``/``seed``, store the
    plan in ``options.plan`` and return ``func`` with ``pool``/``offset`` annotations."""
    plan = plan_of(func, options.pools, options.planner, options.seed)
    plan.verify()
    options.plan = plan
    return annotate_plan(func, plan)
