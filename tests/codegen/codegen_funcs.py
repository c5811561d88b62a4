"""Small functions for codegen tests, each with a numpy reference.

Built with ``autotune.te`` and lowered with ``lower_blocks`` (the full lowering
pipeline is tested elsewhere); ``banked`` is written as lowered IR by hand: an
allocation with an axis separator, ``[2, 16]`` (two banks).
``register_tiled`` is a schedule instead: the register-tiled matmul, for the full pipeline.
``avx2`` skips a test on a host without AVX2/FMA; ``fresh_asm`` compiles a kernel anew and returns its assembly.
``body_lines`` reads the statements of a kernel's body out of its text.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np
import pytest
from numpy.lib.stride_tricks import sliding_window_view

from autotune import ir, te
from autotune.codegen import Kernel
from autotune.lowering.blocks import lower_blocks
from autotune.schedule import Schedule

Reference = Callable[..., tuple[np.ndarray, ...]]

SERIAL = "for once in numba.prange(1):"
"""The line a serial kernel's body runs under (generate_source's one-iteration parallel loop)."""


def body_lines(text: str) -> list[str]:
    """The statements of a kernel's body, stripped, without comments and blank lines: those of the
    function its parallel loop's body is outlined to (``<kernel>_body``, written before the kernel)
    where it has one, else the kernel's own (without the serial kernel's ``prange(1)`` line)."""
    lines = text.splitlines()
    starts = [k for k, ln in enumerate(lines) if re.match(r"def \w+_body\(", ln)] or [
        max(k for k, ln in enumerate(lines) if ln.startswith("def "))
    ]
    body: list[str] = []
    for ln in lines[starts[0] + 1 :]:
        if ln.startswith("@"):
            break
        if ln.strip() and not ln.strip().startswith("#") and ln.strip() != SERIAL:
            body.append(ln.strip())
    return body


def _max_pool(x: te.Tensor, name: str) -> te.Tensor:
    n, h, w, c = x.shape
    rh, rw = te.reduce_axis((0, 3), "rh"), te.reduce_axis((0, 3), "rw")
    return te.compute(
        (n, h - 2, w - 2, c), lambda b, y, z, k: te.max(x[b, y + rh, z + rw, k], axis=[rh, rw]), name=name
    )


def pool_chain(height: int = 8, width: int = 8, channels: int = 2) -> tuple[ir.Func, Reference]:
    """Two 3x3 max pools (stride 1, no padding), NHWC."""
    data = te.placeholder((1, height, width, channels), "float32", name="data")
    pool2 = _max_pool(_max_pool(data, "pool1"), "pool2")
    func = lower_blocks(te.create_func([data], [pool2], "pool_chain"))

    def reference(x: np.ndarray) -> tuple[np.ndarray, ...]:
        once = sliding_window_view(x, (3, 3), axis=(1, 2)).max(axis=(-2, -1))
        return (sliding_window_view(once, (3, 3), axis=(1, 2)).max(axis=(-2, -1)),)

    return func, reference


def matmul(m: int = 12, n: int = 10, k: int = 7) -> tuple[ir.Func, Reference]:
    """C = relu(A @ B) through an intermediate product."""
    a = te.placeholder((m, k), "float32", name="A")
    b = te.placeholder((k, n), "float32", name="B")
    rk = te.reduce_axis((0, k), "k")
    prod = te.compute((m, n), lambda i, j: te.sum(a[i, rk] * b[rk, j], axis=rk), name="P")
    out = te.compute((m, n), lambda i, j: ir.max_(prod[i, j], 0.0), name="C")
    func = lower_blocks(te.create_func([a, b], [out], "matmul"))

    def reference(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, ...]:
        return (np.maximum(x @ y, 0).astype(np.float32),)

    return func, reference


def padded_conv(height: int = 6, width: int = 5, cin: int = 3, cout: int = 4) -> tuple[ir.Func, Reference]:
    """A 3x3 convolution with zero padding 1 (``te.if_then_else`` guards the halo), NHWC."""
    data = te.placeholder((1, height, width, cin), "float32", name="data")
    weight = te.placeholder((3, 3, cin, cout), "float32", name="weight")

    def padded(b: ir.Expr, y: ir.Expr, x: ir.Expr, c: ir.Expr) -> ir.Expr:
        inside = ir.And(ir.And(y >= 1, y < height + 1), ir.And(x >= 1, x < width + 1))
        return te.if_then_else(inside, data[b, y - 1, x - 1, c], 0.0)

    pad = te.compute((1, height + 2, width + 2, cin), padded, name="pad")
    rh, rw, rc = te.reduce_axis((0, 3), "rh"), te.reduce_axis((0, 3), "rw"), te.reduce_axis((0, cin), "rc")
    conv = te.compute(
        (1, height, width, cout),
        lambda b, y, x, o: te.sum(pad[b, y + rh, x + rw, rc] * weight[rh, rw, rc, o], axis=[rh, rw, rc]),
        name="conv",
    )
    func = lower_blocks(te.create_func([data, weight], [conv], "padded_conv"))

    def reference(x: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, ...]:
        xp = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
        win = sliding_window_view(xp, (3, 3), axis=(1, 2))  # 1,H,W,CI,3,3
        return (np.einsum("nhwcij,ijco->nhwo", win, w).astype(np.float32),)

    return func, reference


def padded_conv_inline(height: int = 6, width: int = 5) -> tuple[ir.Func, Reference]:
    """A 3x3 box sum whose padded loads sit in the untaken branch of a Select (no pad buffer).

    Evaluating both branches would read ``data[-1, ...]``: only a lazy select is correct
    at the borders (and safe: numba does no bounds checks).
    """
    data = te.placeholder((height, width), "float32", name="data")
    rh, rw = te.reduce_axis((0, 3), "rh"), te.reduce_axis((0, 3), "rw")

    def body(y: ir.Expr, x: ir.Expr) -> ir.Expr:
        yy, xx = y + rh - 1, x + rw - 1
        inside = ir.And(ir.And(yy >= 0, yy < height), ir.And(xx >= 0, xx < width))
        return te.sum(te.if_then_else(inside, data[yy, xx], 0.0), axis=[rh, rw])

    out = te.compute((height, width), body, name="box")
    func = lower_blocks(te.create_func([data], [out], "box3"))

    def reference(x: np.ndarray) -> tuple[np.ndarray, ...]:
        xp = np.pad(x, 1)
        return (sliding_window_view(xp, (3, 3)).sum(axis=(-2, -1)).astype(np.float32),)

    return func, reference


def banked(n: int = 32) -> tuple[ir.Func, Reference]:
    """``out[k] = 2 * a[k'] + 1`` through a tile ``[2, n // 2]`` with an axis separator (two banks).

    The first loop writes bank ``i // half``, the second reads the *other* bank
    (``k' = k`` shifted by half), so both banks and a runtime bank index are used.
    """
    half = n // 2
    a = ir.decl_buffer("A", (n,))
    out = ir.decl_buffer("O", (n,))
    tile = ir.decl_buffer("T", (2, half), axis_separators=(1,))
    i, k = ir.Var("i"), ir.Var("k")
    fill = ir.For(
        i, ir.const(0), ir.const(n), "serial", ir.BufferStore(tile, a[i] * 2.0, (i // half, i % half))
    )
    bank = (k // half + 1) % 2
    use = ir.For(
        k, ir.const(0), ir.const(n), "vectorized", ir.BufferStore(out, tile[bank, k % half] + 1.0, (k,))
    )
    body = ir.Allocate(
        tile.data, "float32", (ir.const(2), ir.const(half)), ir.DeclBuffer(tile, ir.seq(fill, use))
    )
    func = ir.Func("banked", (a, out), body)

    def reference(x: np.ndarray) -> tuple[np.ndarray, ...]:
        return ((np.roll(x, -half) * 2 + 1).astype(np.float32),)

    return func, reference


def tiled_stage(tiles: int = 4, size: int = 6, view: bool = False) -> tuple[ir.Func, Reference]:
    """O = A * 2 + 1 through an intermediate T computed tile by tile: under the tile loop ``t``,
    ``T`` (``size`` floats, allocated there) is filled from A, then read into O; with ``view``, the
    second stage reads T through a 2-d view declared on its storage."""
    n = tiles * size
    a, out = ir.decl_buffer("A", (n,)), ir.decl_buffer("O", (n,))
    tile = ir.decl_buffer("T", (size,))
    t, j = ir.Var("t"), ir.Var("j")
    fill = ir.For(j, ir.const(0), ir.const(size), "serial", ir.BufferStore(tile, a[t * size + j] * 2.0, (j,)))
    if view:
        rows = ir.decl_buffer("T2", (2, size // 2), data=tile.data)
        read = ir.BufferStore(out, rows[j // (size // 2), j % (size // 2)] + 1.0, (t * size + j,))
        use: ir.Stmt = ir.DeclBuffer(rows, ir.For(j, ir.const(0), ir.const(size), "serial", read))
    else:
        use = ir.For(j, ir.const(0), ir.const(size), "serial", ir.BufferStore(out, tile[j] + 1.0, (t * size + j,)))
    stage = ir.Allocate(tile.data, "float32", (ir.const(size),), ir.DeclBuffer(tile, ir.seq(fill, use)))
    func = ir.Func("tiled_stage", (a, out), ir.For(t, ir.const(0), ir.const(tiles), "serial", stage))

    def reference(x: np.ndarray) -> tuple[np.ndarray, ...]:
        return ((x * 2 + 1).astype(np.float32),)

    return func, reference


def tiled_stages(tiles: int = 4, size: int = 6) -> tuple[ir.Func, Reference]:
    """O = ((A * 2 + 1) * 3 - 4) * 0.5 through three intermediates T -> U -> V, each ``size``
    floats allocated under the tile loop ``t`` and filled from the one before: T and V never live
    at once, so a memory plan may put them on the same bytes."""
    n = tiles * size
    a, out = ir.decl_buffer("A", (n,)), ir.decl_buffer("O", (n,))
    t_, u, v = (ir.decl_buffer(name, (size,)) for name in ("T", "U", "V"))
    t, j = ir.Var("t"), ir.Var("j")

    def loop(store: ir.Stmt) -> ir.Stmt:
        return ir.For(j, ir.const(0), ir.const(size), "serial", store)

    def alloc(buf: ir.Buffer, body: ir.Stmt) -> ir.Stmt:
        return ir.Allocate(buf.data, "float32", (ir.const(size),), ir.DeclBuffer(buf, body))

    last = ir.seq(loop(ir.BufferStore(v, u[j] - 4.0, (j,))), loop(ir.BufferStore(out, v[j] * 0.5, (t * size + j,))))
    middle = ir.seq(loop(ir.BufferStore(u, t_[j] * 3.0, (j,))), alloc(v, last))
    first = ir.seq(loop(ir.BufferStore(t_, a[t * size + j] * 2.0 + 1.0, (j,))), alloc(u, middle))
    func = ir.Func("tiled_stages", (a, out), ir.For(t, ir.const(0), ir.const(tiles), "serial", alloc(t_, first)))

    def reference(x: np.ndarray) -> tuple[np.ndarray, ...]:
        return ((((x * 2 + 1) * 3 - 4) * 0.5).astype(np.float32),)

    return func, reference


def register_tiled(func: ir.Func, unroll: bool = True, outline: str | None = None) -> Schedule:
    """C in 4x8 tiles: for io, jo: acc[4, 8] = 0; for k: acc += A[i, k] * B[k, j]; C[tile] = acc.

    Compiled with SLP: the whole kernel, or with ``outline`` (a loop name) that loop's nest only."""
    sch = Schedule(func).split("i", [None, 4], names=["io", "ii"]).split("j", [None, 8], names=["jo", "ji"])
    sch = sch.reorder("io", "jo", "k", "ii", "ji").cache_write("matmul", 0, "local")
    sch = sch.reverse_compute_at("matmul_local", "jo")
    if unroll:
        sch = sch.unroll("ii").unroll("ji").unroll("ax0").unroll("ax1")
    return sch.set_vectorizer("slp", loop=outline)


def _host_has_avx2_fma() -> bool:
    import llvmlite.binding as llvm

    features = str(llvm.get_host_cpu_features().flatten()).split(",")
    return "+avx2" in features and "+fma" in features


avx2 = pytest.mark.skipif(not _host_has_avx2_fma(), reason="the host has no AVX2/FMA")


def fresh_asm(kernel: Kernel) -> str:
    """Compile ``kernel`` anew (no disk cache: numba cannot inspect cached code) and return its
    assembly, with that of its parallel loops' outlined bodies (their own code, which the kernel
    calls; compiled anew too).

    The kernel's dispatcher is replaced by an uncached copy with the same options, so
    :meth:`Kernel.compile` (and its vectorizer settings) is what compiles it.
    """
    import numba

    options = {k: v for k, v in kernel.dispatcher.targetoptions.items() if k != "nopython"}
    namespace = kernel.dispatcher.py_func.__globals__
    kernel.dispatcher = numba.njit(**options)(kernel.dispatcher.py_func)
    kernel.compile()
    bodies = [namespace[name] for name in kernel.kernel_source.bodies]
    asm = [body.assembly() for body in bodies if body.compiled_by == "llvm"]
    return "\n".join([*kernel.dispatcher.inspect_asm().values(), *asm])
