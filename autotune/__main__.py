"""``python -m autotune``: the ``autotune`` command (see :mod:`autotune.cli`)."""

from __future__ import annotations

from autotune.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
