"""A tuning run on a real multi-node Ray cluster (all nodes on this machine), joined by address;
and the deadlines of tasks that may wait for the other workers' timed parts.

``ray.cluster_utils.Cluster`` starts a head and two worker nodes as separate
raylets. The tuner connects with ``ray.address`` set to the cluster's GCS
address, which is the :class:`~autotune.search.executors.RayExecutor` path that
ships the ``autotune`` package to the workers as a ``runtime_env`` py_module.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from search_runs import write_run_config

from autotune.config import load_config
from autotune.measure.task import MeasureTask
from autotune.search.executors import task_limit
from autotune.search.log import TrialLog
from autotune.search.tuner import tune

MEASURED = ("ok", "wrong", "crashed", "timeout", "error")


def test_a_task_that_times_under_the_lock_may_wait_for_every_other_worker() -> None:
    task = MeasureTask("w", (), None, "{}", (), timeout=10.0)
    assert task_limit(task, workers=1, allowance=20.0) == 30.0
    assert task_limit(task, workers=3, allowance=20.0) == 50.0  # two others may time first
    unlocked = MeasureTask("w", (), None, "{}", (), timeout=10.0, lock_timing=False)
    assert task_limit(unlocked, workers=3, allowance=20.0) == 30.0


@pytest.fixture
def cluster() -> Iterator[Any]:
    """A head with 0 CPUs and two worker nodes with 1 CPU each; shut down afterwards.

    The head gets no CPU so that no measurement task (1 CPU each) can run on
    it: the two tasks in flight must then take one worker node each, and the
    log must show two node ids. With a CPU on the head, Ray's scheduler prefers
    the driver's node and could put everything on the head and one worker.
    """
    import ray
    from ray.cluster_utils import Cluster

    if ray.is_initialized():  # the executor must connect by address, not reuse a session
        ray.shutdown()
    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 0})
    try:
        workers = [c.add_node(num_cpus=1) for _ in range(2)]
        c.wait_for_nodes()
        yield c, {node.node_id for node in workers}
    finally:
        if ray.is_initialized():
            ray.shutdown()
        c.shutdown()


def write_config(tmp_path: Path, address: str) -> Path:
    """pool_chain on a 16x16x4 image, one round of 6 random trials, run on the cluster at ``address``."""
    workload = {"name": "pool_chain", "args": {"height": 16, "width": 16, "channels": 4}}
    memory = {"pools": [{"name": "sram", "size": "2MiB"}], "peak_limit": None}
    knobs = dict(trials=6, sampler="random", cost_model="none", seed=1, batch=6, measure_per_round=6)
    return write_run_config(
        tmp_path, "cluster", workload, memory=memory, address=address, output=tmp_path / "out", **knobs
    )


@pytest.mark.slow
def test_a_run_spreads_over_the_nodes_and_remeasures_on_one(tmp_path: Path, cluster: Any) -> None:
    c, worker_nodes = cluster
    cfg = load_config(write_config(tmp_path, c.address))
    result = tune(cfg, progress=False)  # executor "ray" with cfg.ray.address: connects, ships the package

    logged = TrialLog.load(cfg.output / "trials.jsonl")
    measured = [r for r in logged if r.status in MEASURED]
    # a trial may time out when other work keeps the machine's cores busy (its limit grows with the
    # load average, which lags a burst); anything else is a fault
    assert all(r.status in ("ok", "timeout") for r in measured), [(r.status, r.reason) for r in measured]
    ran = [r for r in measured if r.ok]
    assert len(ran) >= 2 and {r.node for r in ran} == worker_nodes  # both worker nodes measured, the head none

    best = json.loads((cfg.output / "best.json").read_text())
    nodes = {best["figures"]["node"], best["default"]["node"]}
    nodes |= {f["node"] for f in best["remeasure"]["candidates"]}
    assert len(nodes) == 1 and nodes <= worker_nodes  # one remeasure task, on one worker node
    assert result.figures.node in worker_nodes

    # the workers imported the package that the executor shipped, not the one in this checkout
    shipped = Path(c.head_node.get_session_dir_path()) / "runtime_resources" / "py_modules_files"
    assert list(shipped.glob("*/autotune/measure/timing.py")), "autotune was not shipped as a py_module"

    assert result.driver is not None and result.driver.total_s > 0
    assert result.driver.wait_s > 0
