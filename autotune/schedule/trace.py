"""The trace: a JSON list of primitive calls that rebuilds a schedule.

Each step records the primitive, its arguments (JSON values only) and the names
it produced, so that a replay can check it rebuilt the same schedule.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ..errors import ScheduleError

TRACE_VERSION = 1


@dataclass(frozen=True, slots=True)
class Step:
    op: str
    args: tuple[tuple[str, Any], ...]
    outputs: tuple[str, ...] = ()

    def kwargs(self) -> dict[str, Any]:
        return {k: _from_json(v) for k, v in self.args}

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"op": self.op, "args": {k: _to_json(v) for k, v in self.args}}
        if self.outputs:
            out["outputs"] = list(self.outputs)
        return out


def _to_json(v: Any) -> Any:
    if isinstance(v, tuple):
        return [_to_json(x) for x in v]
    return v


def _from_json(v: Any) -> Any:
    if isinstance(v, list):
        return tuple(_from_json(x) for x in v)
    return v


def make_step(op: str, outputs: tuple[str, ...] = (), /, **kwargs: Any) -> Step:
    # positional-only: a trace step may name an argument "op" or "outputs" (check_args rejects it)
    return Step(op, tuple(sorted((k, _from_json(_to_json(v))) for k, v in kwargs.items())), outputs)


MAX_DEPTH = 32
"""How deeply a step's argument may nest lists (index maps and regions need a handful)."""


def _too_deep(v: Any, depth: int = 0) -> bool:
    """Whether ``v`` nests lists deeper than :data:`MAX_DEPTH` (stops looking there: no RecursionError)."""
    if not isinstance(v, (list, tuple, dict)):
        return False
    if depth >= MAX_DEPTH:
        return True
    items = v.values() if isinstance(v, dict) else v
    return any(_too_deep(x, depth + 1) for x in items)


def dumps(steps: tuple[Step, ...]) -> str:
    return json.dumps({"version": TRACE_VERSION, "steps": [s.to_json() for s in steps]}, indent=1)


def parse(data: Any, source: str = "trace") -> tuple[Step, ...]:
    """Steps from a decoded JSON document; raises ScheduleError on a malformed trace or another format version."""
    if not isinstance(data, dict) or not isinstance(data.get("steps"), list):
        raise ScheduleError("trace", f"{source}: expected an object with a 'steps' list")
    version = data.get("version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise ScheduleError("trace", f"{source}: 'version' must be an integer, got {version!r}")
    if version > TRACE_VERSION:
        raise ScheduleError("trace", f"{source}: trace format version {version} is newer than this autotune ({TRACE_VERSION})")
    if version < TRACE_VERSION:  # TRACE_VERSION is the only format read: a lower number is a bad value
        raise ScheduleError("trace", f"{source}: 'version' must be {TRACE_VERSION}, got {version!r}")
    steps = []
    for i, raw in enumerate(data["steps"]):
        if not isinstance(raw, dict) or not isinstance(raw.get("op"), str) or not isinstance(raw.get("args", {}), dict):
            raise ScheduleError("trace", f"{source}: step {i} must be an object with 'op' (string) and 'args' (object)")
        outputs = raw.get("outputs", [])
        if not isinstance(outputs, list) or not all(isinstance(o, str) for o in outputs):
            raise ScheduleError("trace", f"{source}: step {i} 'outputs' must be a list of strings")
        args = raw.get("args", {})
        deep = sorted(k for k, v in args.items() if _too_deep(v))
        if deep:
            raise ScheduleError("trace", f"{source}: step {i} argument {deep[0]!r} nests lists more than {MAX_DEPTH} deep")
        steps.append(make_step(raw["op"], tuple(outputs), **args))
    return tuple(steps)


def loads(text: str, source: str = "trace") -> tuple[Step, ...]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise ScheduleError("trace", f"{source}: not valid JSON ({e.msg} at line {e.lineno})") from None
    except (RecursionError, ValueError) as e:
        raise ScheduleError("trace", f"{source}: not valid JSON ({json_problem(e)})") from None
    return parse(data, source)


def json_problem(e: RecursionError | ValueError) -> str:
    """What ``json.loads`` found besides a syntax error: nesting too deep, or an integer too long."""
    if isinstance(e, RecursionError):
        return "nested too deeply"
    return f"an integer is too long: {str(e).split(';')[0]}"
