"""The registry: names, defaults, get, and its error messages."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from autotune import workloads
from autotune.errors import ConfigError
from autotune.workloads import registry

KNOWN = "bottleneck, matmul, pool_chain, resize_conv, tiny_cnn"


def test_names_are_sorted_and_complete() -> None:
    assert workloads.names() == ["bottleneck", "matmul", "pool_chain", "resize_conv", "tiny_cnn"]


def test_describe_gives_the_defaults() -> None:
    assert workloads.describe("pool_chain") == {"height": 132, "width": 132, "channels": 64}
    assert workloads.describe("bottleneck") == {"height": 112, "width": 112, "cin": 16, "expand": 96}
    assert workloads.describe("resize_conv") == {"channels": 16, "height": 512, "width": 512}
    assert workloads.describe("matmul") == {"m": 1024, "n": 1024, "k": 1024}
    assert workloads.describe("tiny_cnn") == {"height": 96, "width": 96}


def test_describe_returns_a_copy() -> None:
    workloads.describe("pool_chain")["height"] = 1
    assert workloads.describe("pool_chain")["height"] == 132


def test_every_workload_has_a_description() -> None:
    for name in workloads.names():
        assert workloads.description(name)


def test_get_overrides_defaults() -> None:
    wl = workloads.get("pool_chain", height=20, width=20, channels=8)
    assert wl.name == "pool_chain"
    assert wl.params == {"height": 20, "width": 20, "channels": 8}
    assert wl.description == workloads.description("pool_chain")
    assert [b.const_shape() for b in wl.func.params] == [(1, 20, 20, 8), (1, 16, 16, 8)]
    assert workloads.get("pool_chain", height=20).params == {"height": 20, "width": 132, "channels": 64}


def test_unknown_workload_suggests_the_closest_name() -> None:
    msg = f"unknown workload 'pool_chian' (did you mean 'pool_chain'?); known workloads: {KNOWN}"
    with pytest.raises(ConfigError) as info:
        workloads.get("pool_chian")
    assert str(info.value) == msg


def test_unknown_workload_without_a_close_match() -> None:
    with pytest.raises(ConfigError) as info:
        workloads.describe("xyz")
    assert str(info.value) == f"unknown workload 'xyz'; known workloads: {KNOWN}"


def test_unknown_parameter_names_workload_parameter_and_accepted_ones() -> None:
    with pytest.raises(ConfigError) as info:
        workloads.get("pool_chain", heigth=20)
    assert str(info.value) == (
        "workload 'pool_chain' has no parameter 'heigth' (did you mean 'height'?); "
        "accepted parameters: height, width, channels"
    )
    with pytest.raises(ConfigError) as info:
        workloads.get("matmul", batch=2)
    assert str(info.value) == "workload 'matmul' has no parameter 'batch'; accepted parameters: m, n, k"


@pytest.mark.parametrize("value", [0, -3, 2.5, "8", True, None])
def test_parameter_values_must_be_positive_ints(value: object) -> None:
    with pytest.raises(ConfigError) as info:
        workloads.get("matmul", m=value)
    assert str(info.value) == f"workload 'matmul': parameter 'm' must be a positive integer, got {value!r}"


def test_parameters_the_chain_cannot_take_are_a_config_error() -> None:
    with pytest.raises(ConfigError) as info:
        workloads.get("pool_chain", height=4, width=8, channels=2)
    assert str(info.value) == (
        "workload 'pool_chain' cannot be built with height=4, width=8, channels=2: "
        "max_pool2d: a 3-wide window does not fit an input of 2 padded by 0"
    )


def test_workload_is_frozen() -> None:
    wl = workloads.get("matmul", m=2, n=3, k=4)
    with pytest.raises(dataclasses.FrozenInstanceError):
        wl.flops = 0  # type: ignore[misc]


def test_make_inputs_is_seeded_float32_and_scaled() -> None:
    wl = workloads.get("bottleneck", height=6, width=5, cin=4, expand=8)
    a, b = wl.make_inputs(3), wl.make_inputs(3)
    c = wl.make_inputs(4)
    assert [x.shape for x in a] == [buf.const_shape() for buf in wl.func.inputs]
    assert all(x.dtype == np.float32 for x in a)
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    assert not np.array_equal(a[0], c[0])
    data, w_expand, w_dw, w_project = a
    assert np.abs(data).max() <= 1.0 and np.abs(data).max() > 0.5
    assert np.abs(w_expand).max() <= 1 / np.sqrt(4)
    assert np.abs(w_dw).max() <= 1 / 3
    assert np.abs(w_project).max() <= 1 / np.sqrt(8)
    assert wl.input_scales == (1.0, 0.5, 1 / 3, 1 / np.sqrt(8))


def test_register_checks_builder_signature_and_duplicates(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))

    def builder(size: int) -> registry.Chain:
        raise AssertionError("not built")

    with pytest.raises(ValueError, match=r"builder takes \['size'\], defaults give \['n'\]"):
        registry.register("extra", "an extra chain", n=4)(builder)
    registry.register("extra", "an extra chain", size=4)(builder)
    assert "extra" in workloads.names()
    with pytest.raises(ValueError, match="'extra' is registered twice"):
        registry.register("extra", "again", size=4)(builder)


def test_chain_checks_one_scale_per_input() -> None:
    func = workloads.get("matmul", m=2, n=2, k=2).func
    with pytest.raises(ValueError, match="1 input scales for 2 inputs"):
        registry.Chain(func, lambda a, b: (a @ b,), 16, (1.0,))


def test_get_is_deterministic() -> None:
    a, b = workloads.get("tiny_cnn", height=8, width=8), workloads.get("tiny_cnn", height=8, width=8)
    assert a.func is not b.func
    assert str(a.func) == str(b.func)
    assert (a.flops, a.intermediate_bytes) == (b.flops, b.intermediate_bytes)
