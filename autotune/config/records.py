"""The run configuration's records: one frozen dataclass per section and :class:`RunConfig` for
the whole run, which writes itself back as plain YAML data (:meth:`RunConfig.to_dict`).

The records hold checked values only: :mod:`autotune.config.run` builds them from a config file.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..memory import Pool


@dataclass(frozen=True)
class WorkloadConfig:
    """A registry workload (``name``) or ``"/abs/path/file.py:function"`` (``path``), and its arguments.

    A config's ``{onnx: model.onnx, from: A, to: B, batch: 1}`` is the path workload that
    :func:`autotune.workloads.onnx_import.workload_spec` names (the model, cut, batch, layout and
    the file's sha256 are its arguments).
    """

    name: str | None
    path: str | None
    args: tuple[tuple[str, Any], ...] = ()


@dataclass(frozen=True)
class MemoryConfig:
    """The pools (in order of preference), the limit on the total workspace in bytes, the planner."""

    pools: tuple[Pool, ...]
    peak_limit: int | None
    planner: str = "greedy_by_size"


@dataclass(frozen=True)
class SearchConfig:
    """The knob space file and how to search it; ``batch`` candidates are drawn per round."""

    space: Path
    trials: int
    sampler: str
    cost_model: str
    seed: int
    batch: int = 64
    measure_per_round: int = 8
    epsilon: float = 0.25
    mutation: float = 0.0
    """The share of each round's candidates drawn as one- or two-knob mutations of the best measured
    trials (MetaSchedule's evolutionary step) instead of by the sampler; 0: the sampler alone."""
    warm_start: Path | None = None
    """A ``best.json`` or ``trials.jsonl`` of an earlier run: its schedule (the best 4 ``ok`` trials of a
    log) is proposed first (``autotune.search.best.warm_start``)."""
    pretrained: Path | None = None
    """``cost_model: {kind: xgboost, pretrained: PATH}``: a model file (``autotune train-cost-model``)
    that ranks the first round by the roofline estimate's line fitted on its logs; its trees count,
    and the run's trials refine them, once the run's first trials are fitted."""
    time_budget: float | None = None
    """Seconds the search may take beside ``trials`` (``10m``): no round starts after it (None: no limit)."""
    strategy: str = "optuna"
    """What proposes the candidates (``autotune.search.strategies``): ``optuna`` (with ``sampler``),
    ``evolutionary`` (mutations of the fastest measured trials, ranked by the cost model) or
    ``random`` (the control); ``sampler`` and ``mutation`` apply to ``optuna`` only."""
    storage: str | None = None
    """Where the ``optuna`` strategy keeps a copy of the run's trials as an Optuna study that
    optuna-dashboard opens: ``sqlite`` (``<output>/optuna.db``) or a database URL
    (``sqlite:///path/optuna.db``, its path made absolute against the config file's directory);
    None: no copy (``autotune.search.strategies.optuna_storage``)."""


@dataclass(frozen=True)
class MeasureConfig:
    """How each candidate is checked and timed; ``timeout`` in seconds."""

    warmup: int = 2
    repeats: int = 10
    timeout: float = 30.0
    check: bool = True


@dataclass(frozen=True)
class RayConfig:
    """``address=None``: a local Ray that autotune starts and stops."""

    address: str | None = None
    workers: int = 2


@dataclass(frozen=True)
class RunConfig:
    """A whole run; every path in it is absolute (``source`` is the config file)."""

    name: str
    workload: WorkloadConfig
    memory: MemoryConfig
    search: SearchConfig
    measure: MeasureConfig
    ray: RayConfig
    output: Path
    source: Path

    def to_dict(self) -> dict[str, Any]:
        """Plain YAML data; ``load_config`` of its dump gives this config back (but ``source``)."""
        wl: dict[str, Any] = (
            {"name": self.workload.name} if self.workload.name else {"path": self.workload.path}
        )
        pools = [
            {"name": p.name, "size": p.size, "read_cost": p.read_cost, "write_cost": p.write_cost}
            for p in self.memory.pools
        ]
        search = {k: getattr(self.search, k) for k in self.search.__dataclass_fields__}
        for name, default in _OMITTED_AT_DEFAULT.items():  # added later: earlier fingerprints hold
            if search[name] == default:
                del search[name]
        if self.search.pretrained is not None:  # written as the config says it
            search["cost_model"] = {"kind": search["cost_model"], "pretrained": str(search.pop("pretrained"))}
        return {
            "name": self.name,
            "workload": {**wl, "args": dict(self.workload.args)},
            "memory": {"pools": pools, "peak_limit": self.memory.peak_limit, "planner": self.memory.planner},
            "search": {**search, "space": str(self.search.space)},
            "measure": {k: getattr(self.measure, k) for k in self.measure.__dataclass_fields__},
            "ray": {k: getattr(self.ray, k) for k in self.ray.__dataclass_fields__},
            "output": str(self.output),
        }


_OMITTED_AT_DEFAULT: dict[str, Any] = {
    "strategy": "optuna", "pretrained": None, "time_budget": None, "storage": None,
}  # fmt: skip
"""Search fields that :meth:`RunConfig.to_dict` leaves out at their default value: the config fields
of a run (its fingerprint, which a resume checks) stay what they were before the field existed."""
