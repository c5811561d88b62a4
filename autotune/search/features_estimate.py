"""Estimates for :mod:`autotune.search.features`.

Over loop variables taken as uniform in their ranges: a loop's mean trip count (:func:`trip`), an
expression's mean (:func:`mean`), how often a guard holds (:func:`probability`), and the same with
a parallel loop's variable in the iterations that one core runs (:class:`Chunks`). The loads and
stores of a lowered program (:class:`Access`, in the loops around it, :class:`Loop`) and the bytes
that each cache level serves them (:func:`memory_levels`); the roofline estimate built on them is
:mod:`autotune.search.features_roofline`.

Which level serves an access: the first that holds its reuse distance, the bytes the nest touches
between two uses of one element. A loop carries reuse when it does not index the access, or when
it slides a window over it (:func:`slides`: ``a[y + r]``, the next ``y`` reads what ``r`` read).
An access that no loop reuses reads its buffer where repeated runs leave it: in the first level
that holds the whole buffer.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from math import prod

from .. import ir
from ..analysis import Interval, Linear, eval_interval, sum_form

__all__ = [
    "Access", "Chunks", "Loop", "mean", "memory_levels", "operands", "probability", "slides", "stride",
    "trip",
]  # fmt: skip


def trip(s: ir.For, bounds: dict[ir.Var, Interval]) -> tuple[float, bool]:
    """``(mean trip count, whether it is a constant)`` of loop ``s``."""
    value = ir.as_int(s.extent)
    if value is not None:
        return float(max(value, 0)), True
    return max(mean(s.extent, bounds), 0.0), False


def mean(e: ir.Expr, bounds: dict[ir.Var, Interval]) -> float:
    """The mean of an integer expression over uniform loop variables (an estimate)."""
    iv = eval_interval(e, bounds)
    if iv.is_point:
        return float(iv.lo)  # type: ignore[arg-type]
    if isinstance(e, ir.Select):
        p = probability(e.cond, bounds)
        return p * mean(e.true_value, bounds) + (1.0 - p) * mean(e.false_value, bounds)
    if isinstance(e, (ir.Add, ir.Sub)):
        a, b = mean(e.a, bounds), mean(e.b, bounds)
        return a + b if isinstance(e, ir.Add) else a - b
    if isinstance(e, ir.Mul) and ir.as_int(e.b) is not None:
        return mean(e.a, bounds) * ir.as_int(e.b)  # type: ignore[operator]
    if iv.lo is not None and iv.hi is not None:
        return (iv.lo + iv.hi) / 2.0
    return float(iv.lo if iv.lo is not None and iv.lo > 0 else 1)


def probability(cond: ir.Expr, bounds: dict[ir.Var, Interval]) -> float:
    """How often ``cond`` holds if every loop variable were uniform in its range (an estimate)."""
    if isinstance(cond, ir.And):
        return probability(cond.a, bounds) * probability(cond.b, bounds)
    if isinstance(cond, ir.Or):
        return min(1.0, probability(cond.a, bounds) + probability(cond.b, bounds))
    if isinstance(cond, ir.Not):
        return 1.0 - probability(cond.a, bounds)
    if not isinstance(cond, ir.CmpOp) or sum_form(cond.a) is None:
        return 1.0
    diff = eval_interval(ir.Sub(cond.a, cond.b), bounds)
    if diff.lo is None or diff.hi is None:
        return 0.5 if isinstance(cond, ir.EQ) else 1.0
    n = diff.hi - diff.lo + 1
    count = {
        ir.LT: -diff.lo,
        ir.LE: 1 - diff.lo,
        ir.GT: diff.hi,
        ir.GE: diff.hi + 1,
        ir.EQ: 1 if diff.lo <= 0 <= diff.hi else 0,
        ir.NE: n - (1 if diff.lo <= 0 <= diff.hi else 0),
    }.get(type(cond), n)
    return min(max(count / n, 0.0), 1.0)


class Chunks:
    """The iterations of a parallel loop that one core runs, and what the code below it executes
    there. Numba gives each of the ``cores`` threads a contiguous chunk of the loop's iterations;
    the chunks here are the first ``ceil(trip / cores)`` and the rest of the last one. A guard or a
    trip count below that depends on the loop's variable (a split of the rows into as many parts as
    cores whose last part is a shorter tail) makes the chunks unequal, and the busiest core sets
    the loop's time. One instance follows one loop nest's walk: :meth:`enter` at its outermost
    parallel loop, :meth:`loop` at every loop below it and :meth:`probabilities` at every guard;
    the executions per chunk travel down the walk as a tuple (``busy``), as the probability does."""

    def __init__(self) -> None:
        self.bounds: list[dict[ir.Var, Interval]] = []

    def enter(
        self, s: ir.For, bounds: dict[ir.Var, Interval], cores: int, outer: float
    ) -> tuple[float, ...]:
        """The executions of ``s``'s body per chunk (``outer``: of ``s`` itself per run), or ``()``
        when its trip is not a known count of at least one iteration."""
        count, lo = ir.as_int(s.extent), eval_interval(s.min, bounds).lo
        if count is None or count < 1 or lo is None:
            return ()
        first = math.ceil(count / max(cores, 1))
        last = count - (math.ceil(count / first) - 1) * first
        self.bounds = [
            {**bounds, s.loop_var: Interval(lo, lo + first - 1)},
            {**bounds, s.loop_var: Interval(lo + count - last, lo + count - 1)},
        ]
        return (outer * first, outer * last)

    def loop(self, s: ir.For, busy: tuple[float, ...]) -> tuple[float, ...]:
        """``busy`` times the trip of ``s`` in each chunk, whose bounds now hold its variable."""
        out = []
        for bounds, b in zip(self.bounds, busy):
            count, _ = trip(s, bounds)
            lo = eval_interval(s.min, bounds).lo
            hi = eval_interval(ir.Add(s.min, s.extent), bounds).hi
            bounds[s.loop_var] = Interval(lo, None if hi is None else hi - 1)
            out.append(b * count)
        return tuple(out)

    def probabilities(self, cond: ir.Expr, busy: tuple[float, ...]) -> tuple[float, ...]:
        """How often ``cond`` holds in each chunk (nothing when ``busy`` is empty)."""
        return tuple(probability(cond, bounds) for bounds, _ in zip(self.bounds, busy))


@dataclass(frozen=True)
class Loop:
    var: ir.Var
    kind: str
    trip: float
    const: bool


@dataclass(frozen=True)
class Access:
    """One load or store, executed ``iters`` times, innermost loop last in ``loops``."""

    buffer: ir.Buffer
    indices: tuple[ir.Expr, ...]
    loops: tuple[Loop, ...]
    iters: float
    store: bool
    guarded: bool  # a guard sits between the innermost loop and the access
    index_vars: frozenset[ir.Var]
    has_mod: bool  # an index holds ``%`` (a rolling or double buffer)
    register: bool = False  # the buffer is a register tile (``local`` scope)


def operands(e: ir.Expr) -> tuple[ir.Expr, ...]:
    """The operands of an expression: those of an operation, a select, a call or a cast, and a load's
    indices."""
    if isinstance(e, ir.BinaryOp):
        return (e.a, e.b)
    if isinstance(e, ir.Select):
        return (e.cond, e.true_value, e.false_value)
    if isinstance(e, ir.Call):
        return e.args
    if isinstance(e, ir.Cast):
        return (e.value,)
    if isinstance(e, ir.Not):
        return (e.a,)
    if isinstance(e, ir.BufferLoad):
        return e.indices
    return ()


def stride(a: Access, var: ir.Var) -> int | None:
    """How far one step of ``var`` moves ``a`` in its last index (0: not at all); None when ``var``
    takes part in another index or in a term that is not affine (a gather)."""
    if var not in a.index_vars:
        return 0
    if any(var in _vars(e) for e in a.indices[:-1]):
        return None
    form = sum_form(a.indices[-1])
    if form is None or any(t is not var and var in _vars(t) for t in form.terms):
        return None
    return form.coeff(var)


def _vars(e: ir.Expr) -> set[ir.Var]:
    return set(ir.collect(e, ir.Var))


@lru_cache(maxsize=4096)  # a nest asks it of each index for each loop around it
def _window_form(e: ir.Expr, var: ir.Var) -> Linear | None:
    """The affine sum in which ``var`` moves index ``e``: ``e``'s own, or that of the numerator of a
    ``% m`` or ``// m`` term of it (a rolling buffer's row); None when ``var`` is not found there."""
    form = sum_form(e)
    if form is None or form.coeff(var):
        return form
    inner = (t.a for t in form.terms if isinstance(t, (ir.FloorMod, ir.FloorDiv)) and var in _vars(t.a))
    numerator = next(inner, None)
    return None if numerator is None else _window_form(numerator, var)


def slides(a: Access, i: int) -> bool:
    """Whether a step of loop ``i``, which indexes ``a``, moves it by a whole number of steps of the
    loops inside ``i`` that move it along the same sum, and no further than they reach together
    (``a[y + r]`` with ``r`` inside ``y``: a window that slides): the next step of ``i`` reads
    again some of what this one read."""
    var = a.loops[i].var
    for index in a.indices:
        form = _window_form(index, var)
        if form is None or not form.coeff(var):
            continue
        step = abs(form.coeff(var))
        reach: dict[int, float] = {}
        for lp in a.loops[i + 1 :]:
            k = abs(form.coeff(lp.var))
            if k:
                reach[k] = reach.get(k, 0.0) + max(lp.trip - 1.0, 0.0)
        return any(step % k == 0 and step // k <= r for k, r in reach.items())
    return False


def _reuse_distance(a: Access, nest: Sequence[Access], registers: bool) -> float | None:
    """Bytes touched by one iteration of the innermost loop around ``a`` that does not index it or
    slides a window over it (:func:`slides`; None: no loop reuses it). A loop nest's accesses under
    that loop each touch the product of the trips of their deeper loops that index them, and a
    buffer's accesses together at most its size: a rolling buffer's rows indexed modulo its extent,
    or overlapping windows, touch the same bytes again (without that bound, a rolling buffer of three
    rows reused along the whole image counted as megabytes apart). ``registers``: unrolled loops
    reuse in registers, not in a cache, and register tiles touch no cache."""
    carrier = next(
        (
            i
            for i in range(len(a.loops) - 1, -1, -1)
            if (a.loops[i].var not in a.index_vars or slides(a, i))
            and not (registers and a.loops[i].kind == ir.ForKind.UNROLLED)
        ),
        None,
    )
    if carrier is None:
        return None
    var = a.loops[carrier].var
    touched: dict[ir.Var, float] = {}
    size: dict[ir.Var, float] = {}
    for b in nest:
        if len(b.loops) > carrier and b.loops[carrier].var is var and not (registers and b.register):
            inner = b.loops[carrier + 1 :]
            data = b.buffer.data
            touched[data] = touched.get(data, 0.0) + prod(
                lp.trip for lp in inner if lp.var in b.index_vars
            ) * ir.dtype_bytes(b.buffer.dtype)
            size[data] = _buffer_bytes(b.buffer)
    return sum(min(t, size[data]) for data, t in touched.items())


def _buffer_bytes(buf: ir.Buffer) -> float:
    """The bytes of ``buf`` (infinite when a dimension is not a constant)."""
    try:
        return float(prod(buf.const_shape()) * ir.dtype_bytes(buf.dtype))
    except ValueError:
        return math.inf


def memory_levels(
    acc: Sequence[Access], caches: tuple[int, int, int], registers: bool = False
) -> tuple[list[float], float]:
    """Bytes served by L1, L2, L3 and memory, and the mean log2 reuse distance (weighted by bytes);
    an access without reuse is served by the first level that holds its whole buffer. ``registers``:
    register tiles are left out, and an access repeated by unrolled loops that do not index it is
    loaded once (its copies share a register)."""
    nests: dict[int, list[Access]] = {}
    for a in acc:
        nests.setdefault(id(a.loops[0].var) if a.loops else 0, []).append(a)
    levels = [0.0, 0.0, 0.0, 0.0]
    log_dist = weight = 0.0
    for a in acc:
        if registers and a.register:
            continue
        nbytes = a.iters * ir.dtype_bytes(a.buffer.dtype)
        if registers:
            nbytes /= prod(
                lp.trip for lp in a.loops if lp.kind == ir.ForKind.UNROLLED and lp.var not in a.index_vars
            )
        dist = _reuse_distance(a, nests[id(a.loops[0].var) if a.loops else 0], registers)
        held = _buffer_bytes(a.buffer) if dist is None else dist  # no reuse here: where the data sits
        level = next((i for i, c in enumerate(caches) if held <= c), 3)
        levels[level] += nbytes
        if dist is not None:
            log_dist += nbytes * math.log2(1.0 + max(dist, 0.0))
            weight += nbytes
    return levels, log_dist / weight if weight else 0.0
