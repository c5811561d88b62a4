"""The workload a config names: the ``workload`` section checked into a :class:`WorkloadConfig`
(a registry name, a ``file.py:function`` path or an ONNX model cut), and the
:class:`~autotune.workloads.Workload` built from one.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..measure.task import load_workload_file
from ..workloads import Workload, describe, names
from ..workloads import get as get_workload
from ..workloads.onnx_import import OnnxImportError
from ..workloads.onnx_import import build as build_onnx
from ..workloads.onnx_import import workload_spec as onnx_workload_spec
from .paths import is_file, resolve_path
from .records import WorkloadConfig
from .yamldoc import Section, YamlDoc, describe_value

ONNX_FIELDS = ("onnx", "from", "to", "batch")


# ---------------------------------------------------------------- the workload section


def read_workload(doc: YamlDoc, raw: Any, base: Path) -> WorkloadConfig:
    """The ``workload`` section of ``doc`` (``raw``), its paths relative to ``base``."""
    where = ("workload",)
    sec = Section(doc, where, raw, ("name", "path", "args", *ONNX_FIELDS))
    if "onnx" in raw:
        if "name" in raw or "path" in raw:
            raise doc.error(where, "expected 'onnx' (a model file) without 'name' or 'path'")
        return _onnx_workload(doc, sec, base)
    if ("name" in raw) == ("path" in raw):
        raise doc.error(
            where, "expected exactly one of 'name' (a built-in workload) or 'path' ('file.py:function')"
        )
    for key in ONNX_FIELDS[1:]:
        if key in raw:
            raise doc.error((*where, key), "only a workload with 'onnx' takes this field")
    args_raw = sec.get("args") or {}
    if not isinstance(args_raw, dict):
        raise sec.error("args", "expected a mapping of parameter names to values", args_raw)
    for key, value in args_raw.items():
        if not isinstance(key, str) or not key.isidentifier():
            raise doc.error((*where, "args", key), f"expected a parameter name, got {describe_value(key)}")
        if not isinstance(value, (int, float, str, bool)):
            raise doc.error(
                (*where, "args", key), f"expected a number, string or boolean, got {describe_value(value)}"
            )
    args = tuple(args_raw.items())
    if "name" in raw:
        name = sec.text("name")
        if name not in names():
            try:
                describe(name)  # the registry's message suggests the closest name
            except ConfigError as err:
                raise doc.error((*where, "name"), str(err)) from None
        try:
            get_workload(name, **args_raw)
        except ConfigError as err:
            raise doc.error((*where, "args"), str(err)) from None
        return WorkloadConfig(name, None, args)
    spec = sec.text("path")
    file, sep, function = spec.rpartition(":")
    if not sep or not file or not function.isidentifier():
        raise sec.error("path", "expected 'path/to/file.py:function'", spec)
    resolved = resolve_path(base, file)
    if not is_file(resolved):
        raise doc.error((*where, "path"), f"workload file {str(resolved)!r} does not exist (from {spec!r})")
    return WorkloadConfig(None, f"{resolved}:{function}", args)


def _onnx_workload(doc: YamlDoc, sec: Section, base: Path) -> WorkloadConfig:
    """``{onnx: model.onnx, from: A, to: B, batch: 1}``: the model relative to the config file, cut
    and converted now, so that a model the chain cannot be made from stops the run before anything
    is written (the error names the field)."""
    if "args" in sec.value:
        raise sec.error("args", "an onnx workload takes from, to and batch, not args", sec.get("args"))
    text = sec.text("onnx")
    model = resolve_path(base, text)
    if not is_file(model):
        raise doc.error(("workload", "onnx"), f"model file {str(model)!r} does not exist (from {text!r})")
    start = sec.text("from", None, optional=True)
    end = sec.text("to", None, optional=True)
    batch = None if sec.get("batch") is None else sec.integer("batch")
    try:
        spec, args = onnx_workload_spec(model, start, end, batch)
        build_onnx(model, start, end, batch)
    except OnnxImportError as err:
        raise doc.error(("workload", err.field), str(err)) from None
    return WorkloadConfig(None, spec, args)


# ---------------------------------------------------------------- building the workload


def load_workload(cfg: WorkloadConfig) -> Workload:
    """The registry workload, or the ``Workload`` that the named function of a file returns for ``args``.

    A file's function may return a :class:`~autotune.workloads.Chain` instead: it is then named
    after the function and its reference is checked against the outputs' shapes and dtypes
    (:func:`autotune.measure.task.load_workload_file`).
    """
    args = dict(cfg.args)
    if cfg.name is not None:
        return get_workload(cfg.name, **args)
    if cfg.path is None:
        raise ConfigError("workload: expected exactly one of 'name' or 'path'")
    return load_workload_file(cfg.path, args, check=True)


_FLAGS = {"onnx": "", "from": "--from: ", "to": "--to: ", "batch": "--param batch: "}


def load_onnx_workload(
    path: str | Path, start: str | None, end: str | None, params: Mapping[str, Any]
) -> Workload:
    """The workload of ``autotune check|show MODEL.onnx --from A --to B [--param batch=N]`` (the file
    relative to the current directory). Raises ConfigError naming the file and the option."""
    where = f"workload {path}"
    for key, value in params.items():
        if key != "batch":
            raise ConfigError(f"{where}: --param {key}: an ONNX model takes only batch")
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigError(f"{where}: --param batch: expected a positive integer, got {value!r}")
    batch = params.get("batch")
    try:
        return build_onnx(path, start, end, None if batch is None else int(batch))
    except OnnxImportError as err:
        raise ConfigError(f"{where}: {_FLAGS.get(err.field, '')}{err}") from None
