"""The run configuration: YAML -> frozen :class:`RunConfig`, and the workload it names.

Every section is checked field by field (see :class:`~autotune.config.yamldoc.Section`);
the records are built only from checked values, so a ``RunConfig`` is always valid.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..measure.task import load_workload_file
from ..memory import PLANNERS, Pool
from ..workloads import Workload, describe, names
from ..workloads import get as get_workload
from ..workloads.onnx_import import OnnxImportError
from ..workloads.onnx_import import build as build_onnx
from ..workloads.onnx_import import workload_spec as onnx_workload_spec
from .yamldoc import Section, YamlDoc, describe_value, read_yaml, suggest

REPO_ROOT = Path(__file__).resolve().parents[2]
SPACES_DIR = REPO_ROOT / "search_spaces"
SAMPLERS = ("tpe", "nsga2", "random")
STRATEGIES = ("optuna", "evolutionary", "random")
"""``search.strategy``: the names of ``autotune.search.strategies`` (a test keeps the two in step)."""
COST_MODELS = ("xgboost", "none")
OVERRIDES = ("trials", "workers", "ray_address", "output", "resume", "seed")
MAX_SEED = 2**32 - 1
TOP_FIELDS = ("name", "workload", "memory", "search", "measure", "ray", "output")
ONNX_FIELDS = ("onnx", "from", "to", "batch")


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
    that ranks from the first round; the run's trials then refine it."""
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


# ---------------------------------------------------------------- loading


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
        workload=_workload(doc, top.get("workload"), base),
        memory=_memory(doc, top.get("memory")),
        search=_search(doc, top.get("search"), base),
        measure=_measure(doc, top.get("measure")),
        ray=_ray(doc, top.get("ray")),
        output=_path(base, top.text("output", f"results/{name}")),
        source=source,
    )


def _path(base: Path, text: str) -> Path:
    return (base / Path(text).expanduser()).resolve()


def _is_file(path: Path) -> bool:
    try:
        return path.is_file()
    except (OSError, ValueError):  # a name too long, or with a NUL byte
        return False


def _workload(doc: YamlDoc, raw: Any, base: Path) -> WorkloadConfig:
    where = ("workload",)
    sec = Section(doc, where, raw, ("name", "path", "args", *ONNX_FIELDS))
    if "onnx" in raw:
        if "name" in raw or "path" in raw:
            raise doc.error(where, "expected 'onnx' (a model file) without 'name' or 'path'")
        return _onnx_workload(doc, sec, base)
    if ("name" in raw) == ("path" in raw):
        raise doc.error(
            where, "expected exactly one of 'name' (a built-in workload) or 'path' ('file.py:function')"
        )
    for key in ONNX_FIELDS[1:]:
        if key in raw:
            raise doc.error((*where, key), "only a workload with 'onnx' takes this field")
    args_raw = sec.get("args") or {}
    if not isinstance(args_raw, dict):
        raise sec.error("args", "expected a mapping of parameter names to values", args_raw)
    for key, value in args_raw.items():
        if not isinstance(key, str) or not key.isidentifier():
            raise doc.error((*where, "args", key), f"expected a parameter name, got {describe_value(key)}")
        if not isinstance(value, (int, float, str, bool)):
            raise doc.error(
                (*where, "args", key), f"expected a number, string or boolean, got {describe_value(value)}"
            )
    args = tuple(args_raw.items())
    if "name" in raw:
        name = sec.text("name")
        if name not in names():
            try:
                describe(name)  # the registry's message suggests the closest name
            except ConfigError as err:
                raise doc.error((*where, "name"), str(err)) from None
        try:
            get_workload(name, **args_raw)
        except ConfigError as err:
            raise doc.error((*where, "args"), str(err)) from None
        return WorkloadConfig(name, None, args)
    spec = sec.text("path")
    file, sep, function = spec.rpartition(":")
    if not sep or not file or not function.isidentifier():
        raise sec.error("path", "expected 'path/to/file.py:function'", spec)
    resolved = _path(base, file)
    if not _is_file(resolved):
        raise doc.error((*where, "path"), f"workload file {str(resolved)!r} does not exist (from {spec!r})")
    return WorkloadConfig(None, f"{resolved}:{function}", args)


def _onnx_workload(doc: YamlDoc, sec: Section, base: Path) -> WorkloadConfig:
    """``{onnx: model.onnx, from: A, to: B, batch: 1}``: the model relative to the config file, cut
    and converted now, so that a model the chain cannot be made from stops the run before anything
    is written (the error names the field)."""
    if "args" in sec.value:
        raise sec.error("args", "an onnx workload takes from, to and batch, not args", sec.get("args"))
    text = sec.text("onnx")
    model = _path(base, text)
    if not _is_file(model):
        raise doc.error(("workload", "onnx"), f"model file {str(model)!r} does not exist (from {text!r})")
    start = sec.text("from", None, optional=True)
    end = sec.text("to", None, optional=True)
    batch = None if sec.get("batch") is None else sec.integer("batch")
    try:
        spec, args = onnx_workload_spec(model, start, end, batch)
        build_onnx(model, start, end, batch)
    except OnnxImportError as err:
        raise doc.error(("workload", err.field), str(err)) from None
    return WorkloadConfig(None, spec, args)


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


def _space(doc: YamlDoc, text: str, base: Path) -> Path:
    """The space file: relative to the config file, else in the repository (``search_spaces/NAME[.yaml]``)."""
    given = Path(text).expanduser()
    candidates = [base / given]
    if not given.is_absolute():
        if len(given.parts) == 1:
            candidates += [SPACES_DIR / given, SPACES_DIR / f"{text}.yaml"]
        else:
            candidates.append(REPO_ROOT / given)
    for candidate in candidates:
        if _is_file(candidate):
            return candidate.resolve()
    known = sorted(p.stem for p in SPACES_DIR.glob("*.yaml"))
    looked = ", ".join(str(c) for c in candidates)
    raise doc.error(
        ("search", "space"), f"no space file {text!r} (looked for {looked}){suggest(given.stem, known)}"
    )


def _search(doc: YamlDoc, raw: Any, base: Path) -> SearchConfig:
    fields = (
        "space", "trials", "strategy", "sampler", "cost_model", "seed", "batch", "measure_per_round", "epsilon",
        "mutation", "warm_start", "time_budget", "storage",
    )  # fmt: skip
    sec = Section(doc, ("search",), raw, fields, required=("space", "trials"))
    space = _space(doc, sec.text("space"), base)
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
    if not _is_file(path):
        raise inner.error("pretrained", "expected a model file that `autotune train-cost-model` wrote", text)
    return kind, path.resolve()


def _warm_start(sec: Section, base: Path) -> Path | None:
    """``search.warm_start``: an earlier run's ``best.json`` or ``trials.jsonl``, relative to the config file."""
    text = sec.text("warm_start", optional=True)
    if text is None:
        return None
    path = base / Path(str(text)).expanduser()
    if path.suffix not in (".json", ".jsonl") or not _is_file(path):
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
            cfg, output=_path(Path.cwd(), sec.text("output") if not isinstance(out, Path) else str(out))
        )
    return cfg


# ---------------------------------------------------------------- workloads


def load_workload(cfg: WorkloadConfig) -> Workload:
    """The registry workload, or the ``Workload`` that the named function of a file returns for ``args``.

    A file's function may return a :class:`~autotune.workloads.Chain` instead: it is then named
    after the function and its reference is checked against the outputs' shapes and dtypes
    (:func:`autotune.measure.task.load_workload_file`).
    """
    args = dict(cfg.args)
    if cfg.name is not None:
        return get_workload(cfg.name, **args)
    if cfg.path is None:
        raise ConfigError("workload: expected exactly one of 'name' or 'path'")
    return load_workload_file(cfg.path, args, check=True)


_FLAGS = {"onnx": "", "from": "--from: ", "to": "--to: ", "batch": "--param batch: "}


def load_onnx_workload(
    path: str | Path, start: str | None, end: str | None, params: Mapping[str, Any]
) -> Workload:
    """The workload of ``autotune check|show MODEL.onnx --from A --to B [--param batch=N]`` (the file
    relative to the current directory). Raises ConfigError naming the file and the option."""
    where = f"workload {path}"
    for key, value in params.items():
        if key != "batch":
            raise ConfigError(f"{where}: --param {key}: an ONNX model takes only batch")
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigError(f"{where}: --param batch: expected a positive integer, got {value!r}")
    batch = params.get("batch")
    try:
        return build_onnx(path, start, end, None if batch is None else int(batch))
    except OnnxImportError as err:
        raise ConfigError(f"{where}: {_FLAGS.get(err.field, '')}{err}") from None
