"""Matrix products: ``matmul`` and the fully connected layer ``dense``."""

from __future__ import annotations

from ... import ir, te
from ._common import Activation, check_bias, check_ndim, read


def matmul(a: te.Tensor, b: te.Tensor, *, name: str = "matmul") -> te.Tensor:
    """a[M,K], b[K,N] -> out[M,N], ``out[i,j] = sum_k a[i,k] * b[k,j]``."""
    check_ndim("matmul", a, 2, "[M,K]")
    check_ndim("matmul", b, 2, "[K,N]")
    m, k = a.shape
    kb, n = b.shape
    if kb != k:
        raise ValueError(f"matmul: {a.name} has {k} columns, {b.name} has {kb} rows")
    rk = te.reduce_axis((0, k), name="k")
    return te.compute((m, n), lambda i, j: te.sum(a[i, rk] * b[rk, j], axis=rk), name=name)


def dense(
    data: te.Tensor,
    weight: te.Tensor,
    bias: te.Tensor | None = None,
    *,
    name: str = "dense",
    data_act: Activation | None = None,
    data_bias: te.Tensor | None = None,
) -> te.Tensor:
    """data[N,K], weight[O,K] (, bias[O]) -> out[N,O], ``out[i,o] = sum_k data[i,k] * weight[o,k] (+ bias[o])``.

    A reduction is the whole body of a stage, so the bias is a second stage ``<name>_bias``.
    """
    check_ndim("dense", data, 2, "[N,K]")
    check_ndim("dense", weight, 2, "[O,K]")
    batch, k = data.shape
    units, wk = weight.shape
    if wk != k:
        raise ValueError(f"dense: data has {k} features, weight {weight.name} expects {wk}")
    check_bias("dense", data, data_bias)
    rk = te.reduce_axis((0, k), name="k")

    def body(i: ir.Expr, o: ir.Expr) -> ir.Expr:
        return te.sum(read(data, (i, rk), data_bias, data_act) * weight[o, rk], axis=rk)

    out = te.compute((batch, units), body, name=name)
    if bias is None:
        return out
    if bias.shape != (units,):
        raise ValueError(f"dense: bias {bias.name} must have shape ({units},), got {bias.shape}")
    return te.compute((batch, units), lambda i, o: out[i, o] + bias[o], name=f"{name}_bias")
