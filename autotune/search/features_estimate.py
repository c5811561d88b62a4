"""Estimates for :mod:`autotune.search.features`.

Over loop variables taken as uniform in their ranges: a loop's mean trip count (:func:`trip`), an
expression's mean (:func:`mean`), how often a guard holds (:func:`probability`), and the same with
a parallel loop's variable in the iterations that one core runs (:class:`Chunks`). The loads and
stores of a lowered program (:class:`Access`, in the loops around it, :class:`Loop`) and the bytes
that each cache level serves them (:func:`memory_levels`); the roofline estimate built on them is
:mod:`autotune.search.features_roofline`.

Which level serves an access (:func:`memory_levels`): each loop around it reuses the elements that
more than one of its iterations touch (it does not index the access, slides a window over it -
``a[y + r]``, the next ``y`` reads what ``r`` read - or wraps it round a rolling buffer), at the
distance of the bytes that one iteration touches, and the caches serve those reuses by how much of
that distance they hold; the elements a run touches first come from the first level that holds the
whole buffer, where repeated runs leave it.
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
    "Access", "Chunks", "Loop", "mean", "memory_levels", "operands", "probability", "stride", "trip",
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


def _buffer_bytes(buf: ir.Buffer) -> float:
    """The bytes of ``buf`` (infinite when a dimension is not a constant)."""
    try:
        return float(prod(buf.const_shape()) * ir.dtype_bytes(buf.dtype))
    except ValueError:
        return math.inf


@lru_cache(maxsize=4096)  # the accesses of a nest share their indices; both memory walks ask
def _form(e: ir.Expr) -> Linear | None:
    return sum_form(e)


LINE_BYTES = 64
"""The bytes of a cache line: what a cache beyond the first moves for an access."""


class _Range:
    """The distinct values of an integer sum as its loops are added, innermost first: a step that is a
    multiple of a range's unit and lands within it or next to it extends that range (``x*64 + rw*64``
    over 3 and 3 steps: 5 values; ``c + x*64`` over 64 and 3: 192), another starts a range of its
    own, which multiplies. A ``% m`` term (a rolling buffer's row) is a range over its numerator with
    at most ``m`` values; a ``// d`` term one over its numerator with at most its count over ``d``,
    plus one; another term that is not affine takes every combination of its loops' steps."""

    def __init__(self, e: ir.Expr) -> None:
        form = _form(e)
        self.coeffs: dict[ir.Var, int] = {}
        self.ranges: list[list[float]] = []  # [unit, values]
        self.terms: list[tuple[_Range, int, bool]] = []  # a numerator's range, its divisor, whether %
        self.others: list[set[ir.Var]] = []  # the variables of a term that is neither
        self.combinations = 1.0
        if form is None:
            self.others.append(_vars(e))
            return
        for term, k in form.coeffs:
            if isinstance(term, ir.Var):
                self.coeffs[term] = self.coeffs.get(term, 0) + abs(k)
            elif isinstance(term, (ir.FloorMod, ir.FloorDiv)) and (ir.as_int(term.b) or 0) > 0:
                self.terms.append((_Range(term.a), ir.as_int(term.b) or 1, isinstance(term, ir.FloorMod)))
            else:
                self.others.append(_vars(term))

    def add(self, var: ir.Var, steps: float) -> None:
        if steps <= 1.0:
            return
        k = self.coeffs.get(var, 0)
        if k:
            unit = next((r for r in self.ranges if k % r[0] == 0 and k // r[0] <= r[1]), None)
            if unit is None:
                self.ranges.append([float(k), steps])
            else:
                unit[1] += (steps - 1.0) * (k // unit[0])
        for inner, _, _ in self.terms:
            inner.add(var, steps)
        self.combinations *= steps ** sum(var in names for names in self.others)

    def line_share(self, width: int) -> float:
        """Cache lines per value when the values are elements of ``width`` bytes: those of the range
        with the smallest unit share lines (64 contiguous floats, 4 lines), those of a unit of a
        line or more each take one, as does a lone value."""
        if not self.ranges:
            return 1.0
        unit, count = min(self.ranges)
        if unit * width >= LINE_BYTES or count <= 1.0:
            return 1.0
        return math.ceil(((count - 1.0) * unit + 1.0) * width / LINE_BYTES) / count

    def values(self) -> float:
        count = prod(r[1] for r in self.ranges) * self.combinations
        for inner, divisor, modulo in self.terms:
            n = inner.values()
            count *= min(n, divisor) if modulo else min(n, n / divisor + 1.0)
        return count


def _distinct(a: Access, lines: bool = False) -> list[float]:
    """Per loop level ``i`` of ``a`` (and one past the innermost: 1), the elements that one execution
    of its loops from ``i`` inward touches (:class:`_Range` per index, at most the buffer's), or with
    ``lines`` the cache lines they lie in (those of its last index, contiguous in memory, shared)."""
    ranges = [_Range(e) for e in a.indices]
    width = ir.dtype_bytes(a.buffer.dtype)
    most = _buffer_bytes(a.buffer) / (LINE_BYTES if lines else width)
    out = [1.0]
    for lp in reversed(a.loops):
        for r in ranges:
            r.add(lp.var, lp.trip)
        count = prod(r.values() for r in ranges)
        if lines and ranges:
            count *= ranges[-1].line_share(width)
        out.append(min(count, max(most, 1.0)))
    return out[::-1]


def _place(a: Access) -> tuple[int, tuple[ir.Expr, ...], int]:
    """An access's buffer, indices and innermost loop: a load and a store of one statement that
    share it touch one element."""
    return id(a.buffer.data), a.indices, id(a.loops[-1].var) if a.loops else 0


def memory_levels(
    acc: Sequence[Access], caches: tuple[int, int, int], registers: bool = False
) -> tuple[list[float], float]:
    """Bytes served by L1, L2, L3 and memory, and the mean log2 reuse distance (weighted by bytes).

    Per access and loop level ``i``, in cache lines (:data:`LINE_BYTES`): of the lines that one
    execution of loop ``i`` touches, those that more than one of its iterations touch
    (:func:`_distinct`: the trip times the lines of one iteration, less those of the whole loop) are
    reused at the distance of one iteration of ``i``, the bytes of the lines the nest's accesses
    under it touch in one iteration (per buffer at most its size): a cache of ``size`` bytes serves
    the share ``size / distance`` of them (all when it holds the distance; what is left goes to the
    next level, and memory serves the rest). The lines that one run touches first are served by the
    first level that holds the whole buffer (where repeated runs leave it), but the first cache for
    a store to the element its statement has just loaded. The first cache serves an access its
    element's bytes, the others a whole line. ``registers``: register tiles are left out, and reuse
    between the copies of an unrolled loop is in registers (copies that share a value share one)."""
    nests: dict[int, list[Access]] = {}
    for a in acc:
        nests.setdefault(id(a.loops[0].var) if a.loops else 0, []).append(a)
    distinct = {id(a): _distinct(a, lines=True) for a in acc if not (registers and a.register)}
    loaded = {_place(a) for a in acc if not a.store}
    footprints: dict[tuple[int, int], float] = {}

    def footprint(nest: list[Access], i: int, var: ir.Var) -> float:
        """The bytes of the lines that one iteration of loop ``i`` (of variable ``var``) touches."""
        touched: dict[ir.Var, float] = {}
        size: dict[ir.Var, float] = {}
        for b in nest:
            if len(b.loops) > i and b.loops[i].var is var and id(b) in distinct:
                data = b.buffer.data
                touched[data] = touched.get(data, 0.0) + distinct[id(b)][i + 1] * LINE_BYTES
                size[data] = _buffer_bytes(b.buffer)
        return sum(min(t, size[data]) for data, t in touched.items())

    levels = [0.0, 0.0, 0.0, 0.0]
    log_dist = weight = 0.0
    for a in acc:
        if id(a) not in distinct:
            continue
        width, u = ir.dtype_bytes(a.buffer.dtype), distinct[id(a)]
        served = [float(width), LINE_BYTES, LINE_BYTES, LINE_BYTES]  # bytes per access at each level
        key = id(a.loops[0].var) if a.loops else 0
        steps = prod(lp.trip for lp in a.loops)
        runs = a.iters / steps if steps else 0.0
        executions = runs  # of loop i's header, per run of the program
        for i, lp in enumerate(a.loops):
            reused = executions * max(lp.trip * u[i + 1] - u[i], 0.0)
            executions *= lp.trip
            if reused <= 0.0 or (registers and lp.kind == ir.ForKind.UNROLLED):
                continue
            if (i, id(lp.var)) not in footprints:
                footprints[i, id(lp.var)] = footprint(nests[key], i, lp.var)
            dist = footprints[i, id(lp.var)]
            held = 0.0  # the share of the reuses that a cache of each size still holds
            for c, size in enumerate(caches):
                share = min(1.0, size / dist) if dist > 0 else 1.0
                levels[c] += reused * (share - held) * served[c]
                held = share
            levels[3] += reused * (1.0 - held) * served[3]
            log_dist += reused * width * math.log2(1.0 + dist)
            weight += reused * width
        first = runs * u[0]  # an update's store: where its statement has just loaded, in L1
        held = _buffer_bytes(a.buffer) if not (a.store and _place(a) in loaded) else 0.0
        level = next((c for c, size in enumerate(caches) if held <= size), 3)
        levels[level] += first * served[level]
    return levels, log_dist / weight if weight else 0.0
