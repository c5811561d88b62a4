"""Flop counting conventions of the chains.

A multiply-add is 2 flops; a max, min, add or divide is 1; ``relu`` is 1 per
element and ``relu6`` 2 (counted once per element even where the activation
is fused into a consumer); index math, padding selects and nearest-neighbour
copies are free. Averages count one add per window element and one divide per
output.
"""

from __future__ import annotations

from math import prod

from .. import te


def numel(t: te.Tensor) -> int:
    """The number of elements of a tensor."""
    return prod(t.shape)


def macs(out: te.Tensor, per_output: int) -> int:
    """Flops of ``per_output`` multiply-adds for every element of ``out``."""
    return 2 * numel(out) * per_output


def window(out: te.Tensor, area: int) -> int:
    """Flops of a max/min pool: one comparison per window element per output."""
    return numel(out) * area


def average(out: te.Tensor, area: int) -> int:
    """Flops of an average over ``area`` elements: the adds and one divide per output."""
    return numel(out) * (area + 1)


def elementwise(t: te.Tensor, per_element: int = 1) -> int:
    """Flops of ``per_element`` operations on every element of ``t``."""
    return numel(t) * per_element


def bilinear(out: te.Tensor) -> int:
    """Flops of a bilinear resize: 4 multiplies and 3 adds per output (index math excluded)."""
    return numel(out) * 7
