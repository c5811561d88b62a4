"""Target: what the space families read of the machine, from the host or a record, and what they do with it."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from autotune.config import SPACES_DIR
from autotune.search.space import load_space
from autotune.search.target import Target, _size
from autotune.workloads import get

AVX2 = Target("znver3", 2, 256, 16, 64, 32768, 524288, 33554432)
AVX512 = Target("znver5", 2, 512, 32, 64, 49152, 1048576, 33554432)


@pytest.mark.host_target
def test_the_host_target_is_read_from_the_machine() -> None:
    host = Target.host()
    assert host.cores >= 1 and host.vector_bits in (256, 512) and host.vector_registers in (16, 32)
    assert host.register_floats == host.vector_registers * host.vector_bits // 32
    assert Target.from_json(host.to_json()) == host


def test_register_file_and_parallel_parts() -> None:
    assert AVX2.register_floats == 128 and AVX512.register_floats == 512
    assert replace(AVX2, cores=1).parallel_parts == 1 and AVX512.parallel_parts == 2


def test_sizes_from_sysfs() -> None:
    assert (_size("48K"), _size("1024K"), _size("32M\n")) == (49152, 1048576, 33554432)


def test_a_record_with_a_missing_or_unknown_field_is_refused() -> None:
    data = AVX2.to_json()
    del data["cores"]
    with pytest.raises(ValueError, match=r"target: unknown fields \[\], missing fields \['cores'\]"):
        Target.from_json(data)
    with pytest.raises(ValueError, match=r"unknown fields \['gpu'\]"):
        Target.from_json({**AVX2.to_json(), "gpu": 1})


def test_differences_name_each_field() -> None:
    assert AVX2.differences(AVX512) == [
        "llvm_cpu: znver3 -> znver5",
        "vector_bits: 256 -> 512",
        "vector_registers: 16 -> 32",
        "l1d_bytes: 32768 -> 49152",
        "l2_bytes: 524288 -> 1048576",
    ]
    assert AVX2.differences(AVX2) == []


def test_the_space_follows_the_target() -> None:
    """Register tiles up to the register file; a parallel loop in as many parts as cores."""
    wl = get("bottleneck", height=8, width=8, cin=4, expand=8)
    avx2 = {k.name: k.choices for k in load_space(SPACES_DIR / "cascade.yaml", wl, (), AVX2).knobs}
    assert avx2["regtile_expand"] == (0, 1, 2, 4, 8, 16)  # 8 channels a tile: 128 accumulators at most
    wide = get("bottleneck", height=8, width=8, cin=4, expand=64)
    narrow = {k.name: k.choices for k in load_space(SPACES_DIR / "cascade.yaml", wide, (), AVX2).knobs}
    roomy = {k.name: k.choices for k in load_space(SPACES_DIR / "cascade.yaml", wide, (), AVX512).knobs}
    # channel blocks of whole vectors: 8 lanes on AVX2, 16 on AVX-512
    assert narrow["chblock_expand"] == (64, 32, 16, 8) and roomy["chblock_expand"] == (64, 32, 16)
    assert narrow["regtile_expand"] == (0, 1, 2, 4, 8, 16) and roomy["regtile_expand"] == (0, 1, 2, 4, 8, 16)
    small_file = replace(AVX2, vector_registers=4)  # 32 floats: 4 columns of 8 channels at most
    few = {k.name: k.choices for k in load_space(SPACES_DIR / "cascade.yaml", wide, (), small_file).knobs}
    assert few["regtile_expand"] == (0, 1, 2, 4)
    four = load_space(SPACES_DIR / "cascade.yaml", wl, (), replace(AVX2, cores=4))
    sch = four.apply(wl.func, {"parallel": "outer", "tile_rows": 1})
    split = next(step for step in sch.trace if step.op != "sample")
    assert split.op == "split" and dict(split.args)["factors"][0] == 4


def test_check_says_when_a_best_json_was_tuned_on_another_target(tmp_path) -> None:
    from autotune.cli.check import target_note

    best = tmp_path / "best.json"
    best.write_text(json.dumps({"trace": [], "target": AVX2.to_json()}))
    assert target_note(str(best), host=AVX512) == (
        f"note: {best} was tuned on another target (llvm_cpu: znver3 -> znver5; vector_bits: 256 -> 512; "
        "vector_registers: 16 -> 32; l1d_bytes: 32768 -> 49152; l2_bytes: 524288 -> 1048576): re-tune it for this machine"
    )
    assert target_note(str(best), host=AVX2) is None
    plain = tmp_path / "trace.json"
    plain.write_text("[]")
    assert target_note(str(plain), host=AVX512) is None  # a trace alone records no target
