"""Outlined nests in modules of their own: content-addressed, shared by the kernels that call them,
imported once per process; the kernel's text still defines them."""

from __future__ import annotations

import importlib
import importlib.util
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from numpy.lib.stride_tricks import sliding_window_view

from autotune import ir, te
from autotune.codegen import Kernel, build, generate_source
from autotune.codegen.build import kernel_key
from autotune.lowering import lower
from autotune.schedule import Schedule
from autotune.workloads import ops

pytestmark = pytest.mark.slow
build_module = importlib.import_module("autotune.codegen.build")  # the package's ``build`` is the function

SHAPE = (1, 6, 6, 4)  # max-pool 3x3 (-> 4x4), then max-pool 2x2 (-> 3x3): no other test builds it


def _chain() -> Schedule:
    x = te.placeholder(SHAPE, "float32", name="x")
    p2 = ops.max_pool2d(ops.max_pool2d(x, 3, name="p1"), 2, name="p2")
    return Schedule(te.create_func([x], [p2], name="nest_modules"))


def _funcs() -> tuple[ir.Func, ir.Func, ir.Func]:
    """Two kernels whose second pool's nest (loop ``y_1``) is outlined and identical (they differ in
    the first pool's loops), and a third whose outlined nest differs (its ``x_2`` loop is split)."""
    sch = _chain()
    a = sch.set_vectorizer("slp", loop="y_1")
    b = sch.split("x_1", [None, 2], names=["xo", "xi"]).set_vectorizer("slp", loop="y_1")
    c = sch.split("x_2", [None, 1], names=["x2o", "x2i"]).set_vectorizer("slp", loop="y_1")
    return lower(a.func).func, lower(b.func).func, lower(c.func).func


def _reference(x: np.ndarray) -> np.ndarray:
    p1 = sliding_window_view(x, (3, 3), axis=(1, 2)).max(axis=(-2, -1))
    return sliding_window_view(p1, (2, 2), axis=(1, 2)).max(axis=(-2, -1))


def _run(kernel: Kernel) -> None:
    x = np.random.default_rng(0).standard_normal(SHAPE).astype(np.float32)
    out = np.full((1, 3, 3, 4), np.nan, np.float32)
    kernel(x, out)
    np.testing.assert_array_equal(out, _reference(x))


@pytest.fixture
def imports(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The module names the build executes (imports that were not done before in this process)."""
    executed: list[str] = []
    real = build_module._import

    def spy(modname: str, path: Path, vectorizer: str):  # type: ignore[no-untyped-def]
        if modname not in sys.modules:
            executed.append(modname)
        return real(modname, path, vectorizer)

    monkeypatch.setattr(build_module, "_import", spy)
    return executed


def test_kernels_sharing_a_nest_share_its_module(tmp_path: Path, imports: list[str]) -> None:
    fa, fb, _ = _funcs()
    sa, sb = generate_source(fa), generate_source(fb)
    assert sa.text != sb.text and sa.nests[0].text == sb.nests[0].text
    first = build(fa, cache_dir=tmp_path)
    nest = first.nest_paths[0]
    assert nest.name == f"n_{kernel_key(sa.nests[0].text)[:16]}.py" and nest.read_text() == sa.nests[0].text
    assert imports == [f"autotune_nest_{nest.stem[2:]}", f"autotune_kernel_{first.key[:16]}"]
    assert first.import_seconds > 0
    imports.clear()
    second = build(fb, cache_dir=tmp_path)
    assert second.path != first.path and second.nest_paths == (nest,)
    assert imports == [f"autotune_kernel_{second.key[:16]}"]  # the nest's module is not imported again
    assert sorted(p.name for p in (tmp_path / "kernels").glob("n_*.py")) == [nest.name]
    called = [k.dispatcher.py_func.__globals__["nest_modules_y_1"] for k in (first, second)]
    assert called[0] is called[1] and called[0].compiled_by == "llvm"  # one translation, shared
    for kernel in (first, second):
        _run(kernel)
    imports.clear()
    again = build(fa, cache_dir=tmp_path)
    assert imports == [] and again.import_seconds == 0.0


def test_a_nest_module_is_content_addressed(tmp_path: Path) -> None:
    fa, _, fc = _funcs()
    sa, sc = generate_source(fa), generate_source(fc)
    assert sa.nests[0].name == sc.nests[0].name and sa.nests[0].text != sc.nests[0].text
    ka, kc = build(fa, cache_dir=tmp_path), build(fc, cache_dir=tmp_path)
    assert ka.nest_paths != kc.nest_paths
    assert sorted(p.name for p in (tmp_path / "kernels").glob("n_*.py")) == sorted(
        p.name for p in (*ka.nest_paths, *kc.nest_paths)
    )
    _run(kc)


def test_the_module_is_the_nest_alone_and_the_kernel_text_defines_it(tmp_path: Path) -> None:
    fa, _, _ = _funcs()
    kernel = build(fa, cache_dir=tmp_path)
    nest = kernel.kernel_source.nests[0]
    module = nest.text
    # the module: the function ``nest`` and the constants it uses (the register's 0, the max-pool's -inf)
    assert "\ndef nest(p1_data, p2_flat):\n" in module
    assert "\n_c0 = np.float32(0.0)\n_c1 = np.float32(-np.inf)\n" in module
    assert "_c2" not in module and "nest_modules_y_1" not in module
    # the kernel's text (what a report shows) defines the nest; the imported module imports it
    assert nest.definition in kernel.source and "def nest_modules_y_1(p1_data, p2_flat):" in kernel.source
    imported = kernel.path.read_text()
    assert f"from {kernel.nest_paths[0].stem.replace('n_', 'autotune_nest_', 1)} import nest as nest_modules_y_1\n" in imported
    assert "def nest_modules_y_1" not in imported
    assert imported == kernel.kernel_source.module_text({nest.name: f"autotune_nest_{kernel.nest_paths[0].stem[2:]}"})
    # the kernel's text runs by itself
    standalone = tmp_path / "standalone_nest_modules.py"
    standalone.write_text(kernel.source)
    spec = importlib.util.spec_from_file_location("standalone_nest_modules", standalone)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    try:
        spec.loader.exec_module(mod)
        x = np.random.default_rng(1).standard_normal(SHAPE).astype(np.float32)
        out = np.full((1, 3, 3, 4), np.nan, np.float32)
        getattr(mod, kernel.name)(x, out, *(a for a in kernel.storage))
        np.testing.assert_array_equal(out, _reference(x))
    finally:
        del sys.modules[spec.name]


_FRESH = """
import sys
sys.path.insert(0, {tests!r})
from test_codegen_nest_modules import _funcs, _run
from autotune.codegen import build, runtime
built = []
build_library = runtime._Translated._build
runtime._Translated._build = lambda self, before: built.append(self.symbol) or build_library(self, before)
kernel = build(_funcs()[0], cache_dir={cache!r})
_run(kernel)
print(len(kernel.dispatcher.stats.cache_hits), len(kernel.dispatcher.stats.cache_misses), len(built))
"""


def test_a_fresh_process_loads_the_kernel_and_its_body_from_disk(tmp_path: Path) -> None:
    """The first process compiles the kernel, its parallel loop's body and the nest the body calls
    (linked into the body's code); the next loads the kernel from numba's disk cache and the body's
    machine code from beside it, and optimises nothing."""
    script = _FRESH.format(tests=str(Path(__file__).parent), cache=str(tmp_path))
    counts = [subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout.split() for _ in range(2)]
    assert counts[0] == ["0", "1", "2"]  # compiled: the kernel missed the cache; the body and its nest were optimised
    assert counts[1] == ["1", "0", "0"]  # the kernel from numba's disk cache, the body's code from its own
