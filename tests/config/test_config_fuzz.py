"""Fuzz load_config: whatever the file holds, the only exception is ConfigError."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autotune.config import RunConfig, load_config
from autotune.errors import ConfigError

GOOD: dict[str, Any] = {
    "name": "fuzz",
    "workload": {"name": "pool_chain", "args": {"height": 20, "width": 20, "channels": 4}},
    "memory": {
        "pools": [{"name": "dtcm", "size": "64KiB"}, {"name": "sram", "size": "2MiB"}],
        "peak_limit": "512KiB",
    },
    "search": {"space": "cascade", "trials": 40, "sampler": "tpe", "cost_model": "xgboost", "seed": 0},
    "measure": {"warmup": 2, "repeats": 10, "timeout": "30s", "check": True},
    "ray": {"address": None, "workers": 2},
    "output": "out",
}
FIELDS = sorted(
    {
        "pools",
        "size",
        "path",
        "args",
        "space",
        "trials",
        *GOOD,
        *(k for v in GOOD.values() if isinstance(v, dict) for k in v),
    }
)

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(
        [
            "64KiB",
            "-3KiB",
            "0",
            "2 MiB",
            "30s",
            "2m",
            "500ms",
            "soon",
            "pool_chain",
            "cascade",
            "gemm",
            "x.py:f",
            "",
            "\x00",
        ]
    ),
    st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=12),
)
keys = st.one_of(st.sampled_from(FIELDS), st.text(max_size=8), st.integers(-3, 3))
trees = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(keys, inner, max_size=5)),
    max_leaves=20,
)
FRAGMENTS = [
    ": ",
    "- ",
    "{",
    "}",
    "[",
    "]",
    ",",
    "\n",
    "  ",
    "\t",
    "&a ",
    "*a",
    "!!int ",
    "!!python/object ",
    "<<: ",
    "'",
    '"',
    "#",
    "---\n",
    "? ",
    "|",
    ">",
]
yamlish = st.lists(
    st.one_of(st.sampled_from(FRAGMENTS), st.sampled_from(FIELDS), scalars.map(str)), max_size=30
).map("".join)


@pytest.fixture(scope="module")
def config_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz") / "run.yaml"


def _load(path: Path) -> None:
    try:
        assert isinstance(load_config(path), RunConfig)
    except ConfigError as err:
        assert str(err).startswith(str(path))


FUZZ = settings(
    max_examples=500,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@FUZZ
@given(text=st.one_of(yamlish, st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=200)))
def test_random_text(config_file: Path, text: str) -> None:
    config_file.write_text(text, encoding="utf-8")
    _load(config_file)


@FUZZ
@given(data=st.binary(max_size=64))
def test_random_bytes(config_file: Path, data: bytes) -> None:
    config_file.write_bytes(data)
    _load(config_file)


@FUZZ
@given(tree=trees)
def test_random_trees(config_file: Path, tree: Any) -> None:
    config_file.write_text(yaml.safe_dump(tree), encoding="utf-8")
    _load(config_file)


def _mutate(config: dict[str, Any], path: list[str], value: Any) -> dict[str, Any]:
    """``config`` with the leaf (or section) at ``path`` replaced by ``value``."""
    out = dict(config)
    if len(path) == 1:
        out[path[0]] = value
    else:
        out[path[0]] = _mutate(out[path[0]], path[1:], value)
    return out


LEAVES = [[k] for k in GOOD] + [[k, sub] for k, v in GOOD.items() if isinstance(v, dict) for sub in v]


@FUZZ
@given(path=st.sampled_from(LEAVES), value=trees, extra=st.none() | st.tuples(keys, scalars))
def test_mutated_good_config(
    config_file: Path, path: list[str], value: Any, extra: tuple[Any, Any] | None
) -> None:
    config = _mutate(GOOD, path, value)
    if extra is not None:
        config[extra[0]] = extra[1]
    config_file.write_text(yaml.safe_dump(config), encoding="utf-8")
    _load(config_file)
