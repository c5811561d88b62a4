"""The knob space: a YAML file (``search_spaces/*.yaml``) + a workload -> :class:`SearchSpace`.

A space file names a schedule *family* and says, per knob, what to search::

    name: cascade
    family: cascade          # cascade (space_cascade.py) or gemm (space_gemm.py)
    max_tile: 32             # the largest derived tile (optional)
    rules: {register_tile: off, unroll: off}   # rules whose knobs are fixed where they do nothing
    knobs:
      tile_rows: derive      # the choices derived from the workload (also what an omitted knob gets)
      at_*: {choices: [tile, root]}     # narrow (the order sets the default: the first choice)
      vectorize: {value: true}          # fix
      mode_pool1: [rolling, recompute]  # a list is short for {choices: [...]}

Per-stage knobs (``at_<stage>``) are named after the function's blocks; a glob
key such as ``at_*`` applies to all of them. A knob with one choice is fixed. ``rules`` turns off
schedule rules of the family (:mod:`autotune.search.rules`) by name: their knobs are fixed to the
values under which they do nothing (``regtile_*: 0``), and narrowing one of them too is an error.
``SearchSpace.apply(func, assignment)`` builds the schedule through Schedule
methods only; ``sch.trace_json()`` is what a trial records.
"""

from __future__ import annotations

import fnmatch
import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from math import prod
from pathlib import Path
from typing import Any

from .. import ir
from ..config import Section, YamlDoc, describe_value, read_yaml, suggest
from ..errors import ConfigError
from ..memory import Pool
from ..schedule import Schedule
from ..schedule.trace import loads as loads_trace
from ..workloads import Workload
from .space_cascade import CascadeFamily
from .space_family import KINDS, Domain, Family, Requires, same_value
from .space_gemm import GemmFamily
from .target import Target

__all__ = ["FAMILIES", "Knob", "SearchSpace", "load_space", "register_family"]

FAMILIES: dict[str, Family] = {}


def register_family(family: Family) -> Family:
    """Make ``family`` available to space files under ``family.name``."""
    if family.name in FAMILIES:
        raise ValueError(f"space family {family.name!r} is registered twice")
    FAMILIES[family.name] = family
    return family


register_family(CascadeFamily())
register_family(GemmFamily())


def _json_scalar(value: Any) -> bool:
    return isinstance(value, (int, str, bool)) and not (isinstance(value, int) and abs(value) > 2**53)


@dataclass(frozen=True)
class Knob:
    """A knob and its choices (JSON scalars), the first being the default.

    ``requires`` makes it conditional: it matters only while each named knob
    takes one of the listed values (``jam_pool2`` only with ``unroll_pool2``
    true and ``fuse_pool2`` false). The tuner samples an inactive knob not at
    all and records its default, so the sampler models only knobs that change
    the schedule, and the assignments that differ only in dead knobs are one.
    """

    name: str
    choices: tuple[Any, ...]
    requires: Requires = ()
    kind: str = "layout"
    """What the knob decides, one of :data:`~autotune.search.space_family.KINDS`."""

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"knob {self.name!r}: kind must be one of {KINDS}, got {self.kind!r}")
        if not self.choices or not all(_json_scalar(c) for c in self.choices):
            raise ValueError(
                f"knob {self.name!r}: choices must be a non-empty tuple of int, str or bool, got {self.choices!r}"
            )

    def __contains__(self, value: Any) -> bool:
        return any(same_value(value, c) for c in self.choices)

    def active(self, values: Mapping[str, Any]) -> bool:
        """Whether the knob matters under ``values`` (the other knobs' values)."""
        return all(
            name in values and any(same_value(values[name], v) for v in allowed)
            for name, allowed in self.requires
        )


@dataclass(frozen=True)
class SearchSpace:
    """The knobs to search, the fixed values, and the family that turns them into a schedule."""

    name: str
    knobs: tuple[Knob, ...]
    fixed: tuple[tuple[str, Any], ...]
    family: str = "cascade"
    source: str = field(default="", compare=False)
    target: Target = field(default_factory=Target.host, compare=False)
    """The machine the knobs were derived for (:meth:`Target.host` unless given)."""

    def default(self) -> dict[str, Any]:
        """The first choice of each knob."""
        return {k.name: k.choices[0] for k in self.knobs}

    def size(self) -> int:
        """The number of assignments, an inactive knob counting once (some may still give the
        same schedule or be impossible)."""
        controls = [k for k in self.knobs if k.name in self._controls]
        free = [k for k in self.knobs if k not in controls]
        total = 0
        for combo in itertools.product(*(k.choices for k in controls)):
            values = {**dict(self.fixed), **{k.name: v for k, v in zip(controls, combo)}}
            if any(not k.active(values) and not same_value(v, k.choices[0]) for k, v in zip(controls, combo)):
                continue  # an inactive control counts once, at its default
            total += prod(len(k.choices) if k.active(values) else 1 for k in free)
        return total

    def active_values(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """The knobs of ``values`` that are active (those a sampler is asked for), by name."""
        given = {**dict(self.fixed), **values}
        return {k.name: values[k.name] for k in self.knobs if k.active(given)}

    @cached_property
    def _controls(self) -> frozenset[str]:
        """The names of the knobs that other knobs require."""
        return frozenset(name for k in self.knobs for name, _ in k.requires)

    def search_order(self) -> tuple[Knob, ...]:
        """The knobs with those that others require first, so that a sampler can decide every
        knob's activity from values it has already drawn (worked out once per space)."""
        return self._search_order

    @cached_property
    def _search_order(self) -> tuple[Knob, ...]:
        controls = self._controls
        names = {k.name for k in self.knobs}
        pending = sorted(self.knobs, key=lambda k: k.name not in controls)
        order: list[Knob] = []
        placed: set[str] = set()
        while pending:  # a control that is itself conditional goes after the knobs it requires
            ready = next(
                (k for k in pending if all(name in placed or name not in names for name, _ in k.requires)),
                None,
            )
            if ready is None:
                raise ValueError(
                    f"space {self.name!r}: knobs require each other: {[k.name for k in pending]}"
                )
            order.append(ready)
            placed.add(ready.name)
            pending.remove(ready)
        return tuple(order)

    def values(self, assignment: Mapping[str, Any]) -> dict[str, Any]:
        """Every knob's value: ``assignment`` over the defaults and fixed values; ValueError outside the space."""
        knobs = {k.name: k for k in self.knobs}
        fixed = dict(self.fixed)
        values = {**fixed, **self.default()}
        for name, value in assignment.items():
            if name not in values:
                raise ValueError(f"space {self.name!r}: unknown knob {name!r}{suggest(name, sorted(values))}")
            if name in knobs and value not in knobs[name]:
                raise ValueError(
                    f"space {self.name!r}: knob {name!r} has choices {list(knobs[name].choices)}, got {value!r}"
                )
            if name in fixed and not same_value(value, fixed[name]):
                raise ValueError(
                    f"space {self.name!r}: knob {name!r} is fixed to {fixed[name]!r}, got {value!r}"
                )
            values[name] = value
        return values

    def apply(self, func: ir.Func, assignment: Mapping[str, Any]) -> Schedule:
        """The schedule of ``assignment`` (missing knobs take their default); ScheduleError if impossible.

        Its trace starts with a ``sample`` step per knob that matters (active, more than one
        choice), in :meth:`search_order`, then the primitives the family applies for them."""
        values = self.values(assignment)
        sch = Schedule(func)
        for knob in self.search_order():
            if knob.active(values):
                sch = sch.sample(knob.name, knob.kind, knob.choices, values[knob.name])
        return FAMILIES[self.family].apply(sch, values, self.target)

    def decisions(self, trace: str) -> dict[str, Any]:
        """The knob values a trace of this space records in its ``sample`` steps (ValueError for a
        decision this space does not have or a value outside its choices); the knobs it does not
        record take their defaults when the result is applied."""
        steps = [s for s in loads_trace(trace) if s.op == "sample"]
        out = {s.kwargs()["name"]: s.kwargs()["decision"] for s in steps}
        self.values(out)  # the names and values belong to this space
        return out


# ---------------------------------------------------------------- loading


def load_space(
    path: str | Path, workload: Workload, pools: Sequence[Pool] = (), target: Target | None = None
) -> SearchSpace:
    """Read a space file and derive its knobs for ``workload`` on ``target`` (this host unless given;
    and the pool names, for pool knobs).

    Raises ConfigError naming the file, line and field: an unknown family or
    knob (with the closest name), a choice the knob cannot take, a family that
    does not fit the workload.
    """
    doc = read_yaml(path)
    top = Section(doc, (), doc.data, ("name", "family", "max_tile", "rules", "knobs"), required=("family",))
    family = FAMILIES[top.choice("family", sorted(FAMILIES), "")]
    max_tile = top.integer("max_tile", family.max_tile)
    try:
        target = target or Target.host()
        domains = family.domains(workload.func, [p.name for p in pools], max_tile, target)
    except ConfigError as err:
        raise doc.error(("family",), f"{err} (workload {workload.name!r})") from None
    specs = top.get("knobs") or {}
    if not isinstance(specs, dict):
        raise top.error(
            "knobs",
            "expected a mapping of knob names to derive, [choices], {choices: [...]} or {value: ...}",
            specs,
        )
    _check_keys(doc, specs, domains, family)
    off = _rules_off(doc, top.get("rules"), family)
    knobs: list[Knob] = []
    fixed: list[tuple[str, Any]] = []
    for domain in domains:
        key = _key_for(domain.name, specs)
        rule, value = next(
            ((r, v) for pattern, (r, v) in off.items() if fnmatch.fnmatchcase(domain.name, pattern)),
            ("", None),
        )
        if rule and key in specs:
            raise doc.error(
                ("knobs", key), f"knob {domain.name!r} is fixed by rules.{rule}: off; narrow one or the other"
            )
        choices = (value,) if rule else _choices(doc, ("knobs", key), specs.get(key, "derive"), domain)
        if len(choices) == 1:
            fixed.append((domain.name, choices[0]))
        else:
            knobs.append(Knob(domain.name, choices, domain.requires, domain.kind))
    knobs, fixed = _settle_requirements(knobs, fixed)
    name = top.text("name", Path(path).stem)
    return SearchSpace(name, tuple(knobs), tuple(fixed), family.name, str(path), target)


def _settle_requirements(
    knobs: list[Knob], fixed: list[tuple[str, Any]]
) -> tuple[list[Knob], list[tuple[str, Any]]]:
    """Requirements on fixed knobs are decided here: met ones are dropped, and a knob whose
    requirement can never be met is fixed to its default."""
    values = dict(fixed)
    names = {k.name for k in knobs} | set(values)
    out: list[Knob] = []
    for knob in knobs:
        unknown = [n for n, _ in knob.requires if n not in names]
        if unknown:
            raise ValueError(f"knob {knob.name!r} requires unknown knobs {unknown}")
        pending = tuple((n, allowed) for n, allowed in knob.requires if n not in values)
        decided = replace(knob, requires=tuple((n, a) for n, a in knob.requires if n in values))
        if not decided.active(values):
            fixed.append((knob.name, knob.choices[0]))
        else:
            out.append(replace(knob, requires=pending))
    return out, fixed


def _rules_off(doc: YamlDoc, spec: Any, family: Family) -> dict[str, tuple[str, Any]]:
    """``rules: {name: off, ...}``: for each knob name or glob of a rule turned off, the rule and the
    value that makes it do nothing. (YAML reads a bare ``off`` as false; both spellings are taken.)"""
    if spec is None:
        return {}
    if not isinstance(spec, dict):
        raise doc.error(("rules",), f"expected a mapping of rule names to off, got {describe_value(spec)}")
    rules = dict(family.rules)
    if not rules:
        raise doc.error(("rules",), f"family {family.name!r} has no rules to turn off")
    out: dict[str, tuple[str, Any]] = {}
    for name, value in spec.items():
        if name not in rules:
            raise doc.error(("rules", name), f"unknown rule{suggest(str(name), list(rules))}")
        if value is not False and value != "off":
            raise doc.error(("rules", name), f"expected off, got {describe_value(value)}")
        values = rules[name]
        if values is None:
            raise doc.error(
                ("rules", name), f"rule {name!r} cannot be turned off: every schedule of the family needs it"
            )
        out |= {pattern: (name, v) for pattern, v in values}
    return out


def _is_pattern(key: str) -> bool:
    return any(ch in key for ch in "*?[")


def _key_for(name: str, specs: Mapping[str, Any]) -> str:
    """The key of ``specs`` that sets knob ``name``: its own name, else the first glob matching it."""
    if name in specs:
        return name
    return next((k for k in specs if _is_pattern(k) and fnmatch.fnmatchcase(name, k)), name)


def _check_keys(doc: YamlDoc, specs: Mapping[Any, Any], domains: Sequence[Domain], family: Family) -> None:
    names = [d.name for d in domains]
    for key in specs:
        if not isinstance(key, str):
            raise doc.error(("knobs", key), f"expected a knob name, got {describe_value(key)}")
        if key in names or key in family.patterns:
            continue
        if _is_pattern(key) and any(fnmatch.fnmatchcase(n, key) for n in names):
            continue
        raise doc.error(("knobs", key), f"unknown knob{suggest(key, [*names, *family.patterns])}")


def _choices(doc: YamlDoc, where: tuple[str, ...], spec: Any, domain: Domain) -> tuple[Any, ...]:
    """The choices a knob spec gives: ``derive``, a list, ``{choices: [...]}`` or ``{value: x}``."""
    if spec is None or spec == "derive":
        return domain.derived
    at: tuple[str | int, ...] = where
    if isinstance(spec, dict):
        sec = Section(doc, where, spec, ("choices", "value"))
        if len(spec) != 1:
            raise doc.error(where, "expected exactly one of 'choices' or 'value'")
        if "value" in spec:
            spec, at = [spec["value"]], (*where, "value")
        else:
            spec, at = sec.get("choices"), (*where, "choices")
    if not isinstance(spec, list) or not spec:
        raise doc.error(
            at,
            f"expected 'derive', a non-empty list of choices, {{choices: [...]}} or {{value: ...}}, got {describe_value(spec)}",
        )
    for i, choice in enumerate(spec):
        if not domain.accepts(choice):
            raise doc.error(
                (*at, i) if at[-1] != "value" else at,
                f"expected {domain.expected}, got {describe_value(choice)}",
            )
        if any(same_value(choice, c) for c in spec[:i]):
            raise doc.error((*at, i), f"{describe_value(choice)} is listed twice")
    return tuple(spec)
