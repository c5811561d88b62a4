"""The tuner end to end: a Ray run through the CLI, seeding, resume, failing candidates, peak limits.

Most runs use :class:`InProcess`, an executor that measures in the test
process (no worker start-up, and numba's disk cache is shared), to keep the
module under a minute; one run goes through Ray with two workers.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from search_runs import POOLS, InProcess, write_run_config

from autotune import cli
from autotune.config import RunConfig, load_config
from autotune.config.workload import load_workload
from autotune.errors import AutotuneError, ConfigError
from autotune.measure.result import MeasureResult
from autotune.search.log import TrialLog
from autotune.search.space import load_space
from autotune.search.target import Target
from autotune.search.tuner import tune

pytestmark = pytest.mark.slow

WORKLOAD = {"name": "pool_chain", "args": {"height": 20, "width": 20, "channels": 8}}


def write_config(tmp_path: Path, name: str = "run", **search: Any) -> Path:
    """A small pool_chain config in ``tmp_path``; ``search`` overrides the search section."""
    memory = {"pools": POOLS, "peak_limit": search.pop("peak_limit", "12KiB")}
    knobs = {"trials": 6, "cost_model": "xgboost", "seed": 3, "batch": 8, "measure_per_round": 3, **search}
    return write_run_config(tmp_path, name, WORKLOAD, memory=memory, **knobs)


def records(out: Path) -> list[Any]:
    return TrialLog.load(out / "trials.jsonl")


def measured(logged: list[Any]) -> list[Any]:
    """The trials that use the budget: all but the infeasible ones."""
    return [r for r in logged if r.status != "infeasible"]


# ---------------------------------------------------------------- end to end, on Ray, through the CLI


def test_ray_run_through_the_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg_path = write_config(tmp_path, "ray", trials=20)
    out = tmp_path / "out"
    argv = ["run", str(cfg_path), "--trials", "8", "--workers", "2", "--output", str(out), "--no-progress"]
    assert cli.main(argv) == 0
    printed = capsys.readouterr().out
    logged = records(out)
    measured = [r for r in logged if r.status != "infeasible"]  # infeasible ones do not use the budget
    assert len(measured) == 8 and len({r.trial for r in logged}) == len(logged)
    assert {r.node for r in logged if r.ok} - {""}  # measured on Ray nodes
    for name in ("best.json", "best_ir.txt", "best_kernel.py", "report.md", "trials.parquet", "trials.csv",
                 "convergence.png", "pareto.png", "pools.png"):  # fmt: skip
        assert (out / name).stat().st_size > 0, name
    best = json.loads((out / "best.json").read_text())
    by_trial = {r.trial: r for r in logged}
    assert by_trial[best["trial"]].status == "ok"
    assert best["key"] not in {r.key for r in logged if r.status == "wrong"}
    assert best["figures"]["peak_bytes"] <= 12 * 1024
    assert best["speedup"] > 0 and best["memory_ratio"] > 0
    assert Target.from_json(best["target"]) == Target.host()  # the machine it was tuned for
    assert "T.prim_func" in (out / "best_ir.txt").read_text()
    # faster or slower: at 8 trials of a tiny kernel, on cores shared with other tests, either happens
    assert re.search(r"^best: .+, [0-9.]+x (faster|slower) than the default schedule", printed, re.M)
    assert "of its workspace" in printed or "its workspace" in printed
    # the trace in best.json replays: `autotune show --trace` reads it
    assert cli.main(["show", "pool_chain", "--param", "height=20", "--param", "width=20",
                     "--param", "channels=8", "--trace", str(out / "best.json")]) == 0  # fmt: skip
    # a second run into the same directory refuses to start
    assert cli.main(argv) == 2
    assert "already holds a run" in capsys.readouterr().err


# ---------------------------------------------------------------- seeding, cost models


def round_zero(out: Path) -> list[tuple[Any, ...]]:
    return sorted((r.trial, r.knobs, r.key, r.status) for r in records(out) if r.round == 0)


def test_xgboost_and_none_propose_the_same_first_round(tmp_path: Path) -> None:
    runs = {}
    for model in ("xgboost", "none"):
        cfg = load_config(
            write_config(tmp_path, model, cost_model=model, trials=4, batch=4, measure_per_round=4)
        )
        result = tune(cfg, progress=False, executor=InProcess())
        assert result.best.ok and (cfg.output / "best.json").exists()
        runs[model] = round_zero(cfg.output)
        assert len(measured(records(cfg.output))) == 4
    # the same proposals (two of them may give one schedule: it is measured once)
    assert runs["xgboost"] == runs["none"]
    assert len(runs["none"]) >= 2


# ---------------------------------------------------------------- resume


def identity(record: Any) -> Any:
    """A trial's schedule (its trace key), or its knobs when it has none (invalid)."""
    return record.knobs if record.status == "invalid" else record.key


def test_resume_after_a_kill_measures_nothing_twice(tmp_path: Path) -> None:
    cfg = load_config(write_config(tmp_path, "resume", trials=6))
    tune(cfg, progress=False, executor=InProcess())
    log = cfg.output / "trials.jsonl"
    lines = log.read_bytes().splitlines(keepends=True)
    assert len(measured(records(cfg.output))) == 6 and len(lines) >= 6
    log.write_bytes(b"".join(lines[:3]) + lines[3][: len(lines[3]) // 2])  # killed while writing trial 4
    with pytest.raises(AutotuneError, match="already holds a run"):
        tune(cfg, progress=False, executor=InProcess())
    before = [identity(r) for r in records(cfg.output)]
    assert len(before) == 3
    executor = InProcess()
    tune(cfg, resume=True, progress=False, executor=executor)
    after = records(cfg.output)
    assert len(measured(after)) == 6
    ids = [identity(r) for r in after]
    assert len(set(ids)) == len(after) and ids[:3] == before
    assert len({r.key for r in after if r.status != "invalid"}) == sum(r.status != "invalid" for r in after)
    assert executor.calls == sum(1 for r in after[3:] if r.status not in ("infeasible", "invalid"))
    assert len({r.trial for r in after}) == len(after)


# ---------------------------------------------------------------- failing candidates


def test_crashed_and_hung_candidates_are_trials(tmp_path: Path) -> None:
    crash = MeasureResult.failure("crashed", "the worker died: exit code -11 (killed by SIGSEGV)")
    hang = MeasureResult.failure("timeout", "no result after 30 s; the worker was killed")
    wrong = MeasureResult(status="wrong", max_abs_err=3.0)
    cfg = load_config(write_config(tmp_path, "failing", trials=8, cost_model="none", measure_per_round=8))
    result = tune(cfg, progress=False, executor=InProcess({0: crash, 1: hang, 2: wrong}))
    by_status = {r.status: r for r in records(cfg.output)}
    assert by_status["crashed"].reason.startswith("the worker died")
    assert by_status["timeout"].reason.startswith("no result")
    assert by_status["wrong"].reason == "max_abs_err 3"
    assert result.best.ok and result.best.key not in {
        by_status[s].key for s in ("crashed", "timeout", "wrong")
    }


def test_every_candidate_failing_is_an_error_after_logging(tmp_path: Path) -> None:
    crash = MeasureResult.failure("crashed", "the worker died: exit code -11")
    cfg = load_config(write_config(tmp_path, "allbad", trials=3, cost_model="none", peak_limit=None))
    with pytest.raises(
        AutotuneError, match=r"no trial was ok \(\d+ crashed(, \d+ infeasible)?\); the reasons are in"
    ):
        tune(cfg, progress=False, executor=InProcess(dict.fromkeys(range(10), crash)))
    assert len(measured(records(cfg.output))) == 3


# ---------------------------------------------------------------- peak limit


def test_infeasible_trials_carry_their_peak(tmp_path: Path) -> None:
    cfg: RunConfig = load_config(write_config(tmp_path, "infeasible", trials=6, peak_limit="4KiB"))
    tune(cfg, progress=False, executor=InProcess())
    logged = records(cfg.output)
    infeasible = [r for r in logged if r.status == "infeasible"]
    assert infeasible, "the 4 KiB limit rules out most tiles"
    assert len(measured(logged)) == 6  # the budget counts measured trials only
    for r in infeasible:
        assert r.peak_bytes is not None and r.reason
        assert r.peak_bytes > 4096 or "overflow" in r.reason
        assert r.median_ms is None and r.node == ""
    assert all(r.peak_bytes <= 4096 for r in logged if r.ok)


def test_knobs_that_do_not_matter_are_recorded_at_their_default(tmp_path: Path) -> None:
    # jam_<stage> only matters with unroll_<stage> on and fuse_<stage> off: elsewhere it is not sampled
    cfg = load_config(write_config(tmp_path, "conditional", trials=16, cost_model="none", peak_limit=None))
    tune(cfg, progress=False, executor=InProcess())
    logged = [dict(r.knobs) for r in records(cfg.output)]
    assert len(measured(records(cfg.output))) == 16
    for stage in ("pool1", "pool2"):
        dead = [k for k in logged if not k[f"unroll_{stage}"] or k[f"fuse_{stage}"]]
        assert dead and all(k[f"jam_{stage}"] == 1 for k in dead)
    # and a resumed run hands Optuna the same (active) parameters without complaint
    more = load_config(write_config(tmp_path, "conditional", trials=20, cost_model="none", peak_limit=None))
    tune(more, progress=False, executor=InProcess(), resume=True)
    assert len(measured(records(cfg.output))) == 20


# ---------------------------------------------------------------- mutation


def test_mutation_enqueues_neighbours_of_the_best_trials(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import optuna

    enqueued: list[tuple[int, dict[str, Any]]] = []  # (trials logged before, knobs)
    real = optuna.study.Study.enqueue_trial

    def spy(self: Any, params: dict[str, Any], *args: Any, **kwargs: Any) -> None:
        enqueued.append((len(records(tmp_path / "mut")), dict(params)))
        real(self, params, *args, **kwargs)

    monkeypatch.setattr(optuna.study.Study, "enqueue_trial", spy)
    cfg = load_config(
        write_config(tmp_path, "mut", trials=12, cost_model="none", mutation=1.0, peak_limit=None)
    )
    tune(cfg, progress=False, executor=InProcess())
    logged = records(cfg.output)
    space = load_space(cfg.search.space, load_workload(cfg.workload), cfg.memory.pools)
    assert len(enqueued) >= 3
    for before, knobs in enqueued:
        ok = sorted((r for r in logged[:before] if r.status == "ok"), key=lambda r: (r.median_ms, r.trial))[
            :4
        ]
        assert ok, "a mutation before any ok trial"
        # at most two knobs away from one of them (a knob switched off takes its dependants back to
        # their defaults, one switched on has them drawn; a mutant of one parent may also be
        # another of the four)
        changed = min(
            sum(
                1 for k, v in knobs.items() if dict(p.knobs)[k] != v and k not in _dependants(space, p, knobs)
            )
            for p in ok
        )
        assert changed <= 2, (knobs, [p.knobs for p in ok])
    # mutation 0 (the default) leaves the sampler alone
    enqueued.clear()
    cfg = load_config(write_config(tmp_path, "plain", trials=6, cost_model="none", peak_limit=None))
    tune(cfg, progress=False, executor=InProcess())
    assert not enqueued


def _dependants(space: Any, parent: Any, child: dict[str, Any]) -> set[str]:
    """The knobs of the space that a changed knob switched on or off (jam_ and jamrows_ on unroll_
    and fuse_, mode_ on at_, copy_pad on parallel): switched off, they follow to their defaults;
    switched on, they are drawn. Neither is a mutation of its own."""
    p = dict(parent.knobs)
    return set(space.active_values(p)) ^ set(space.active_values({**p, **child}))


def test_warm_start_proposes_an_earlier_best_first(tmp_path: Path) -> None:
    first = load_config(write_config(tmp_path, "first", trials=4, cost_model="none", peak_limit=None))
    best = json.loads((tune(first, progress=False, executor=InProcess()).output / "best.json").read_text())
    cfg = load_config(
        write_config(
            tmp_path,
            "warm",
            trials=3,
            cost_model="none",
            peak_limit=None,
            seed=11,
            warm_start="first/best.json",
        )
    )
    assert cfg.search.warm_start == (tmp_path / "first" / "best.json").resolve()
    tune(cfg, progress=False, executor=InProcess())
    again = [r for r in records(cfg.output) if r.key == best["key"]]  # the same schedule, measured again
    assert len(again) == 1 and again[0].round == 0 and again[0].status == "ok"
    # a value the space does not offer names the file and the knob; nothing is logged
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"knobs": {**best["knobs"], "strip": 5}}))
    cfg = load_config(
        write_config(tmp_path, "bad", trials=3, cost_model="none", peak_limit=None, warm_start="bad.json")
    )
    message = f"{bad}: search.warm_start: knob 'strip' is 5, not one of its choices [0, 4, 8]"
    with pytest.raises(ConfigError, match=re.escape(message)):
        tune(cfg, progress=False, executor=InProcess())
    assert not (tmp_path / "bad" / "trials.jsonl").exists()
