"""Pools, sizes as written in configs and flags, and size formatting."""

from __future__ import annotations

import pytest

from autotune.errors import ConfigError
from autotune.memory import Pool, format_size, parse_pools, parse_size

EXPECTED = "expected a positive size such as 65536, 64KiB or 2MiB"


@pytest.mark.parametrize(
    ("text", "size"),
    [
        (4096, 4096),
        ("4096", 4096),
        ("512B", 512),
        ("512 b", 512),
        ("64KiB", 65536),
        ("64 kib", 65536),
        (" 8 KiB ", 8192),
        ("2MiB", 2 * 1024**2),
        ("1GiB", 1024**3),
        ("100kB", 100_000),
        ("1MB", 1_000_000),
        ("1GB", 1_000_000_000),
        ("8 KIB", 8192),
    ],
)
def test_parse_size_accepts(text: str | int, size: int) -> None:
    assert parse_size(text) == size


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        ("0", "'0'"),
        ("-3KiB", "'-3KiB'"),
        ("abc", "'abc'"),
        ("12XB", "'12XB'"),
        ("", "''"),
        ("1.5MiB", "'1.5MiB'"),
        ("0KiB", "'0KiB'"),
        (0, "0"),
        (-5, "-5"),
        (True, "True"),
        (1.5, "1.5"),
        (None, "None"),
    ],
)
def test_parse_size_rejects_with_field_value_and_expectation(value: object, shown: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_size(value, "pools[0].size")  # type: ignore[arg-type]
    assert str(info.value) == f"pools[0].size: {EXPECTED}, got {shown}"


def test_parse_size_default_field() -> None:
    with pytest.raises(ConfigError, match=r"^size: expected a positive size"):
        parse_size("-3KiB")


def test_parse_pools_keeps_order() -> None:
    assert parse_pools("dtcm=64KiB, sram = 2MiB") == (
        Pool("dtcm", 65536),
        Pool("sram", 2 * 1024**2),
    )


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("", "pools: expected NAME=SIZE[,NAME=SIZE...] such as dtcm=64KiB, got ''"),
        ("dtcm", "pools[0]: expected NAME=SIZE such as dtcm=64KiB, got 'dtcm'"),
        ("dtcm=1KiB,=64KiB", "pools[1]: expected NAME=SIZE such as dtcm=64KiB, got '=64KiB'"),
        ("dtcm=1KiB,dtcm=2KiB", "pools[1]: duplicate pool name 'dtcm'"),
        ("dtcm=1KiB,sram=0", f"pools[1].size: {EXPECTED}, got '0'"),
        ("dtcm=1KiB,", "pools[1]: expected NAME=SIZE such as dtcm=64KiB, got ''"),
    ],
)
def test_parse_pools_rejects(spec: str, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_pools(spec)
    assert str(info.value) == message


@pytest.mark.parametrize(
    ("n", "text"),
    [
        (0, "0 B"),
        (512, "512 B"),
        (1024, "1,024 B (1.0 KiB)"),
        (99_840, "99,840 B (97.5 KiB)"),
        (2 * 1024**2, "2,097,152 B (2.0 MiB)"),
        (3 * 1024**3, "3,221,225,472 B (3.0 GiB)"),
    ],
)
def test_format_size(n: int, text: str) -> None:
    assert format_size(n) == text


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"name": "dtcm", "size": 0}, "pool 'dtcm': size: expected a positive number of bytes, got 0"),
        ({"name": "dtcm", "size": True}, "pool 'dtcm': size: expected a positive number of bytes, got True"),
        (
            {"name": "dtcm", "size": "64KiB"},
            "pool 'dtcm': size: expected a positive number of bytes, got '64KiB'",
        ),
        ({"name": "", "size": 1}, "pool name: expected an identifier such as 'dtcm' or 'sram', got ''"),
        ({"name": "a b", "size": 1}, "pool name: expected an identifier such as 'dtcm' or 'sram', got 'a b'"),
        (
            {"name": "dtcm", "size": 1, "read_cost": -1.0},
            "pool 'dtcm': read_cost: expected a non-negative number, got -1.0",
        ),
        (
            {"name": "dtcm", "size": 1, "write_cost": float("nan")},
            "pool 'dtcm': write_cost: expected a non-negative number, got nan",
        ),
    ],
)
def test_pool_validation(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError) as info:
        Pool(**kwargs)  # type: ignore[arg-type]
    assert str(info.value) == message


def test_pool_is_frozen() -> None:
    pool = Pool("dtcm", 64, read_cost=0.5)
    with pytest.raises(AttributeError):
        pool.size = 1  # type: ignore[misc]
