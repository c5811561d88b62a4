"""configure_numba_env: 512-bit vectors on AVX-512 hosts unless told otherwise; OpenMP threads
that spin briefly unless told otherwise."""

from __future__ import annotations

import sys

import pytest

from autotune.codegen import target

AVX512 = "+64bit,+avx,+avx2,+avx512f,+avx512bw,+prefer-256-bit"
AVX2 = "+64bit,+avx,+avx2,-avx512f"


@pytest.fixture
def fresh(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """No NUMBA_CPU_FEATURES, no width setting, numba not (yet) imported; all restored afterwards.

    Each variable is set before it is deleted: ``delenv`` of an absent variable records nothing, so
    the features that ``configure_numba_env`` writes would outlive the test and reach every process
    the suite starts later (AVX-512 code on a host without it: SIGILL in the measurement workers).
    """
    for var in ("NUMBA_CPU_FEATURES", target.VECTOR_WIDTH_ENV, "GOMP_SPINCOUNT"):
        monkeypatch.setenv(var, "")
        monkeypatch.delenv(var)
    monkeypatch.delitem(sys.modules, "numba", raising=False)
    return monkeypatch


def test_sets_512_bit_features_on_avx512_host(fresh: pytest.MonkeyPatch) -> None:
    fresh.setattr(target, "_host_features", lambda: AVX512)
    features = target.configure_numba_env()
    assert features == "+64bit,+avx,+avx2,+avx512f,+avx512bw,-prefer-256-bit"
    import os

    assert os.environ["NUMBA_CPU_FEATURES"] == features
    assert target.vector_width() == 512


def test_leaves_env_alone(fresh: pytest.MonkeyPatch) -> None:
    fresh.setattr(target, "_host_features", lambda: AVX2)
    assert target.configure_numba_env() is None  # no avx512f
    assert target.vector_width() == 256
    fresh.setattr(target, "_host_features", lambda: AVX512)
    fresh.setenv(target.VECTOR_WIDTH_ENV, "256")
    assert target.configure_numba_env() is None
    fresh.delenv(target.VECTOR_WIDTH_ENV)
    fresh.setenv("NUMBA_CPU_FEATURES", "+avx2")
    assert target.configure_numba_env() is None
    fresh.delenv("NUMBA_CPU_FEATURES")
    fresh.setitem(sys.modules, "numba", sys)  # numba already imported: too late
    assert target.configure_numba_env() is None


def test_host_features_come_from_llvmlite() -> None:
    features = target._host_features()
    assert features.startswith(("+", "-")) and "," in features


def test_sets_a_short_omp_spin_unless_told(fresh: pytest.MonkeyPatch) -> None:
    import os

    fresh.setattr(target, "_host_features", lambda: AVX2)
    target.configure_numba_env()
    assert os.environ["GOMP_SPINCOUNT"] == target.OMP_SPINCOUNT == "10000"
    fresh.setenv("GOMP_SPINCOUNT", "500")
    fresh.setitem(sys.modules, "numba", sys)  # set even when numba is imported: its pool reads it later
    target.configure_numba_env()
    assert os.environ["GOMP_SPINCOUNT"] == "500"
