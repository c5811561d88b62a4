"""The config text that the config error tests edit, and the writer of the edited files."""

from __future__ import annotations

from pathlib import Path

WORKLOAD = "{name: pool_chain, args: {height: 20, width: 20, channels: 4}}"
"""The workload line of :func:`base_config`, for the tests that replace it."""


def base_config(trials: int) -> str:
    """A good config: pool_chain, pools dtcm 64 KiB and sram 2 MiB, ``trials`` trials of the cascade space.

    One field a line, so a test makes its mistake with one ``str.replace`` and
    the error names a line it can know.
    """
    return f"""\
name: demo
workload: {WORKLOAD}
memory:
  pools:
    - {{name: dtcm, size: 64KiB}}
    - {{name: sram, size: 2MiB}}
search:
  space: cascade
  trials: {trials}
"""


def write_config(tmp_path: Path, text: str, name: str = "bad.yaml") -> Path:
    """Write ``text`` to ``tmp_path/name`` and return the path."""
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path
