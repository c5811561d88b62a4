"""The schedule fuzzer: random primitive sequences on random chains, and the check of each.

:func:`draw_step` draws one primitive call with arguments biased toward what the IR makes
valid: loops of the block, producers of the block's reads, consumers of its writes,
dimensions of its buffers, the region the block really accesses. :func:`run_example`
draws up to eight steps and applies each to the schedule so far; a ``ScheduleError`` must
name the primitive that raised it, and the refused step is dropped (as a search drops a
candidate). The steps accepted must then replay from the trace to the same IR, lower (with
the verifier), generate a kernel, and compute the chain's numpy reference. Any other exception, or a wrong output, is a defect.

Running the kernel: numba compiles take about a second each, so most examples run the
generated kernel source as plain Python (:func:`run_source`: ``numba.njit`` is the
identity, ``numba.prange`` runs its iterations in reverse order so that one iteration
reading what another wrote shows up as a wrong result). ``compile_share`` of the
examples that reach the kernel are also compiled with numba and run.
"""

from __future__ import annotations

import re
import traceback
import warnings
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from fuzz_chains import Chooser, FuzzChain, draw_chain

from autotune import ir
from autotune.analysis.region import block_access_regions
from autotune.codegen import build, generate_source
from autotune.codegen.storage import allocate_storage
from autotune.errors import ScheduleError
from autotune.lowering import lower
from autotune.memory import Pool
from autotune.schedule import Schedule
from autotune.schedule.exprjson import expr_to_json
from autotune.schedule.primitives.compute_at import scope_root
from autotune.schedule.tree import block_path, get_block

POOLS = (Pool("workspace", 1 << 30), Pool("dtcm", 1 << 16), Pool("sram", 1 << 20))

WEIGHTS = {
    "split": 6, "reorder": 3, "fuse": 2, "parallel": 2, "vectorize": 2, "unroll": 3,
    "compute_at": 8, "reverse_compute_at": 3, "compute_inline": 3, "reverse_compute_inline": 1,
    "decompose_reduction": 2, "cache_read": 3, "cache_write": 2, "annotate_buffer_access": 2,
    "rolling_buffer": 4, "double_buffer": 2, "transform_layout": 3, "set_pools": 2, "set_scope": 3,
    "set_vectorizer": 1, "hoist_padding": 2,
}
"""How often each primitive is drawn (relative)."""


# ---- what the IR offers ---------------------------------------------------------------------------


class View:
    """Blocks, loops and buffers of one schedule, as the drawer needs them."""

    def __init__(self, sch: Schedule) -> None:
        self.sch = sch
        self.blocks = [b for b in sch.get_blocks() if b != "root"]
        self.node = {b: get_block(sch.func, b, "fuzz") for b in self.blocks}
        self.params = set(sch.func.params)
        self.writers: dict[ir.Buffer, list[str]] = {}
        self.readers: dict[ir.Buffer, list[str]] = {}
        for b in self.blocks:
            for r in self.node[b].writes:
                self.writers.setdefault(r.buffer, []).append(b)
            for r in self.node[b].reads:
                if r.buffer not in (w.buffer for w in self.node[b].writes):
                    self.readers.setdefault(r.buffer, []).append(b)

    def loops(self, block: str) -> tuple[str, ...]:
        return self.sch.get_loops(block)

    def extent(self, loop: str) -> int:
        return ir.as_int(self.sch.get_loop(loop).extent) or 1

    def producers(self) -> list[str]:
        return [b for b in self.blocks if any(r.buffer not in self.params and self.readers.get(r.buffer) for r in self.node[b].writes)]

    def computed_at(self) -> list[str]:
        """Blocks under a loop that is not their own (what compute_at makes)."""
        out = []
        for b in self.blocks:
            path = block_path(self.sch.func, b, "fuzz")
            if any(isinstance(s, ir.For) for s in path[: path.index(scope_root(path))]):
                out.append(b)
        return out

    def consumers_of(self, block: str) -> list[str]:
        return sorted({c for r in self.node[block].writes for c in self.readers.get(r.buffer, []) if c != block})

    def producers_of(self, block: str) -> list[str]:
        return sorted({p for r in self.node[block].reads for p in self.writers.get(r.buffer, []) if p != block})

    def intermediates(self, block: str) -> list[str]:
        b = self.node[block]
        names = [r.buffer.name for r in (*b.writes, *b.reads) if r.buffer not in self.params]
        return sorted(set(names)) + [a.name for a in b.alloc_buffers]


def _factors(ch: Chooser, n: int) -> list[int | None]:
    divisors = [d for d in range(2, n) if n % d == 0]
    f = ch.pick(divisors) if divisors and ch.int(0, 2) else ch.int(1, max(1, n))
    if ch.int(0, 5) == 0 and n >= 4:
        return [None, ch.int(1, 2), ch.int(1, 2)]
    return [None, f] if ch.int(0, 2) else [f, None]


def _region_json(ch: Chooser, blk: ir.Block, region: ir.BufferRegion) -> list[Any]:
    """The block's own region as an annotation, sometimes widened or shifted by one on a dimension.

    Not shifted when the block's index needs float math: such an annotation is trusted (a wrong one
    is the user's error, caught only by the reference check)."""
    variables = [iv.var for iv in blk.iter_vars]
    trusted = region.buffer.name in block_access_regions(replace(blk, annotations=()))[2]
    dim, how = ch.int(0, len(region.region) - 1), ch.pick(["exact", "exact", "wider"] + ([] if trusted else ["shifted"]))
    out: list[Any] = []
    for d, r in enumerate(region.region):
        lo, ext = r.min, ir.as_int(r.extent) or 1
        lo_j = expr_to_json(lo, variables, "fuzz")
        if d == dim and how == "wider":
            out.append(["range", ["-", lo_j, 1], ["+", lo_j, ext + 1]])
        elif d == dim and how == "shifted":
            out.append(["range", ["+", lo_j, 1], ["+", lo_j, ext + 1]])
        else:
            out.append(lo_j if ext == 1 else ["range", lo_j, ["+", lo_j, ext]])
    return out


def _index_map(ch: Chooser, ndim: int, shape: tuple[int, ...]) -> list[Any]:
    v = [["v", k] for k in range(ndim)]
    how = ch.pick(["permute", "separate", "split", "collide"])
    if how == "permute" and ndim > 1:
        i, j = ch.int(0, ndim - 1), ch.int(0, ndim - 1)
        v[i], v[j] = v[j], v[i]
        return v
    if how == "separate" and ndim > 1:
        k = ch.int(1, ndim - 1)
        return [*v[:k], "|", *v[k:]]
    d = ch.int(0, ndim - 1)
    f = ch.int(2, 3)
    if how == "collide":
        return [*v[:d], ["//", v[d], f], *v[d + 1 :]]
    sep = ["|"] if ch.int(0, 1) else []
    return [*v[:d], ["//", v[d], f], *sep, ["%", v[d], f], *v[d + 1 :]]


def draw_step(ch: Chooser, sch: Schedule) -> tuple[str, dict[str, Any]] | None:
    """One primitive and its arguments, or None when the drawn primitive has nothing to act on."""
    view = View(sch)
    ops = [op for op, w in WEIGHTS.items() for _ in range(w)]
    op = ch.pick(ops)
    block = ch.pick(view.blocks)
    loops = view.loops(block)
    if op in ("split", "parallel", "vectorize", "unroll"):
        if not loops:
            return None
        loop = ch.pick(loops) if op != "unroll" else loops[ch.int(max(0, len(loops) - 3), len(loops) - 1)]
        return (op, {"loop": loop, "factors": tuple(_factors(ch, view.extent(loop)))}) if op == "split" else (op, {"loop": loop})
    if op in ("reorder", "fuse"):
        if len(loops) < 2:
            return None
        i = ch.int(0, len(loops) - 2)
        if op == "fuse":
            return op, {"loops": tuple(loops[i : i + 2])}
        window = list(loops[i : i + ch.int(2, 3)])
        return op, {"loops": tuple(window[::-1] if len(window) == 2 or ch.int(0, 1) else [window[1], window[2], window[0]])}
    if op in ("compute_at", "reverse_compute_at"):
        producers = view.producers()
        if op == "compute_at" and producers:
            block = ch.pick(producers)
            others = view.consumers_of(block)
        else:
            others = view.producers_of(block)
        target = ch.pick(others) if others else ch.pick(view.blocks)
        target_loops = view.loops(target)
        return (op, {"block": block, "loop": ch.pick(target_loops)}) if target_loops else None
    if op in ("compute_inline", "rolling_buffer", "double_buffer"):
        producers = view.computed_at() if op != "compute_inline" else view.producers()
        if not producers and ch.int(0, 3):
            return None  # mostly draw something else than a refusal at the first check
        block = ch.pick(producers) if producers and ch.int(0, 4) else block
        return (op, {"block": block, "buffer_index": 0}) if op == "rolling_buffer" else (op, {"block": block})
    if op == "reverse_compute_inline":
        return op, {"block": block}
    if op == "hoist_padding":
        padded = [b for b in view.blocks if ir.collect(view.node[b].body, ir.Select)]
        if not padded and ch.int(0, 3):
            return None
        block = ch.pick(padded) if padded and ch.int(0, 4) else block
        reads = view.node[block].reads
        selected = {ld.buffer for sel in ir.collect(view.node[block].body, ir.Select) for ld in ir.collect(sel, ir.BufferLoad)}
        indices = [k for k, r in enumerate(reads) if r.buffer in selected] or list(range(len(reads)))
        return (op, {"block": block, "buffer_index": ch.pick(indices)}) if indices else None
    if op == "decompose_reduction":
        reductions = [b for b in view.blocks if view.node[b].init is not None]
        if not reductions:
            return None
        block = ch.pick(reductions)
        return op, {"block": block, "loop": ch.pick(view.loops(block))}
    if op in ("cache_read", "cache_write"):
        regions = view.node[block].reads if op == "cache_read" else view.node[block].writes
        if not regions:
            return None
        index = ch.int(0, len(regions) - 1)
        return op, {"block": block, "buffer_index": index, "scope": ch.pick(["global", "global", "local"])}
    if op == "annotate_buffer_access":
        access = ch.pick(["read", "write"])
        blk = view.node[block]
        regions = blk.reads if access == "read" else blk.writes
        if not regions:
            return None
        index = ch.int(0, len(regions) - 1)
        try:
            region = _region_json(ch, blk, regions[index])
        except ScheduleError:
            return None  # an index the JSON form cannot write (float math)
        return op, {"block": block, "buffer_index": index, "access": access, "region": tuple(region)}
    names = view.intermediates(block)
    if op == "set_vectorizer":
        mode = ch.pick(["loop", "slp"])
        return op, ({"mode": mode, "loop": ch.pick(loops)} if loops and ch.int(0, 1) else {"mode": mode})
    if op == "transform_layout" and ch.int(0, 3) == 0:  # a parameter: the primitive stages a copy of it
        names = sorted({r.buffer.name for r in (*view.node[block].writes, *view.node[block].reads) if r.buffer in view.params})
    if not names:
        return None
    name = ch.pick(names)
    if op == "transform_layout":
        buf = next(r.buffer for r in (*view.node[block].writes, *view.node[block].reads, *[ir.BufferRegion.full(a) for a in view.node[block].alloc_buffers]) if r.buffer.name == name)
        return op, {"block": block, "buffer": name, "index_map": tuple(_index_map(ch, buf.ndim, buf.const_shape()))}
    if op == "set_pools":
        pools = ch.pick([("dtcm",), ("sram",), ("dtcm", "sram"), ("sram", "dtcm")])
        return op, {"block": block, "buffer": name, "pools": pools, **({"per_bank": True} if ch.int(0, 2) == 0 else {})}
    return op, {"block": block, "buffer": name, "scope": ch.pick(["local", "local", "global"])}


# ---- running a kernel in Python -------------------------------------------------------------------


class _FakeNumba:
    """What a kernel module uses of numba, for running its source as plain Python."""

    @staticmethod
    def njit(*args: Any, **kwargs: Any) -> Any:
        if args and callable(args[0]):
            return args[0]
        return lambda fn: fn

    @staticmethod
    def prange(*args: int) -> list[int]:
        return list(range(*args))[::-1]


def run_source(lowered: Any, inputs: tuple[np.ndarray, ...], outputs: list[np.ndarray]) -> None:
    """Run the generated kernel of ``lowered`` as Python on its planned storage (see the module docstring)."""
    source = generate_source(lowered.func)
    text = source.text.replace("import numba\n", "")
    for name in ("select as _select", "nest as _nest"):
        text = text.replace(f"from autotune.codegen.runtime import {name}\n", "")
    namespace: dict[str, Any] = {
        "numba": _FakeNumba,
        "_select": lambda c, a, b: a if c else b,
        "_nest": lambda *args, **kwargs: lambda fn: fn,  # an outlined function runs as Python too
    }
    exec(compile(text, f"<kernel {source.name}>", "exec"), namespace)
    storage = allocate_storage(source.storage, lowered.plan)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        namespace[source.name](*inputs, *outputs, *storage.arrays)


# ---- one example -----------------------------------------------------------------------------------


@dataclass
class Outcome:
    chain: str
    steps: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    refusals: list[tuple[str, str]] = field(default_factory=list)
    ran: bool = False
    compiled: bool = False
    defect: str | None = None

    def trace(self) -> str:
        return "\n".join(f"  {op}({', '.join(f'{k}={v!r}' for k, v in kw.items())})" for op, kw in self.steps)

    def report(self) -> str:
        return f"{self.chain}\n{self.trace()}\n{self.defect}"


def reason_class(reason: str) -> str:
    """A refusal's reason with names and numbers blanked, so refusals of one kind count together."""
    text = re.sub(r"'[^']*'", "'_'", reason)
    text = re.sub(r"\b\w+\[", "_[", text)
    text = re.sub(r"\[[^\]]*\]", "[_]", text)
    return re.sub(r"-?\d+", "N", text)[:110]


def _compare(outputs: list[np.ndarray], chain: FuzzChain, how: str) -> str | None:
    for got, want in zip(outputs, chain.expected):
        ok = np.array_equal(got, want) if got.dtype.kind in "iu" else np.allclose(got, want, rtol=1e-4, atol=1e-4)
        if not ok:
            bad = int(np.sum(~np.isclose(got.astype(np.float64), want.astype(np.float64), rtol=1e-4, atol=1e-4)))
            return f"wrong output ({how}): {bad} of {got.size} elements differ\ngot {got.ravel()[:12]}\nwant {want.ravel()[:12]}"
    return None


def run_example(ch: Chooser, compile_kernel: bool | None = None, max_steps: int = 8) -> Outcome:
    """Draw a chain and a sequence, apply it, and check what was accepted (see the module docstring)."""
    chain = draw_chain(ch)
    out = Outcome(chain.description)
    sch = Schedule(chain.func)
    for _ in range(ch.int(1, max_steps)):
        step = draw_step(ch, sch)
        if step is None:
            continue
        op, kwargs = step
        out.steps.append(step)
        try:
            sch = sch.apply(op, **kwargs)
        except ScheduleError as e:
            out.refusals.append((e.primitive, reason_class(e.reason)))
            if e.primitive != op:
                out.defect = f"{op} raised a ScheduleError naming {e.primitive!r}: {e}"
                return out
            out.steps.pop()
        except Exception:
            out.defect = f"{op} raised {traceback.format_exc(limit=-3)}"
            return out
    if compile_kernel is None:
        compile_kernel = ch.int(0, 19) == 0
    out.defect = _check(chain, sch, out, compile_kernel)
    return out


def _check(chain: FuzzChain, sch: Schedule, out: Outcome, compile_kernel: bool) -> str | None:
    stage = "replay"
    try:
        if str(Schedule.replay(chain.func, sch.trace_json()).func) != str(sch.func):
            return "replaying the trace gives different IR"
        stage = "lower"
        lowered = lower(sch.func, pools=POOLS, verify=True)
        stage = "run as Python"
        outputs = [np.full(b.const_shape(), -99, b.dtype) for b in sch.func.outputs]
        run_source(lowered, chain.inputs, outputs)
        out.ran = True
        wrong = _compare(outputs, chain, "kernel run as Python")
        if wrong or not compile_kernel:
            return wrong
        stage = "build and run with numba"
        kernel = build(lowered.func, lowered.plan)
        outputs = [np.full(b.const_shape(), -99, b.dtype) for b in sch.func.outputs]
        kernel(*chain.inputs, *outputs)
        out.compiled = True
        return _compare(outputs, chain, "numba")
    except Exception:
        return f"{stage} failed after the schedule accepted it: {traceback.format_exc(limit=-4)}"
