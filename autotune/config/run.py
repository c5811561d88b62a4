"""Reading a run configuration: a YAML file or mapping -> frozen :class:`RunConfig`, then the
command-line overrides.

Every section is checked field by field (see :class:`~autotune.config.yamldoc.Section`) and the
records (:mod:`autotune.config.records`) are built only from checked values, so a ``RunConfig`` is
always valid. The ``workload`` section is read by :mod:`autotune.config.workload`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..memory import PLANNERS, Pool
from .paths import REPO_ROOT, SPACES_DIR, is_file, resolve_path, space_file
from .records import MeasureConfig, MemoryConfig, RayConfig, RunConfig, SearchConfig, WorkloadConfig
from .workload import ONNX_FIELDS, load_onnx_workload, load_workload, read_workload
from .yamldoc import Section, YamlDoc, read_yaml

__all__ = [
    "COST_MODELS",
    "MAX_SEED",
    "ONNX_FIELDS",
    "OVERRIDES",
    "REPO_ROOT",
    "SAMPLERS",
    "SPACES_DIR",
    "STRATEGIES",
    "TOP_FIELDS",
    "MeasureConfig",
    "MemoryConfig",
    "RayConfig",
    "RunConfig",
    "SearchConfig",
    "WorkloadConfig",
    "config_from_data",
    "load_config",
    "load_onnx_workload",
    "load_workload",
]

SAMPLERS = ("tpe", "nsga2", "random")
STRATEGIES = ("optuna", "evolutionary", "random")
"""``search.strategy``: the names of ``autotune.search.strategies`` (a test keeps the two in step)."""
COST_MODELS = ("xgboost", "none")
OVERRIDES = ("trials", "workers", "ray_address", "output", "resume", "seed")
MAX_SEED = 2**32 - 1
TOP_FIELDS = ("name", "workload", "memory", "search", "measure", "ray", "output")


def load_config(path: str | Path, overrides: Mapping[str, Any] | None = None) -> RunConfig:
    """Read and check the config file ``path``, then apply command-line ``overrides``.

    ``overrides`` keys: trials, workers, ray_address, output (relative to the
    current directory), seed, resume (accepted, not used here); a ``None``
    value means "not given". Any mistake raises :class:`ConfigError`.
    """
    doc = read_yaml(path)
    if doc.data is None:
        raise ConfigError(
            f"{doc.file}: the file is empty; expected a mapping with the fields {', '.join(TOP_FIELDS)}"
        )
    cfg = _build(doc, Path(path).resolve().parent, Path(path).stem, Path(path).resolve())
    return _apply_overrides(cfg, overrides or {})


def config_from_data(
    data: Mapping[str, Any], overrides: Mapping[str, Any] | None = None, base: str | Path | None = None
) -> RunConfig:
    """The config that a YAML file holding ``data`` would give, its paths relative to ``base``
    (default: the current directory); errors name ``<config dict>`` and the field."""
    if not isinstance(data, Mapping):
        raise ConfigError(f"<config dict>: expected a mapping with the fields {', '.join(TOP_FIELDS)}")
    root = Path.cwd() if base is None else Path(base).resolve()
    doc = YamlDoc("<config dict>", dict(data), {})
    cfg = _build(doc, root, "config", root / "<config dict>")
    return _apply_overrides(cfg, overrides or {})


def _build(doc: YamlDoc, base: Path, stem: str, source: Path) -> RunConfig:
    top = Section(doc, (), doc.data, TOP_FIELDS, required=("workload", "memory", "search"))
    name = top.text("name", stem)
    return RunConfig(
        name=name,
        workload=read_workload(doc, top.get("workload"), base),
        memory=_memory(doc, top.get("memory")),
        search=_search(doc, top.get("search"), base),
        measure=_measure(doc, top.get("measure")),
        ray=_ray(doc, top.get("ray")),
        output=resolve_path(base, top.text("output", f"results/{name}")),
        source=source,
    )


def _memory(doc: YamlDoc, raw: Any) -> MemoryConfig:
    where = ("memory",)
    sec = Section(doc, where, raw, ("pools", "peak_limit", "planner"), required=("pools",))
    items = sec.get("pools")
    if not isinstance(items, list) or not items:
        raise sec.error("pools", "expected a non-empty list such as [{name: dtcm, size: 64KiB}]", items)
    pools: list[Pool] = []
    for i, item in enumerate(items):
        at = (*where, "pools", i)
        pool = Section(doc, at, item, ("name", "size", "read_cost", "write_cost"), required=("name", "size"))
        name = pool.text("name")
        costs = (pool.number("read_cost", 1.0, 0.0), pool.number("write_cost", 1.0, 0.0))
        size = pool.size("size")
        if any(p.name == name for p in pools):
            raise doc.error((*at, "name"), f"duplicate pool name {name!r}")
        try:
            pools.append(Pool(name, size, *costs))
        except ConfigError as err:
            raise doc.error((*at, "name"), str(err).split(": ", 1)[-1]) from None
    limit = None if sec.get("peak_limit") is None else sec.size("peak_limit")
    planner = sec.choice("planner", sorted(PLANNERS), "greedy_by_size")
    return MemoryConfig(tuple(pools), limit, planner)


def _search(doc: YamlDoc, raw: Any, base: Path) -> SearchConfig:
    fields = (
        "space", "trials", "strategy", "sampler", "cost_model", "seed", "batch", "measure_per_round", "epsilon",
        "mutation", "warm_start", "time_budget", "storage",
    )  # fmt: skip
    sec = Section(doc, ("search",), raw, fields, required=("space", "trials"))
    space = space_file(doc, sec.text("space"), base)
    cost_model, pretrained = _cost_model(doc, sec, base)
    batch = sec.integer("batch", 64)
    per_round = sec.integer("measure_per_round", 8)
    if per_round > batch:
        raise sec.error("measure_per_round", f"expected at most batch ({batch})", per_round)
    strategy = sec.choice("strategy", STRATEGIES, "optuna")
    storage = _storage(sec, base)
    if storage is not None and strategy != "optuna":
        raise doc.error(
            ("search", "storage"),
            f"search.strategy {strategy!r} keeps no Optuna study; a storage needs 'optuna'",
        )
    return SearchConfig(
        space=space,
        trials=sec.integer("trials"),
        sampler=sec.choice("sampler", SAMPLERS, "tpe"),
        cost_model=cost_model,
        seed=sec.integer("seed", 0, minimum=0, maximum=MAX_SEED),
        batch=batch,
        measure_per_round=per_round,
        epsilon=sec.number("epsilon", 0.25, 0.0, 1.0),
        mutation=sec.number("mutation", 0.0, 0.0, 1.0),
        warm_start=_warm_start(sec, base),
        strategy=strategy,
        pretrained=pretrained,
        time_budget=None if sec.get("time_budget") is None else sec.duration("time_budget"),
        storage=storage,
    )


def _cost_model(doc: YamlDoc, sec: Section, base: Path) -> tuple[str, Path | None]:
    """``search.cost_model``: a name, or ``{kind: xgboost, pretrained: PATH}`` (the file relative to
    the config file; its contents are checked when the run loads it)."""
    raw = sec.get("cost_model")
    if not isinstance(raw, dict):
        return sec.choice("cost_model", COST_MODELS, "xgboost"), None
    where = ("search", "cost_model")
    inner = Section(doc, where, raw, ("kind", "pretrained"), required=("kind",))
    kind = inner.choice("kind", COST_MODELS, "xgboost")
    text = inner.text("pretrained", optional=True)
    if text is None:
        return kind, None
    if kind != "xgboost":
        raise inner.error("kind", "a pretrained model file needs kind 'xgboost'", kind)
    path = base / Path(str(text)).expanduser()
    if not is_file(path):
        raise inner.error("pretrained", "expected a model file that `autotune train-cost-model` wrote", text)
    return kind, path.resolve()


def _warm_start(sec: Section, base: Path) -> Path | None:
    """``search.warm_start``: an earlier run's ``best.json`` or ``trials.jsonl``, relative to the config file."""
    text = sec.text("warm_start", optional=True)
    if text is None:
        return None
    path = base / Path(str(text)).expanduser()
    if path.suffix not in (".json", ".jsonl") or not is_file(path):
        raise sec.error("warm_start", "expected the best.json or trials.jsonl of an earlier run", text)
    return path.resolve()


def _storage(sec: Section, base: Path) -> str | None:
    """``search.storage``: ``sqlite``, or a database URL whose sqlite file path is made absolute
    against the config file's directory (that directory must exist)."""
    text = sec.text("storage", optional=True)
    if text is None or text == "sqlite":
        return text
    scheme, sep, rest = text.partition("://")
    if not sep or not re.fullmatch(r"[a-z][a-z0-9]*(\+[a-z0-9_]+)?", scheme):
        raise sec.error(
            "storage",
            "expected 'sqlite' (output/optuna.db) or a database URL such as 'sqlite:///path/optuna.db'",
            text,
        )
    if scheme.partition("+")[0] != "sqlite":
        return text
    if not rest.startswith("/") or rest[1:] in ("", ":memory:"):
        raise sec.error("storage", "expected a database file: 'sqlite:///path/to/optuna.db'", text)
    path = base / Path(rest[1:]).expanduser()
    if not path.parent.is_dir():
        raise sec.error("storage", f"no directory {str(path.parent)!r} for the database file", text)
    return f"{scheme}:///{path.resolve()}"


def _measure(doc: YamlDoc, raw: Any) -> MeasureConfig:
    sec = Section(doc, ("measure",), {} if raw is None else raw, ("warmup", "repeats", "timeout", "check"))
    return MeasureConfig(
        warmup=sec.integer("warmup", 2, minimum=0),
        repeats=sec.integer("repeats", 10),
        timeout=sec.duration("timeout", 30.0),
        check=sec.boolean("check", True),
    )


def _ray(doc: YamlDoc, raw: Any) -> RayConfig:
    sec = Section(doc, ("ray",), {} if raw is None else raw, ("address", "workers"))
    return RayConfig(address=sec.text("address", None, optional=True), workers=sec.integer("workers", 2))


def _apply_overrides(cfg: RunConfig, overrides: Mapping[str, Any]) -> RunConfig:
    given = {k: v for k, v in overrides.items() if v is not None}
    sec = Section(YamlDoc("command line", given, {}), (), given, OVERRIDES)
    if "trials" in given:
        cfg = replace(cfg, search=replace(cfg.search, trials=sec.integer("trials")))
    if "seed" in given:
        cfg = replace(cfg, search=replace(cfg.search, seed=sec.integer("seed", minimum=0, maximum=MAX_SEED)))
    if "workers" in given:
        cfg = replace(cfg, ray=replace(cfg.ray, workers=sec.integer("workers")))
    if "ray_address" in given:
        cfg = replace(cfg, ray=replace(cfg.ray, address=sec.text("ray_address")))
    if "output" in given:
        out = given["output"]
        cfg = replace(
            cfg,
            output=resolve_path(Path.cwd(), sec.text("output") if not isinstance(out, Path) else str(out)),
        )
    return cfg
