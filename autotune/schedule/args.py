"""Checking a primitive's arguments against its signature before it runs.

Traces come from files, so a step may carry anything JSON can: a string where
a loop name belongs, a float split factor, an unknown argument. Every such
mismatch becomes a :class:`ScheduleError` naming the primitive and argument.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from ..errors import ScheduleError


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


_CHECKS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "str": (lambda v: isinstance(v, str), "a string"),
    "int": (_is_int, "an integer"),
    "int | None": (_is_int, "an integer"),
    "tuple[str, ...]": (lambda v: isinstance(v, tuple) and all(isinstance(x, str) for x in v), "a list of strings"),
    "tuple[int | None, ...]": (
        lambda v: isinstance(v, tuple) and all(x is None or _is_int(x) for x in v),
        "a list of integers (or null)",
    ),
    "tuple": (lambda v: isinstance(v, tuple), "a list"),
}


_PARAMS: dict[Callable[..., Any], tuple[list[inspect.Parameter], dict[str, inspect.Parameter]]] = {}
"""The parameters of each primitive after ``func``, as a list and by name, keyed on the function:
its signature does not change, and reading it at every step was a measurable share of applying a
candidate's knobs (``experiments/tune_wall.py``'s ``apply`` part)."""


def _params(fn: Callable[..., Any]) -> tuple[list[inspect.Parameter], dict[str, inspect.Parameter]]:
    found = _PARAMS.get(fn)
    if found is None:
        params = list(inspect.signature(fn).parameters.values())[1:]
        found = _PARAMS[fn] = (params, {p.name: p for p in params})
    return found


def check_args(op: str, fn: Callable[..., Any], kwargs: dict[str, Any]) -> None:
    """Raise ScheduleError unless ``kwargs`` fit the parameters of primitive ``fn`` (after ``func``)."""
    params, known = _params(fn)
    unknown = sorted(set(kwargs) - set(known))
    if unknown:
        raise ScheduleError(op, f"unknown argument(s) {unknown}; expected {sorted(known)}")
    for p in params:
        if p.name not in kwargs:
            if p.default is inspect.Parameter.empty:
                raise ScheduleError(op, f"missing argument '{p.name}'")
            continue
        check = _CHECKS.get(str(p.annotation))
        if check is not None and not check[0](kwargs[p.name]):
            raise ScheduleError(op, f"argument '{p.name}' must be {check[1]}, got {kwargs[p.name]!r}")
