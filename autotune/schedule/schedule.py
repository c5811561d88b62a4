"""``Schedule``: an immutable function plus the trace of primitives that made it.

Every method applies one pure primitive (``autotune.schedule.primitives``) and
returns a new ``Schedule`` whose trace has one more step; the names a primitive
creates (new loops, new blocks) are in ``.last``::

    sch = Schedule(func)
    sch = sch.split("h_1", [None, 4]); ho, hi = sch.last
    sch = sch.compute_at("B", ho).rolling_buffer("B", 0)

Replaying the trace on the original function rebuilds the same IR. A step that
leaves a ``local`` buffer holding more elements at its site than the registers
(``REGISTER_LIMIT``) is refused by that step, whichever primitive it is (a
``transform_layout`` that pads it, an ``annotate_buffer_access`` that widens a read
of it, an ``unroll`` that turns a buffer kept in memory into registers...), so the
code generator never meets one. A primitive that follows producers and
consumers by buffer (``ALIAS_BLIND``) refuses a block that accesses storage another
buffer views (a ``DeclBuffer`` alias): it would not see the accesses through the view.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .. import ir
from ..errors import ScheduleError
from . import trace as tr
from .args import check_args
from .exprjson import callable_to_json
from .primitives import PRIMITIVES
from .primitives.memory import register_overflows
from .tree import block_names, block_path, get_block, loop_path, loops_above

_EXTEND = threading.Lock()
"""Held while a :class:`_Decisions` is extended in place (schedules may be shared between threads)."""


class _Decisions:
    """The decisions (name, value) taken along a chain of schedules, stored once for the chain.

    A schedule sees the first ``count`` entries. A decision taken by the schedule that sees them
    all is appended in place (the usual straight chain: nothing is copied, each decision is
    stored once); one taken by a schedule that branches off an earlier point copies its prefix."""

    __slots__ = ("entries", "position")

    def __init__(self, entries: Sequence[tuple[str, Any]] = ()) -> None:
        self.entries: list[tuple[str, Any]] = list(entries)
        self.position: dict[str, int] = {}  # a name's first entry
        for i, (name, _) in enumerate(self.entries):
            self.position.setdefault(name, i)

    def has(self, name: str, count: int) -> bool:
        """Whether ``name`` is among the first ``count`` decisions."""
        at = self.position.get(name)
        return at is not None and at < count

    def extended(self, count: int, name: str, value: Any) -> _Decisions:
        """The store of the first ``count`` decisions followed by ``name``: this one when nothing
        follows them yet, else a copy of that prefix."""
        with _EXTEND:
            if len(self.entries) == count:
                self.entries.append((name, value))
                self.position.setdefault(name, count)
                return self
        return _Decisions([*self.entries[:count], (name, value)])


_APPLIED: dict[Any, tuple[ir.Func, ir.Func, tuple[str, ...]]] = {}
"""The results of the :data:`_APPLIED_LIMIT` primitive applications used last: ``(input, output,
outputs)`` keyed on the primitive, ``id(input)`` and the arguments (:func:`_args_key`).

Safe because a primitive is a pure function of an immutable function and its arguments, and
each entry holds its input, so the id cannot be reused by another object while the entry is
there. Candidates of a search that take the same first decisions apply the same first steps to
the one workload function, then to the same results of those, and find them here (what it saves
a tune: ``experiments/tune_wall.py --same-log``, ``results/tune_wall_bodies.md``). A failing
application (a :class:`ScheduleError`) is not kept: it fails again, the same way."""
_APPLIED_LIMIT = 512
_APPLIED_LOCK = threading.Lock()


def _args_key(value: Any) -> Any:
    """``value`` (JSON-able arguments) as a hashable key that tells apart types that compare equal
    (``1``, ``1.0``, ``True``; a list and a tuple)."""
    if isinstance(value, dict):
        return (dict, tuple((k, _args_key(v)) for k, v in sorted(value.items())))
    if isinstance(value, (list, tuple)):
        return (type(value), tuple(_args_key(v) for v in value))
    hash(value)
    return (type(value), value)


def _applied(fn: Callable[..., Any], func: ir.Func, kwargs: dict[str, Any]) -> tuple[ir.Func, tuple[str, ...]]:
    """``fn(func, **kwargs)``: the primitive's new function and output names, kept in :data:`_APPLIED`."""
    try:
        key: Any = (fn, id(func), _args_key(kwargs))
    except TypeError:  # an unhashable argument: not kept
        key = None
    hit = _APPLIED.get(key) if key is not None else None
    if hit is not None and hit[0] is func:
        with _APPLIED_LOCK:  # the most recently used last
            _APPLIED[key] = _APPLIED.pop(key, hit)
        return hit[1], hit[2]
    out, outputs = fn(func, **kwargs)
    if key is not None:
        with _APPLIED_LOCK:
            if len(_APPLIED) >= _APPLIED_LIMIT:
                del _APPLIED[next(iter(_APPLIED))]
            _APPLIED[key] = (func, out, tuple(outputs))
    return out, outputs


@dataclass(frozen=True)
class Schedule:
    func: ir.Func
    original: ir.Func | None = None
    trace: tuple[tr.Step, ...] = ()
    last: tuple[str, ...] = field(default=(), compare=False)
    _decisions: _Decisions | None = field(default=None, compare=False, repr=False)
    """The trace's ``sample`` decisions (the first ``_decided`` entries); read from ``trace`` when None."""
    _decided: int = field(default=0, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.original is None:
            object.__setattr__(self, "original", self.func)
        if self._decisions is None:
            taken = [s.kwargs() for s in self.trace if s.op == "sample"]
            object.__setattr__(self, "_decisions", _Decisions([(k["name"], k["decision"]) for k in taken]))
            object.__setattr__(self, "_decided", len(taken))

    # ---- queries -----------------------------------------------------------
    def get_block(self, name: str) -> str:
        get_block(self.func, name, "get_block")
        return name

    def get_blocks(self) -> list[str]:
        return block_names(self.func)

    def get_loops(self, block: str) -> tuple[str, ...]:
        return tuple(f.loop_var.name for f in loops_above(block_path(self.func, block, "get_loops")))

    def get_loop(self, name: str) -> ir.For:
        return loop_path(self.func, name, "get_loop")[-1]  # type: ignore[return-value]

    def __str__(self) -> str:
        return str(self.func)

    def trace_json(self) -> str:
        return tr.dumps(self.trace)

    # ---- application -------------------------------------------------------
    def apply(self, op: str, /, **kwargs: Any) -> Schedule:
        """Apply primitive ``op`` with JSON-able arguments (what a trace step holds)."""
        fn = PRIMITIVES.get(op)
        if fn is None:
            raise ScheduleError(op, f"unknown primitive (known: {', '.join(sorted(PRIMITIVES))})")
        kwargs = {k: v for k, v in kwargs.items() if v is not None}
        check_args(op, fn, kwargs)
        _check_aliases(op, self.func, kwargs)
        func, outputs = _applied(fn, self.func, kwargs)
        if func is not self.func:  # an unchanged function (a ``sample`` step) has no new buffer
            _check_registers(op, self.func, func)
        step = tr.make_step(op, tuple(outputs), **kwargs)
        decisions, decided = self._decisions, self._decided
        if op == "sample":
            assert decisions is not None
            decisions, decided = decisions.extended(decided, kwargs["name"], kwargs["decision"]), decided + 1
        return Schedule(func, self.original, (*self.trace, step), tuple(outputs), decisions, decided)

    @classmethod
    def replay(cls, func: ir.Func, steps: Sequence[tr.Step] | str) -> Schedule:
        """Rebuild a schedule from a trace (steps, or the JSON text of one) on ``func``."""
        if isinstance(steps, str):
            steps = tr.loads(steps)
        sch = cls(func)
        for i, step in enumerate(steps):
            try:
                sch = sch.apply(step.op, **step.kwargs())
            except ScheduleError as e:
                raise ScheduleError(step.op, f"trace step {i} does not apply: {e.reason}") from None
            if step.outputs and sch.last != step.outputs:
                raise ScheduleError(step.op, f"trace step {i} produced {list(sch.last)}, the trace says {list(step.outputs)}")
        return sch

    # ---- decisions ---------------------------------------------------------
    def sample(self, name: str, kind: str, candidates: Sequence[Any], decision: Any) -> Schedule:
        """Record a decision of the search: ``name`` took ``decision`` among ``candidates`` (see
        :mod:`~autotune.schedule.primitives.sample`); the function is unchanged. A name is decided once."""
        assert self._decisions is not None
        if self._decisions.has(name, self._decided):
            raise ScheduleError("sample", f"decision {name!r} is already taken in this trace")
        return self.apply("sample", name=name, kind=kind, candidates=tuple(candidates), decision=decision)

    def decisions(self) -> dict[str, Any]:
        """The value of every decision the trace records, by name, in the order taken."""
        assert self._decisions is not None
        return dict(self._decisions.entries[: self._decided])

    # ---- loops -------------------------------------------------------------
    def split(self, loop: str, factors: Sequence[int | None], names: Sequence[str] | None = None) -> Schedule:
        return self.apply("split", loop=loop, factors=tuple(factors), names=tuple(names) if names else None)

    def reorder(self, *loops: str) -> Schedule:
        return self.apply("reorder", loops=tuple(loops))

    def fuse(self, *loops: str, name: str | None = None) -> Schedule:
        return self.apply("fuse", loops=tuple(loops), name=name)

    def parallel(self, loop: str, copy_pad: int | None = None) -> Schedule:
        """``copy_pad``: bytes left untouched after each thread's private copy of a buffer computed under ``loop``."""
        return self.apply("parallel", loop=loop, copy_pad=copy_pad)

    def vectorize(self, loop: str) -> Schedule:
        return self.apply("vectorize", loop=loop)

    def unroll(self, loop: str) -> Schedule:
        return self.apply("unroll", loop=loop)

    # ---- compute location --------------------------------------------------
    def compute_at(self, block: str, loop: str) -> Schedule:
        return self.apply("compute_at", block=block, loop=loop)

    def reverse_compute_at(self, block: str, loop: str) -> Schedule:
        return self.apply("reverse_compute_at", block=block, loop=loop)

    def compute_inline(self, block: str) -> Schedule:
        return self.apply("compute_inline", block=block)

    def reverse_compute_inline(self, block: str) -> Schedule:
        return self.apply("reverse_compute_inline", block=block)

    def decompose_reduction(self, block: str, loop: str) -> Schedule:
        """The init of reduction ``block`` as a block of its own before ``loop`` (``.last``: its name)."""
        return self.apply("decompose_reduction", block=block, loop=loop)

    # ---- caches and buffers ------------------------------------------------
    def cache_read(self, block: str, buffer_index: int, scope: str = "global") -> Schedule:
        return self.apply("cache_read", block=block, buffer_index=buffer_index, scope=scope)

    def cache_write(self, block: str, buffer_index: int, scope: str = "global") -> Schedule:
        return self.apply("cache_write", block=block, buffer_index=buffer_index, scope=scope)

    def hoist_padding(self, block: str, buffer_index: int) -> Schedule:
        """``block``'s inline padding of ``block.reads[buffer_index]`` as a padded copy made first
        (``.last``: the copy's block and buffer name)."""
        return self.apply("hoist_padding", block=block, buffer_index=buffer_index)

    def annotate_buffer_access(
        self, block: str, buffer_index: int, access: str, fn: Callable[..., Sequence[Any]] | Sequence[Any]
    ) -> Schedule:
        """``fn`` maps the block's iter vars to one entry per buffer dimension: a point or a (lo, hi) pair."""
        region = callable_to_json(fn, self._iter_vars(block, "annotate_buffer_access"), "annotate_buffer_access") if callable(fn) else fn
        return self.apply("annotate_buffer_access", block=block, buffer_index=buffer_index, access=access, region=region)

    def rolling_buffer(self, block: str, buffer_index: int = 0) -> Schedule:
        return self.apply("rolling_buffer", block=block, buffer_index=buffer_index)

    def double_buffer(self, block: str) -> Schedule:
        return self.apply("double_buffer", block=block)

    def transform_layout(
        self,
        block: str,
        buffer: str,
        index_map: Callable[..., Sequence[Any]] | Sequence[Any],
        padding: bool = True,
    ) -> Schedule:
        """``index_map`` maps the buffer's indices to new ones; ``AXIS_SEPARATOR`` in its result splits physical axes.
        ``padding=False`` refuses a map whose image is larger than the buffer (the trace records it only then)."""
        if callable(index_map):
            ndim = self._buffer(block, buffer, "transform_layout").ndim
            index_map = callable_to_json(index_map, [ir.Var(f"i{k}") for k in range(ndim)], "transform_layout")
        extra: dict[str, Any] = {} if padding else {"padding": False}
        return self.apply("transform_layout", block=block, buffer=buffer, index_map=index_map, **extra)

    def set_pools(self, block: str, buffer: str, pools: Sequence[str], per_bank: bool = False) -> Schedule:
        """``per_bank=True``: bank ``k`` of a buffer with axis separators in ``pools[k % len(pools)]`` only
        (recorded in the trace only then)."""
        return self.apply("set_pools", block=block, buffer=buffer, pools=tuple(pools), per_bank=per_bank or None)

    def set_scope(self, block: str, buffer: str, scope: str) -> Schedule:
        return self.apply("set_scope", block=block, buffer=buffer, scope=scope)

    def set_vectorizer(self, mode: str, loop: str | None = None) -> Schedule:
        """``loop`` (default) or ``slp``: how LLVM vectorises this kernel, or the nest of ``loop`` (see the primitive)."""
        return self.apply("set_vectorizer", mode=mode, loop=loop)

    # ---- helpers -----------------------------------------------------------
    def _iter_vars(self, block: str, primitive: str) -> list[ir.Var]:
        return [iv.var for iv in get_block(self.func, block, primitive).iter_vars]

    def _buffer(self, block: str, name: str, primitive: str) -> ir.Buffer:
        b = get_block(self.func, block, primitive)
        for region in (*b.reads, *b.writes):
            if region.buffer.name == name:
                return region.buffer
        for buf in b.alloc_buffers:
            if buf.name == name:
                return buf
        raise ScheduleError(primitive, f"block '{block}' does not access a buffer named '{name}'")


ALIAS_BLIND = frozenset(
    {
        "compute_at", "reverse_compute_at", "compute_inline", "reverse_compute_inline", "decompose_reduction",
        "cache_read", "cache_write", "hoist_padding", "annotate_buffer_access", "rolling_buffer",
        "double_buffer", "transform_layout", "parallel",
    }
)  # fmt: skip
"""Primitives that find producers, consumers and regions by buffer, or change a buffer: they cannot
see that two buffers share storage (a ``DeclBuffer`` view, tvm-rfcs 0063)."""


def _check_aliases(op: str, func: ir.Func, kwargs: dict[str, Any]) -> None:
    """Refuse an alias-blind primitive on a block that accesses viewed storage (or, for ``parallel``,
    a loop around one): a view's accesses are not accesses of the buffer it views."""
    if op not in ALIAS_BLIND:
        return
    aliased = ir.aliased_buffers(func)
    if not aliased:
        return
    if "block" in kwargs:
        blocks = [get_block(func, kwargs["block"], op)]
    else:
        blocks = [b for b in ir.collect(loop_path(func, kwargs["loop"], op)[-1], ir.Block)]
    for b in blocks:
        for r in (*b.reads, *b.writes):
            group = aliased.get(r.buffer)
            if group is not None:
                others = ", ".join(f"'{o.name}'" for o in group if o is not r.buffer)
                raise ScheduleError(
                    op,
                    f"block '{b.name}' accesses '{r.buffer.name}', whose storage is also viewed as {others} "
                    f"(DeclBuffer): {op} follows producers and consumers by buffer and cannot see through a view",
                )


def _check_registers(op: str, before: ir.Func, after: ir.Func) -> None:
    """Refuse a step that leaves a ``local`` buffer larger than the registers (at its site) where it was not."""
    over = register_overflows(after)
    if not over:
        return
    known = register_overflows(before)
    for name, reason in over.items():
        if name not in known:
            raise ScheduleError(op, f"local buffer '{name}' lives in registers, one per element: {reason}")


def load_trace(path: str) -> tuple[tr.Step, ...]:
    """The steps of a trace file: a trace document, or a ``best.json`` holding one under ``trace``."""
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, UnicodeDecodeError) as e:
        raise ScheduleError("trace", f"{path}: cannot read ({e})") from None
    except json.JSONDecodeError as e:
        raise ScheduleError("trace", f"{path}: not valid JSON ({e.msg} at line {e.lineno})") from None
    except (RecursionError, ValueError) as e:
        raise ScheduleError("trace", f"{path}: not valid JSON ({tr.json_problem(e)})") from None
    return tr.parse(data.get("trace", data) if isinstance(data, dict) else data, path)
