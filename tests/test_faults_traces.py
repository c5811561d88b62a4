"""Bad traces and bad schedule calls: each one is a ScheduleError with an exact message, never a crash.

Traces come from files (``best.json``, ``--trace``), so the loader must turn
anything a file can hold into a ScheduleError: a trace that does not apply to
the workload, a newer format version, JSON nested thousands deep, an integer
of 5000 digits, a step argument named ``op``. The schedule primitives name
the missing block, loop or buffer. The fuzz test here feeds whole files to
``load_trace`` (``tests/schedule/test_schedule_trace_fuzz.py`` fuzzes
``Schedule.replay`` on documents).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autotune import cli, workloads
from autotune.errors import ScheduleError
from autotune.schedule import PRIMITIVES, Schedule
from autotune.schedule.schedule import load_trace

POOL = workloads.get("pool_chain", height=8, width=6, channels=2)
NECK = workloads.get("bottleneck", height=8, width=8, cin=4, expand=8)
POOL_LOOPS = "n, y, x, c, rh, rw, n_1, y_1, x_1, c_1, rh_1, rw_1"


def rolling_pool_trace() -> dict[str, Any]:
    """A trace of pool_chain: pool1 at a 4-row tile of pool2, as a rolling buffer."""
    sch = Schedule(POOL.func)
    sch = sch.split(sch.get_loops("pool2")[1], [None, 4])
    sch = sch.compute_at("pool1", sch.last[0]).rolling_buffer("pool1", 0)
    return json.loads(sch.trace_json())  # type: ignore[no-any-return]


def write_best(path: Path, trace: Any) -> Path:
    """A ``best.json`` as a run writes it (the trace under ``trace``, beside its figures)."""
    path.write_text(json.dumps({"trial": 3, "trace": trace, "median_ms": 0.01, "peak_bytes": 768}))
    return path


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# ---------------------------------------------------------------- traces through the CLI


def test_best_json_of_another_workload_does_not_apply(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    best = write_best(tmp_path / "best.json", rolling_pool_trace())
    matmul = ["matmul", "--param", "m=8", "--param", "n=8", "--param", "k=8"]
    code, out, err = run_cli(capsys, "show", *matmul, "--trace", str(best))
    assert (code, out) == (2, "")
    assert (
        err == "autotune: error: split: trace step 0 does not apply: no loop named 'y_1' (loops: i, j, k)\n"
    )


def test_best_json_from_a_newer_format_version(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    best = write_best(tmp_path / "best.json", {**rolling_pool_trace(), "version": 2})
    code, out, err = run_cli(capsys, "show", "pool_chain", "--trace", str(best))
    assert (code, out) == (2, "")
    assert err == f"autotune: error: trace: {best}: trace format version 2 is newer than this autotune (1)\n"


@pytest.mark.parametrize(
    ("version", "message"),
    [
        (0, "'version' must be 1, got 0"),
        (-1, "'version' must be 1, got -1"),
        (True, "'version' must be an integer, got True"),
        (1.0, "'version' must be an integer, got 1.0"),
        ("1", "'version' must be an integer, got '1'"),
    ],
    ids=["zero", "negative", "bool", "float", "string"],
)
def test_trace_with_an_unsupported_version(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], version: Any, message: str
) -> None:
    """Only format version 1 is read: not 0 (nor ``true`` or ``1.0``, which equal 1 in Python)."""
    doc = {**rolling_pool_trace(), "version": version}
    best = write_best(tmp_path / "best.json", doc)
    with pytest.raises(ScheduleError) as info:
        load_trace(str(best))
    assert str(info.value) == f"trace: {best}: {message}"
    with pytest.raises(ScheduleError) as info:  # the same document as text
        Schedule.replay(POOL.func, json.dumps(doc))
    assert str(info.value) == f"trace: trace: {message}"
    code, out, err = run_cli(capsys, "show", "pool_chain", "--trace", str(best))
    assert (code, out) == (2, "")
    assert err == f"autotune: error: trace: {best}: {message}\n"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[" * 100_000, "not valid JSON (nested too deeply)"),
        ('{"trace": ' * 50_000, "not valid JSON (nested too deeply)"),
        (
            '{"version": ' + "9" * 5000 + ', "steps": []}',
            "not valid JSON (an integer is too long: Exceeds the limit (4300 digits) for integer string "
            "conversion: value has 5000 digits)",
        ),
        ('{"version": 1, "steps": [{"op": "split", "args": {"loop": "y", "factors": '
         + "[" * 40 + "]" * 40 + "}}]}",
         "step 0 argument 'factors' nests lists more than 32 deep"),
    ],
    ids=["deep list", "deep object", "long integer", "deep argument"],
)  # fmt: skip
def test_trace_files_that_break_the_json_reader(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, message: str
) -> None:
    path = tmp_path / "best.json"
    path.write_text(text)
    with pytest.raises(ScheduleError) as info:
        load_trace(str(path))
    assert str(info.value) == f"trace: {path}: {message}"
    with pytest.raises(ScheduleError) as info:  # the same document as text
        Schedule.replay(POOL.func, text)
    assert str(info.value) == f"trace: trace: {message}"
    code, _, err = run_cli(capsys, "show", "pool_chain", "--trace", str(path))
    assert code == 2 and err == f"autotune: error: trace: {path}: {message}\n"


@pytest.mark.parametrize("name", ["op", "outputs"])
def test_a_step_argument_named_like_a_step_field(name: str) -> None:
    """``args`` holding ``op`` or ``outputs`` used to clash with make_step's own parameters (TypeError)."""
    doc = {
        "version": 1,
        "steps": [{"op": "split", "args": {"loop": "y_1", "factors": [None, 2], name: ["x"]}}],
    }
    with pytest.raises(ScheduleError) as info:
        Schedule.replay(POOL.func, json.dumps(doc))
    assert str(info.value) == (
        f"split: trace step 0 does not apply: unknown argument(s) ['{name}']; expected ['factors', 'loop', 'names']"
    )


# ---------------------------------------------------------------- primitives with missing names or bad values


def test_missing_block_loop_and_buffer() -> None:
    sch = Schedule(POOL.func)
    cases = [
        (lambda: sch.compute_at("nope", "y_1"), "compute_at: no block named 'nope' (blocks: pool1, pool2)"),
        (lambda: sch.compute_at("pool1", "zz"), f"compute_at: no loop named 'zz' (loops: {POOL_LOOPS})"),
        (lambda: sch.split("zz", [None, 2]), f"split: no loop named 'zz' (loops: {POOL_LOOPS})"),
        (
            lambda: sch.set_pools("pool1", "ghost", ["dtcm"]),
            "set_pools: block 'pool1' does not access a buffer named 'ghost'",
        ),
    ]
    for call, message in cases:
        with pytest.raises(ScheduleError) as info:
            call()
        assert str(info.value) == message


def test_split_factor_zero() -> None:
    with pytest.raises(ScheduleError) as info:
        Schedule(POOL.func).split("y_1", [0, None])
    assert str(info.value) == "split: factors must be positive integers, got 0 in [0, None]"


def test_rolling_buffer_with_no_overlap() -> None:
    """Row tiles of 1 over a 1x1 (pointwise) consumer: consecutive tiles share no row of depthwise."""
    sch = Schedule(NECK.func)
    sch = sch.split(sch.get_loops("project")[1], [None, 1])
    sch = sch.compute_at("depthwise", sch.last[0])
    with pytest.raises(ScheduleError) as info:
        sch.rolling_buffer("depthwise", 0)
    assert str(info.value) == (
        "rolling_buffer: no dimension of 'depthwise' overlaps between consecutive iterations of loop 'y_2_0'"
    )


@pytest.mark.parametrize("primitive", ["double_buffer", "rolling_buffer"])
def test_buffer_primitives_outside_any_loop(primitive: str) -> None:
    sch = Schedule(POOL.func)
    with pytest.raises(ScheduleError) as info:
        sch.double_buffer("pool1") if primitive == "double_buffer" else sch.rolling_buffer("pool1", 0)
    assert str(info.value) == (
        f"{primitive}: block 'pool1' is not inside any loop of its consumer (use compute_at first)"
    )


# ---------------------------------------------------------------- fuzz: whole files to load_trace


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | st.text(max_size=6)
    | st.sampled_from(["pool1", "pool2", "y_1", "x_1", "c_1", "dtcm"]),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=12,
)  # fmt: skip
steps = st.fixed_dictionaries(
    {
        "op": st.sampled_from(sorted(PRIMITIVES)) | st.text(max_size=6),
        "args": st.dictionaries(
            st.sampled_from(
                ["block", "loop", "factors", "buffer_index", "buffer", "pools", "op", "outputs", "x"]
            ),
            json_values,
            max_size=4,
        ),
    },
    optional={"outputs": json_values},
)
documents = st.fixed_dictionaries(
    {"version": st.integers(-2, 3) | json_values, "steps": st.lists(steps, max_size=4) | json_values}
)
files = st.one_of(
    st.binary(max_size=80),
    st.text(max_size=80),
    documents.map(json.dumps),
    documents.map(lambda d: json.dumps({"trial": 1, "trace": d})),  # a best.json
    json_values.map(json.dumps),
    st.builds(lambda d, cut: json.dumps(d)[:cut], documents, st.integers(0, 200)),  # a truncated file
)


@settings(
    max_examples=500,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=files)
def test_load_trace_raises_only_schedule_errors(tmp_path: Path, data: bytes | str) -> None:
    path = tmp_path / "best.json"
    if isinstance(data, bytes):
        path.write_bytes(data)
    else:
        path.write_text(data, encoding="utf-8", errors="surrogatepass")
    try:
        Schedule.replay(POOL.func, load_trace(str(path)))
    except ScheduleError as err:
        assert str(err).split(":", 1)[0] in {"trace", *PRIMITIVES} or "unknown primitive" in str(err)
