"""A workload whose worker announces its pid and then waits to be killed, loaded by path.

``announcing_pool_chain(pidfile=...)`` is the built-in ``pool_chain`` whose
numpy reference, the first time any process computes it, writes that process's
pid to ``pidfile`` and sleeps. The reference runs only in the worker that
measures a task (the driver never calls it), so a test can wait for the file,
``SIGKILL`` the pid it names, and watch the executor and the tuner deal with a
worker that vanished in the middle of a task. Every later worker finds the
file already there and measures normally.
"""

from __future__ import annotations

import dataclasses
import os
import time
from pathlib import Path

import numpy as np

from autotune import workloads
from autotune.workloads import Workload

FILE = str(Path(__file__).resolve())


def announce_once(pidfile: str, sleep_s: float) -> None:
    """Write this pid to ``pidfile`` and sleep ``sleep_s``, unless some process already did.

    The pid goes to a private file first, which is then hard-linked to
    ``pidfile``: the link either fails (someone else announced) or makes a
    complete file appear at once, so a reader never sees it half written.
    """
    target = Path(pidfile)
    mine = target.with_name(f"{target.name}.{os.getpid()}")
    mine.write_text(f"{os.getpid()}\n", encoding="utf-8")
    try:
        os.link(mine, target)
    except FileExistsError:
        return
    finally:
        mine.unlink()
    deadline = time.monotonic() + sleep_s
    while time.monotonic() < deadline:  # killed long before this ends
        time.sleep(0.05)


def announcing_pool_chain(
    pidfile: str, height: int = 12, width: int = 10, channels: int = 4, sleep_s: float = 120.0
) -> Workload:
    """``pool_chain`` whose reference announces the first worker's pid to ``pidfile``, then sleeps."""
    wl = workloads.get("pool_chain", height=height, width=width, channels=channels)
    inner = wl.reference

    def reference(*arrays: np.ndarray) -> tuple[np.ndarray, ...]:
        announce_once(pidfile, sleep_s)
        return tuple(inner(*arrays))

    return dataclasses.replace(wl, reference=reference)
