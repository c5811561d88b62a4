"""Shared test setup: one kernel cache for the whole suite, and golden text files."""

from __future__ import annotations

import difflib
import os
from collections.abc import Callable
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
GOLDEN_DIR = REPO_ROOT / "tests" / "golden"

# Set before anything imports numba, so every test (and every worker it starts) shares the kernel cache.
os.environ.setdefault("NUMBA_CACHE_DIR", str(REPO_ROOT / ".cache" / "numba"))
os.environ.setdefault("AUTOTUNE_CACHE_DIR", str(REPO_ROOT / ".cache" / "autotune"))

from autotune.search.target import Target  # noqa: E402  (after the cache variables: it imports the code generator)

SPACE_TARGET = Target("znver5", 2, 512, 32, 64, 49152, 1048576, 33554432)
"""The machine the tests derive search spaces for, whatever the host (an AVX-512 host with 2 cores):
the knobs a test asserts (register tiles, channel blocks) depend on the target, not on where the
suite runs. The kernels still compile for the host."""


@pytest.fixture(autouse=True)
def _space_target(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """``Target.host()`` is :data:`SPACE_TARGET` in every test but those marked ``host_target``."""
    if request.node.get_closest_marker("host_target") is None:
        monkeypatch.setattr(Target, "host", classmethod(lambda cls: SPACE_TARGET))


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-golden",
        action="store_true",
        default=False,
        help="rewrite tests/golden/<name>.txt from the current output instead of comparing",
    )


GoldenCheck = Callable[[str, str], None]


@pytest.fixture
def golden(request: pytest.FixtureRequest) -> GoldenCheck:
    """Return ``check(name, text)``: compare ``text`` with ``tests/golden/<name>.txt``.

    ``name`` may contain ``/`` (``"schedule/split"``). The stored text always ends with
    one newline, so ``text`` is compared with a trailing newline added if it has none.
    """
    update: bool = request.config.getoption("--update-golden")

    def check(name: str, text: str) -> None:
        __tracebackhide__ = True
        path = (GOLDEN_DIR / f"{name}.txt").resolve()
        if GOLDEN_DIR.resolve() not in path.parents:
            raise ValueError(f"golden name {name!r} points outside {GOLDEN_DIR}")
        if not text.endswith("\n"):
            text += "\n"
        rel = path.relative_to(REPO_ROOT)
        if update:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            return
        if not path.exists():
            pytest.fail(f"golden file {rel} is missing: run `make golden` to create it", pytrace=False)
        expected = path.read_text(encoding="utf-8")
        if text != expected:
            diff = "".join(
                difflib.unified_diff(
                    expected.splitlines(keepends=True),
                    text.splitlines(keepends=True),
                    fromfile=f"{rel} (golden)",
                    tofile=f"{name} (actual)",
                )
            )
            raise AssertionError(
                f"output differs from {rel}; if the change is intended, run `make golden`\n{diff}"
            )

    return check


@pytest.fixture
def run_func() -> Callable[..., object]:
    """Return ``run(workload, func, extra=(), **lower_kwargs)``: lower, compile, run on seeded inputs.

    Checks the outputs against the workload's numpy reference and returns the
    ``Lowered`` function. ``extra`` arrays are passed between the inputs and the
    outputs (for instrumented functions that take extra parameters).
    """
    import numpy as np

    from autotune.codegen import build
    from autotune.lowering import lower

    def run(workload, func, extra=(), check=True, **lower_kwargs):  # type: ignore[no-untyped-def]
        lowered = lower(func, verify=True, **lower_kwargs)
        kernel = build(lowered.func, lowered.plan)
        inputs = workload.make_inputs(0)
        outputs = [np.full(b.const_shape(), np.nan, dtype=b.dtype) for b in func.outputs]
        kernel(*inputs, *extra, *outputs)
        if check:
            for got, want in zip(outputs, workload.reference(*inputs)):
                np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
        return lowered

    return run
