"""Chains taken from ONNX models: the sub-graph between two tensors, converted to the operator library.

:func:`build` cuts the model (:mod:`.graph`), converts every node (:mod:`.convert`, whose
``SUPPORTED`` lists the operators) and returns a :class:`~autotune.workloads.Workload` whose
reference is the model itself (:mod:`.workload`). A run names the cut by :func:`workload_spec`: a
``file.py:function`` workload (``autotune/workloads/onnx_model.py:onnx_workload``) with the model's
path, the cut, the batch, the layout and the file's hash as arguments, so its workers, its records
and ``best.json`` treat it like any chain file.

The ``onnx`` package is an optional dependency (``pip install 'autotune[onnx]'``): this package
imports it only when a model is converted.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..registry import Workload
from .errors import OnnxImportError

__all__ = ["OnnxImportError", "build", "onnx_workload", "workload_spec"]

ENTRY = Path(__file__).resolve().parent.parent / "onnx_model.py"
"""The file whose ``onnx_workload`` a run's workers call."""
ARGS = ("onnx", "from", "to", "batch", "layout", "sha256")

_BUILT: dict[tuple[Any, ...], Workload] = {}
"""(file, size, mtime, from, to, batch) -> the workload built in this process."""


def _workload_module() -> Any:
    try:
        from . import workload
    except ImportError as err:
        if err.name not in ("onnx", "onnx.reference") and not str(err.name).startswith("onnx."):
            raise
        raise OnnxImportError(
            "onnx", "the onnx package is not installed: pip install 'autotune[onnx]' (or onnx>=1.16)"
        ) from None
    return workload


def build(
    path: str | Path, start: str | None = None, end: str | None = None, batch: int | None = None
) -> Workload:
    """The chain from tensor or node ``start`` to ``end`` of the model at ``path`` (the model's only
    input and output when None), with a dynamic batch set to ``batch`` (1 when None).

    Its inputs are ``data`` (the cut's input, NHWC) and the model's weights; ``make_inputs`` gives
    seeded data and the weights. Before it is returned the chain is evaluated with the numpy
    references and compared with the model. Raises :class:`OnnxImportError` (a ConfigError whose
    ``field`` is ``onnx``, ``from``, ``to`` or ``batch``) for a file that is not a model, a cut that
    is not one chain, or a node that cannot be converted (naming it, its op type and the supported
    list). Built once per process for a given file state and cut.
    """
    file = Path(path).expanduser().resolve()
    try:
        stat = file.stat()
    except OSError:
        raise OnnxImportError("onnx", f"no file {file}") from None
    key = (str(file), stat.st_size, stat.st_mtime_ns, start, end, batch)
    if key not in _BUILT:
        _BUILT[key] = _workload_module().build_workload(file, start, end, batch)
    return _BUILT[key]


def workload_spec(
    path: str | Path, start: str | None = None, end: str | None = None, batch: int | None = None
) -> tuple[str, tuple[tuple[str, Any], ...]]:
    """``("…/onnx_model.py:onnx_workload", args)``: how a run names this cut (see the module docstring)."""
    file = Path(path).expanduser().resolve()
    args = _workload_module().args_of(file, start, end, batch)
    return f"{ENTRY}:onnx_workload", tuple(args.items())


def onnx_workload(**args: Any) -> Workload:
    """The workload that :func:`workload_spec`'s arguments name; refuses a model file whose hash is
    not the recorded one (the file changed since the run began)."""
    unknown = sorted(set(args) - set(ARGS))
    if unknown or "onnx" not in args:
        raise OnnxImportError(
            "onnx", f"arguments {sorted(args)}: expected onnx and any of {', '.join(ARGS[1:])}"
        )
    if args.get("layout", "nhwc") != "nhwc":
        raise OnnxImportError("onnx", f"layout {args['layout']!r}: only nhwc is supported")
    file = Path(args["onnx"])
    workload = build(file, args.get("from"), args.get("to"), args.get("batch"))
    digest = args.get("sha256")
    if digest is not None and _workload_module().file_sha256(file) != digest:
        raise OnnxImportError("onnx", f"{file} has changed since its sha256 {digest} was recorded")
    return workload
