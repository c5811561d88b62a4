"""YAML run configuration -> frozen :class:`RunConfig`, with errors that say where and why.

::

    cfg = load_config("experiments/configs/bottleneck.yaml", {"trials": 20})
    wl = load_workload(cfg.workload)

Every mistake is a :class:`~autotune.errors.ConfigError` naming the file, the
line, the field (a dotted path), the value and what was expected::

    bad.yaml:4: memory.pools[1].size: expected a positive size such as 65536, 64KiB or 2MiB, got '-3KiB'
    bad.yaml:7: search.trails: unknown field; did you mean 'trials'?

Paths (``search.space``, ``output``, ``workload.path``) are relative to the
config file's directory; ``search.space`` may also name a file of the
repository's ``search_spaces/`` (``cascade`` or ``cascade.yaml``). YAML is read
with ``yaml.SafeLoader`` only: nothing in a config file is evaluated.

Modules: ``yamldoc`` the line-aware YAML reading and typed fields (the search
space loader uses them too); ``records`` the frozen records; ``run`` the reading
of a config file into them; ``workload`` the workload section and the workload
it names; ``paths`` where a config's paths lead.
"""

from __future__ import annotations

from .paths import REPO_ROOT, SPACES_DIR
from .records import MeasureConfig, MemoryConfig, RayConfig, RunConfig, SearchConfig, WorkloadConfig
from .run import COST_MODELS, OVERRIDES, SAMPLERS, STRATEGIES, config_from_data, load_config
from .workload import load_onnx_workload, load_workload
from .yamldoc import FieldPath, Section, YamlDoc, describe_value, dotted, parse_duration, read_yaml, suggest

__all__ = [
    "COST_MODELS",
    "OVERRIDES",
    "REPO_ROOT",
    "SAMPLERS",
    "SPACES_DIR",
    "STRATEGIES",
    "FieldPath",
    "MeasureConfig",
    "MemoryConfig",
    "RayConfig",
    "RunConfig",
    "SearchConfig",
    "Section",
    "WorkloadConfig",
    "YamlDoc",
    "config_from_data",
    "describe_value",
    "dotted",
    "load_config",
    "load_onnx_workload",
    "load_workload",
    "parse_duration",
    "read_yaml",
    "suggest",
]
