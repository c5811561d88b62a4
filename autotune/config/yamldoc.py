"""YAML files read safely with the line of every field, and typed reading of their mappings.

``read_yaml(path)`` composes the node tree with ``yaml.SafeLoader`` (nothing is
evaluated) and builds plain data, remembering where each field starts, so that
an error can say ``bad.yaml:4: memory.pools[1].size: expected ..., got '-3KiB'``.
:class:`Section` checks one mapping's keys (an unknown key suggests the closest
known one) and reads typed fields with defaults.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ..errors import ConfigError
from ..memory import parse_size

__all__ = [
    "FieldPath",
    "Section",
    "YamlDoc",
    "describe_value",
    "dotted",
    "parse_duration",
    "read_yaml",
    "suggest",
]

MAX_NODES = 100_000
FieldPath = tuple[str | int, ...]


def suggest(word: object, options: Sequence[str]) -> str:
    """``"; did you mean 'x'?"`` for the closest option, or the list of options."""
    close = difflib.get_close_matches(str(word), list(options), n=1)
    return f"; did you mean {close[0]!r}?" if close else f"; expected one of {', '.join(options)}"


def describe_value(value: Any) -> str:
    """A short ``repr`` for messages; containers by their kind."""
    if isinstance(value, (Mapping, list)) and value:
        return "a mapping" if isinstance(value, Mapping) else "a list"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def dotted(path: FieldPath) -> str:
    """``("memory", "pools", 1, "size")`` -> ``"memory.pools[1].size"``."""
    text = ""
    for part in path:
        if isinstance(part, int) and not isinstance(part, bool):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else str(part)
    return text


@dataclass(frozen=True)
class YamlDoc:
    """A YAML file's data and the 1-based line of every field in it."""

    file: str
    data: Any
    lines: Mapping[FieldPath, int]

    def line(self, path: FieldPath) -> int | None:
        while path not in self.lines and path:
            path = path[:-1]
        return self.lines.get(path)

    def error(self, path: FieldPath, message: str) -> ConfigError:
        line = self.line(path)
        where = f"{self.file}:{line}" if line is not None else self.file
        return ConfigError(f"{where}: {dotted(path)}: {message}" if path else f"{where}: {message}")


class _Builder:
    """Python data from a composed node tree, recording where each field starts."""

    def __init__(self, file: str) -> None:
        self.file = file
        self.scalars = yaml.SafeLoader("")
        self.lines: dict[FieldPath, int] = {}
        self.stack: set[int] = set()
        self.count = 0

    def fail(self, node: yaml.Node, message: str) -> ConfigError:
        return ConfigError(
            f"{self.file}:{node.start_mark.line + 1}:{node.start_mark.column + 1}: invalid YAML: {message}"
        )

    def build(self, node: yaml.Node, path: FieldPath) -> Any:
        self.count += 1
        if self.count > MAX_NODES or id(node) in self.stack:
            raise self.fail(node, "too many or recursive aliases")
        if isinstance(node, yaml.ScalarNode):
            return self.scalar(node)
        self.stack.add(id(node))
        try:
            if isinstance(node, yaml.SequenceNode):
                if node.tag != "tag:yaml.org,2002:seq":
                    raise self.fail(node, f"unsupported tag {node.tag!r}")
                out: Any = []
                for i, item in enumerate(node.value):
                    self.lines.setdefault((*path, i), item.start_mark.line + 1)
                    out.append(self.build(item, (*path, i)))
                return out
            return dict(self.mapping(node, path))
        finally:
            self.stack.discard(id(node))

    def mapping(self, node: yaml.Node, path: FieldPath) -> Iterator[tuple[Any, Any]]:
        if not isinstance(node, yaml.MappingNode) or node.tag != "tag:yaml.org,2002:map":
            raise self.fail(node, f"unsupported tag {node.tag!r}")
        try:
            self.scalars.flatten_mapping(node)  # merge keys (`<<: *defaults`)
        except yaml.MarkedYAMLError as err:
            raise self.fail(node, err.problem or "bad merge key") from None
        seen: set[Any] = set()
        for key_node, value_node in node.value:
            key = self.scalar(key_node) if isinstance(key_node, yaml.ScalarNode) else None
            if not isinstance(key, (str, int, float, bool)) and key is not None:
                raise self.fail(key_node, "mapping keys must be plain scalars")
            if key in seen:
                raise self.fail(key_node, f"duplicate key {key!r}")
            seen.add(key)
            self.lines.setdefault((*path, key), key_node.start_mark.line + 1)  # type: ignore[arg-type]
            yield key, self.build(value_node, (*path, key))  # type: ignore[arg-type]

    def scalar(self, node: yaml.ScalarNode) -> Any:
        if node.tag not in self.scalars.yaml_constructors:  # `!!python/name:os.system ''`, `!mine x`
            raise self.fail(node, f"unsupported tag {node.tag!r}")
        # PyYAML's scalar constructors fail in many ways on malformed input (`!!int ` is an IndexError).
        try:
            return self.scalars.construct_object(node, deep=True)
        except yaml.MarkedYAMLError as err:  # its text ends with the quoted source line and a caret
            raise self.fail(node, err.problem or err.context or type(err).__name__) from None
        except Exception as err:
            raise self.fail(node, str(err).splitlines()[-1] if str(err) else type(err).__name__) from None


def read_yaml(path: str | Path) -> YamlDoc:
    """Parse ``path`` with the safe loader; malformed YAML names its line and column."""
    file = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{file}: no such file") from None
    except (OSError, UnicodeDecodeError) as err:
        raise ConfigError(f"{file}: cannot read: {err}") from None
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        where = f"{file}:{mark.line + 1}:{mark.column + 1}" if mark else file
        raise ConfigError(f"{where}: invalid YAML: {err.problem or err.context}") from None
    except yaml.YAMLError as err:
        raise ConfigError(f"{file}: invalid YAML: {err}") from None
    except RecursionError:
        raise ConfigError(f"{file}: invalid YAML: nested too deeply") from None
    if node is None:
        return YamlDoc(file, None, {(): 1})
    builder = _Builder(file)
    try:
        data = builder.build(node, ())
    except RecursionError:
        raise ConfigError(f"{file}: invalid YAML: nested too deeply") from None
    return YamlDoc(file, data, {(): node.start_mark.line + 1, **builder.lines})


# ---------------------------------------------------------------- typed fields


class Section:
    """One mapping of a document: checks its keys, then reads typed fields with defaults."""

    def __init__(
        self, doc: YamlDoc, path: FieldPath, value: Any, fields: Sequence[str], required: Sequence[str] = ()
    ) -> None:
        self.doc, self.path, self.value = doc, path, value
        if not isinstance(value, dict):
            raise doc.error(
                path, f"expected a mapping with the fields {', '.join(fields)}, got {describe_value(value)}"
            )
        for key in value:
            if key not in fields:
                raise doc.error((*path, key), f"unknown field{suggest(key, fields)}")
        for key in required:
            if key not in value:
                raise doc.error(path, f"missing required field {key!r}")

    def error(self, key: str | int, message: str, value: Any, hint: str = "") -> ConfigError:
        return self.doc.error((*self.path, key), f"{message}, got {describe_value(value)}{hint}")

    def get(self, key: str, default: Any = None) -> Any:
        return self.value.get(key, default)

    def integer(self, key: str, default: Any = None, minimum: int = 1, maximum: int | None = None) -> Any:
        value = self.value.get(key, default)
        ok = isinstance(value, int) and not isinstance(value, bool) and value >= minimum
        if not ok or (maximum is not None and value > maximum):
            top = f" and < {maximum + 1}" if maximum is not None else ""
            raise self.error(key, f"expected an integer >= {minimum}{top}", value)
        return value

    def number(self, key: str, default: float, lo: float, hi: float = math.inf) -> float:
        value = self.value.get(key, default)
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and abs(value) < 1e300
        if not ok or not lo <= value <= hi:
            span = f"from {lo:g} to {hi:g}" if math.isfinite(hi) else f">= {lo:g}"
            raise self.error(key, f"expected a number {span}", value)
        return float(value)

    def boolean(self, key: str, default: bool) -> bool:
        value = self.value.get(key, default)
        if not isinstance(value, bool):
            raise self.error(key, "expected true or false", value)
        return value

    def text(self, key: str, default: Any = None, optional: bool = False) -> Any:
        value = self.value.get(key, default)
        if optional and value is None:
            return None
        if not isinstance(value, str) or not value.strip() or "\x00" in value:
            raise self.error(key, "expected a non-empty string", value)
        return value

    def choice(self, key: str, options: Sequence[str], default: str) -> str:
        value = self.value.get(key, default)
        if value not in options or not isinstance(value, str):
            close = difflib.get_close_matches(str(value), list(options), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise self.error(key, f"expected one of {', '.join(map(repr, options))}", value, hint)
        return value

    def size(self, key: str, default: Any = None) -> int:
        try:
            return parse_size(self.value.get(key, default), "")
        except ConfigError as err:
            raise self.doc.error((*self.path, key), str(err).removeprefix(": ")) from None

    def duration(self, key: str, default: Any = None) -> float:
        try:
            return parse_duration(self.value.get(key, default))
        except ConfigError as err:
            raise self.doc.error((*self.path, key), str(err)) from None


_DURATION_RE = re.compile(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*(ms|s|m|h)?\s*", re.IGNORECASE)
_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}


def parse_duration(value: Any) -> float:
    """Seconds from ``30``, ``2.5``, ``"30s"``, ``"2m"``, ``"500ms"`` or ``"1h"``; ConfigError if not positive."""
    seconds = None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        seconds = float(value)
    elif isinstance(value, str) and (m := _DURATION_RE.fullmatch(value)):
        seconds = float(m.group(1)) * _SECONDS[m.group(2).lower() if m.group(2) else None]
    if seconds is None or not math.isfinite(seconds) or seconds <= 0:
        raise ConfigError(
            f"expected a positive duration such as 30, 30s, 2m or 500ms, got {describe_value(value)}"
        )
    return seconds
