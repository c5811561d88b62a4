"""A Ray address that cannot be reached is refused at once, naming it, and nothing is written."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
import yaml

from autotune import cli
from autotune.errors import ConfigError
from autotune.search.executors import check_reachable


def free_loopback_port() -> int:
    """A loopback port that nobody listens on (bound and released again)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.timeout(120)  # Ray's own ray.init retried such an address for minutes
def test_unreachable_ray_address_fails_with_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = {
        "workload": {"name": "pool_chain", "args": {"height": 12, "width": 12, "channels": 4}},
        "memory": {"pools": [{"name": "sram", "size": "64KiB"}]},
        "search": {"space": "cascade", "trials": 2},
    }
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    out = tmp_path / "out" / "run"
    address = f"127.0.0.1:{free_loopback_port()}"
    code = cli.main(["run", str(path), "--ray-address", address, "--output", str(out), "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith(f"autotune: error: ray address {address!r}: cannot connect to {address} within ")
    assert "Leave the address out to start a local Ray" in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()
    for scheme in ("ray://", ""):  # Ray Client's address, and one given without a scheme
        with pytest.raises(ConfigError, match=r"cannot connect to 127\.0\.0\.1:"):
            check_reachable(f"{scheme}{address}", timeout=5)


@pytest.mark.parametrize("address", ["host:port", "ray://:10001", "10.0.0.1:70000", "h:"])
def test_malformed_ray_address_is_refused(address: str) -> None:
    with pytest.raises(ConfigError, match=r"expected auto, HOST:PORT or ray://HOST:PORT"):
        check_reachable(address)
