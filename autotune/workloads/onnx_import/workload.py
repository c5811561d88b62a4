"""The Workload of an ONNX cut: the converted chain, the model's weights, the model as the reference.

The chain is NHWC inside and at its edges: its input ``data`` is the cut's input transposed from
NCHW to NHWC, and its output is the cut's output in the chain's layout (NHWC for a 4-D tensor).
The reference transposes the input to NCHW, runs the cut (onnxruntime when it is installed, else
``onnx.reference.ReferenceEvaluator``) and transposes the result back. A transpose moves values
without arithmetic, so the check of every trial compares the kernel with exactly what the model
computes. The layout change is recorded in the workload's arguments (``layout: nhwc``), which a run
keeps in ``best.json``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from ..arrays import aligned_array
from ..registry import Workload, intermediate_bytes
from .convert import SUPPORTED, Converted, convert
from .errors import OnnxImportError
from .graph import Cut, cut, fix_batch, load_model
from .values import to_onnx, to_physical

__all__ = ["SUPPORTED", "ModelWorkload", "build_workload", "runner"]

LAYOUT = "nhwc"
RTOL, ATOL = 1e-4, 1e-4
"""The check of the conversion: ``|chain - model| <= ATOL * max(1, max|model|) + RTOL * |model|``,
the float32 tolerance the measurement uses (``autotune.measure.check``)."""


@dataclass(frozen=True)
class ModelWorkload(Workload):
    """A workload whose inputs after ``data`` are the model's weights (``weights``, in order)."""

    weights: tuple[np.ndarray, ...] = ()

    def make_inputs(self, seed: int) -> tuple[np.ndarray, ...]:
        """Seeded uniform ``[-1, 1]`` data (as :meth:`Workload.make_inputs` draws it), then the weights."""
        rng = np.random.default_rng(seed)
        shape = self.func.inputs[0].const_shape()
        data = aligned_array(rng.uniform(-1.0, 1.0, size=shape).astype(np.float32))
        return (data, *(aligned_array(w) for w in self.weights))


def runner(model: onnx.ModelProto, start: str) -> tuple[Callable[[np.ndarray], np.ndarray], str]:
    """A function running ``model`` on its input ``start``, and the engine's name."""
    try:
        import onnxruntime
    except ImportError:
        from onnx.reference import ReferenceEvaluator

        evaluator = ReferenceEvaluator(model)

        def evaluate(x: np.ndarray) -> np.ndarray:
            outputs: list[Any] = evaluator.run(None, {start: x})  # type: ignore[assignment]
            return np.asarray(outputs[0])

        return evaluate, "onnx.reference"
    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return (lambda x: np.asarray(session.run(None, {start: x})[0])), f"onnxruntime {onnxruntime.__version__}"


def _reference(
    chain: Converted, run: Callable[[np.ndarray], np.ndarray]
) -> Callable[..., tuple[np.ndarray, ...]]:
    def reference(data: np.ndarray, *weights: np.ndarray) -> tuple[np.ndarray, ...]:
        for i, (given, own) in enumerate(zip(weights, chain.weights)):
            if not np.array_equal(given, own):
                name = chain.func.inputs[i + 1].name
                raise ValueError(
                    f"weight {name!r} is not the model's: the reference runs the model's own weights"
                )
        x = to_onnx(np.asarray(data, dtype=np.float32), chain.input_dims, chain.input_order)
        out = run(x).astype(np.float32)
        return (to_physical(out, chain.output.order, chain.output.tensor.shape),)

    return reference


def _check(chain: Converted, data: np.ndarray, run: Callable[[np.ndarray], np.ndarray], where: str) -> None:
    """Compare the chain's numpy evaluation with the model's output on the same input."""
    want = to_physical(run(data).astype(np.float32), chain.output.order, chain.output.tensor.shape)
    got = chain.output.array
    scale = max(1.0, float(np.abs(want).max(initial=0.0)))
    err = np.abs(got.astype(np.float64) - want)
    bad = err > ATOL * scale + RTOL * np.abs(want)
    if bad.any():
        raise OnnxImportError(
            "onnx",
            f"{where}: the converted chain differs from the model (max abs error {float(err.max()):.3g}, "
            f"{int(bad.sum())} of {bad.size} outputs out of tolerance)",
        )


def _describe(cut_: Cut, engine: str) -> str:
    kinds: dict[str, int] = {}
    for node in cut_.nodes:
        kinds[node.op_type] = kinds.get(node.op_type, 0) + 1
    ops = ", ".join(f"{n} {k}" for k, n in kinds.items())
    return f"ONNX cut {cut_.start!r} -> {cut_.end!r} ({ops}); NHWC; reference: {engine}"


def build_workload(path: Path, start: str | None, end: str | None, batch: int | None) -> ModelWorkload:
    """Cut, convert and check the model at ``path``; see :func:`autotune.workloads.onnx_import.build`."""
    model = fix_batch(load_model(path), batch)
    piece = cut(model, start, end)
    rng = np.random.default_rng(0)
    data = rng.uniform(-1.0, 1.0, size=piece.shapes[piece.start]).astype(np.float32)
    chain = convert(piece, data, _ident(path.stem))
    run, engine = runner(piece.submodel(), piece.start)
    _check(chain, data, run, f"{path.name} from {piece.start!r} to {piece.end!r}")
    return ModelWorkload(
        name=path.stem,
        params={"batch": piece.shapes[piece.start][0]},
        func=chain.func,
        reference=_reference(chain, run),
        description=_describe(piece, engine),
        flops=chain.flops,
        intermediate_bytes=intermediate_bytes(chain.func),
        input_scales=(1.0,) * len(chain.func.inputs),
        weights=chain.weights,
    )


def _ident(text: str) -> str:
    name = "".join(c if c.isalnum() else "_" for c in text).strip("_") or "model"
    return name if name[0].isalpha() else f"m_{name}"


def file_sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def args_of(path: Path, start: str | None, end: str | None, batch: int | None) -> dict[str, Any]:
    """The arguments that name a cut in a run's records (the file's hash pins the model)."""
    args: dict[str, Any] = {"onnx": str(path)}
    if start:
        args["from"] = start
    if end:
        args["to"] = end
    if batch is not None:
        args["batch"] = batch
    return {**args, "layout": LAYOUT, "sha256": file_sha256(path)}
