"""What the tests that run the tuner share: a config file writer and an executor that measures in-process.

Each test module keeps its own workload and search settings (they decide how
long its runs take) and passes them to :func:`write_run_config`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import yaml

from autotune.measure.result import MeasureResult
from autotune.measure.task import MeasureTask, remeasure_tasks, run_task
from autotune.search.executors import Executor

POOLS = [{"name": "dtcm", "size": "8KiB"}, {"name": "sram", "size": "2MiB"}]


def write_run_config(
    tmp_path: Path,
    name: str,
    workload: dict[str, Any],
    *,
    memory: dict[str, Any] | None = None,
    repeats: int = 3,
    address: str | None = None,
    output: Path | None = None,
    **search: Any,
) -> Path:
    """Write ``tmp_path/<name>.yaml`` and return its path.

    The run tunes ``workload`` over the cascade space with TPE unless ``search``
    (the rest of the search section) says otherwise, in ``memory`` (default: the
    pools :data:`POOLS`, no peak limit), timing ``repeats`` runs after one warm-up
    with a 10 s timeout and the result checked, on two Ray workers (a new local
    Ray, or the cluster at ``address``), into ``output`` (default ``tmp_path/<name>``).
    """
    cfg = {
        "name": name,
        "workload": workload,
        "memory": {"pools": POOLS} if memory is None else memory,
        "search": {"space": "cascade", "sampler": "tpe", **search},
        "measure": {"warmup": 1, "repeats": repeats, "timeout": "10s", "check": True},
        "ray": {"address": address, "workers": 2},
        "output": str(tmp_path / name if output is None else output),
    }
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(cfg), encoding="utf-8")
    return path


class InProcess(Executor):
    """Measures in the test process (no worker start-up, and numba's disk cache is shared).

    ``fail`` maps a task's position among all the tasks given to ``run`` to the
    result to return instead of measuring it; ``calls`` counts those tasks.
    """

    name = "test-in-process"

    def __init__(self, fail: dict[int, MeasureResult] | None = None) -> None:
        self.workers = 1
        self.fail = fail or {}
        self.calls = 0

    def run(self, tasks: Sequence[MeasureTask]) -> Iterator[tuple[int, MeasureResult, str]]:
        for i, task in enumerate(tasks):
            result = self.fail.get(self.calls)
            self.calls += 1
            yield i, result if result is not None else run_task(task), "test"

    def remeasure(self, tasks: Sequence[MeasureTask], rounds: int) -> list[list[MeasureResult]]:
        return remeasure_tasks(tasks, rounds)

    def close(self) -> None:
        pass


def count_lowerings(monkeypatch: Any) -> list[str]:
    """Make ``autotune.search.candidates.lower_candidate`` record each function it lowers (its
    text) in the returned list, which grows as the search lowers."""
    from autotune.search import candidates

    lowered: list[str] = []
    real = candidates.lower_candidate

    def counting(func: Any, *args: Any) -> candidates.Lowering:
        lowered.append(str(func))
        return real(func, *args)

    monkeypatch.setattr(candidates, "lower_candidate", counting)
    return lowered
