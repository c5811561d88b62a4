"""The executors package: its public names, where Ray workers find the code, and its files' size."""

from __future__ import annotations

from pathlib import Path

import autotune
from autotune.search import executors
from autotune.search.executors import ray_executor

PUBLIC = (
    "COMPILE_ALLOWANCE_S", "EXECUTORS", "Executor", "LocalExecutor", "RayExecutor", "check_reachable",
    "make_executor", "register_executor", "task_cpus", "task_limit",
)  # fmt: skip


def test_the_public_names_are_importable_from_the_package() -> None:
    assert set(executors.__all__) == set(PUBLIC)
    for name in PUBLIC:
        assert getattr(executors, name) is not None
    assert set(executors.EXECUTORS) == {"local", "ray"}
    assert executors.EXECUTORS["local"] is executors.LocalExecutor
    assert executors.EXECUTORS["ray"] is executors.RayExecutor


def test_ray_workers_are_shipped_the_autotune_package() -> None:
    assert Path(autotune.__file__).resolve().parent == ray_executor.PACKAGE_DIR


def test_every_module_of_the_package_is_under_400_lines() -> None:
    sizes = {
        p.name: len(p.read_text(encoding="utf-8").splitlines())
        for p in Path(executors.__file__).parent.glob("*.py")
    }
    assert sizes and all(n < 400 for n in sizes.values()), sizes
