"""Sizes in configs and in --pools: IEC KiB/MiB/GiB, SI kB/MB/GB, and KB (ambiguous) refused with a hint."""

from __future__ import annotations

from pathlib import Path

import pytest

from autotune import cli
from autotune.config import load_config
from autotune.errors import ConfigError
from autotune.memory import parse_pools, parse_size
from autotune.search import tuner as tuner_module


@pytest.mark.parametrize(
    ("text", "size"),
    [("32KiB", 32 * 1024), ("32 kib", 32 * 1024), ("2MiB", 2 << 20), ("1GiB", 1 << 30),
     ("32kB", 32_000), ("2MB", 2_000_000), ("1GB", 10**9), ("100B", 100), ("100", 100)],
)  # fmt: skip
def test_iec_and_si_units(text: str, size: int) -> None:
    assert parse_size(text) == size


AMBIGUOUS = {
    "32KB": "'32KB' is ambiguous (KB means 1000 or 1024 to different readers); "
    "write 32KiB (32,768 bytes) or 32kB (32,000 bytes)",
    "32kb": "'32kb' is ambiguous (kb means 1000 or 1024 to different readers); "
    "write 32KiB (32,768 bytes) or 32kB (32,000 bytes)",
    "2mb": "'2mb' is ambiguous (mb means 1000 or 1024 to different readers); "
    "write 2MiB (2,097,152 bytes) or 2MB (2,000,000 bytes)",
    "1Gb": "'1Gb' is ambiguous (Gb means 1000 or 1024 to different readers); "
    "write 1GiB (1,073,741,824 bytes) or 1GB (1,000,000,000 bytes)",
}


@pytest.mark.parametrize("text", list(AMBIGUOUS))
def test_an_ambiguous_unit_is_refused_with_both_spellings(text: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_size(text, "pools[0].size")
    assert str(info.value) == f"pools[0].size: {AMBIGUOUS[text]}"


def test_zero_kb_is_not_a_size() -> None:
    with pytest.raises(
        ConfigError, match=r"expected a positive size such as 65536, 64KiB or 2MiB, got '0KB'"
    ):
        parse_size("0KB")


def test_ambiguous_size_in_a_config_names_file_line_and_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("tuning started")

    monkeypatch.setattr(tuner_module, "make_executor", refuse)
    config = tmp_path / "run.yaml"
    config.write_text(
        "workload: {name: pool_chain, args: {height: 12, width: 12, channels: 2}}\n"
        "memory:\n"
        "  pools: [{name: dtcm, size: 64KiB}]\n"
        "  peak_limit: 32KB\n"
        "search: {space: cascade, trials: 4}\n"
        "output: out\n",
        encoding="utf-8",
    )
    with pytest.raises(ConfigError) as info:
        load_config(config)
    expected = f"{config}:4: memory.peak_limit: {AMBIGUOUS['32KB']}"
    assert str(info.value) == expected
    assert cli.main(["run", str(config), "--no-progress"]) == 2
    out, err = capsys.readouterr()
    assert (out, err) == ("", f"autotune: error: {expected}\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.yaml"]


def test_ambiguous_size_in_pools_flag(capsys: pytest.CaptureFixture[str]) -> None:
    assert parse_pools("dtcm=64KiB,sram=2MB")[1].size == 2_000_000
    code = cli.main(["check", "pool_chain", "--pools", "dtcm=64KiB,sram=2Mb"])
    out, err = capsys.readouterr()
    assert (code, out) == (2, "")
    assert err == (
        "autotune: error: pools[1].size: '2Mb' is ambiguous (Mb means 1000 or 1024 to different readers); "
        "write 2MiB (2,097,152 bytes) or 2MB (2,000,000 bytes)\n"
    )
