"""A JSON form of index expressions, so traces never hold code.

An expression over a list of variables becomes nested lists: an int, a float,
``["v", k]`` for the k-th variable, or ``[op, a, b]`` with op one of
``+ - * // % min max``. ``AXIS_SEPARATOR`` is the string ``"|"``; a (lo, hi)
pair is a two-element list ``["range", lo, hi]``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from .. import ir
from ..errors import ScheduleError

AXIS_SEPARATOR = "|"

_OPS: dict[type, str] = {
    ir.Add: "+", ir.Sub: "-", ir.Mul: "*", ir.FloorDiv: "//", ir.FloorMod: "%", ir.Min: "min", ir.Max: "max",
}
_BUILD: dict[str, Callable[[ir.Expr, ir.Expr], ir.Expr]] = {
    "+": ir.Add, "-": ir.Sub, "*": ir.Mul, "//": ir.FloorDiv, "%": ir.FloorMod, "min": ir.Min, "max": ir.Max,
}


def expr_to_json(e: Any, variables: Sequence[ir.Var], primitive: str = "trace") -> Any:
    if isinstance(e, int) and not isinstance(e, bool):
        return e
    if isinstance(e, ir.IntImm):
        return e.value
    if isinstance(e, ir.Var):
        for k, v in enumerate(variables):
            if v is e:
                return ["v", k]
        raise ScheduleError(primitive, f"expression uses variable '{e.name}' that is not an argument")
    op = _OPS.get(type(e))
    if op is None:
        raise ScheduleError(primitive, f"only integer + - * // % min max are allowed in index expressions, got {e}")
    return [op, expr_to_json(e.a, variables, primitive), expr_to_json(e.b, variables, primitive)]


def expr_from_json(data: Any, variables: Sequence[ir.Var], primitive: str = "trace") -> ir.Expr:
    if isinstance(data, bool) or not isinstance(data, (int, list, tuple)):
        raise ScheduleError(primitive, f"malformed index expression {data!r}")
    if isinstance(data, int):
        return ir.IntImm(data)
    if len(data) == 2 and data[0] == "v" and isinstance(data[1], int) and not isinstance(data[1], bool):
        if not 0 <= data[1] < len(variables):
            raise ScheduleError(primitive, f"index expression refers to variable {data[1]}, there are {len(variables)}")
        return variables[data[1]]
    if len(data) == 3 and data[0] in _BUILD:
        return _BUILD[data[0]](expr_from_json(data[1], variables, primitive), expr_from_json(data[2], variables, primitive))
    raise ScheduleError(primitive, f"malformed index expression {data!r}")


def callable_to_json(fn: Callable[..., Sequence[Any]], variables: Sequence[ir.Var], primitive: str) -> tuple[Any, ...]:
    """Evaluate ``fn`` on ``variables`` and encode each entry of its result."""
    out: list[Any] = []
    for item in fn(*variables):
        if isinstance(item, str):
            out.append(item)
        elif isinstance(item, tuple) and len(item) == 2:
            out.append(("range", expr_to_json(item[0], variables, primitive), expr_to_json(item[1], variables, primitive)))
        else:
            out.append(expr_to_json(item, variables, primitive))
    return tuple(out)
