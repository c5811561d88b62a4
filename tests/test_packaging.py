"""pyproject.toml, the Makefile and the examples agree with what the README says about them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from autotune.config import load_config

tomllib = pytest.importorskip("tomllib")  # Python >= 3.11

REPO = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
REQUIREMENT = re.compile(r"^([A-Za-z0-9_.\-]+)\s*(>=\s*[0-9][^;]*)?(;.*)?$")


def requirements() -> dict[str, list[str]]:
    project = PYPROJECT["project"]
    return {"dependencies": project["dependencies"], **project["optional-dependencies"]}


def test_every_requirement_has_a_lower_bound_and_no_pin() -> None:
    for group, reqs in requirements().items():
        for req in reqs:
            match = REQUIREMENT.match(req)
            assert match and match.group(2), f"{group}: {req!r} needs a lower bound (>=), not a pin"
            spec = req.split(";")[0]
            assert "==" not in spec and "<" not in spec, f"{group}: {req!r} is pinned"


def test_linters_are_in_dev_and_test_tools_in_test() -> None:
    names = {group: {REQUIREMENT.match(r).group(1) for r in reqs} for group, reqs in requirements().items()}  # type: ignore[union-attr]
    assert {"ruff", "mypy"} <= names["dev"] and not {"ruff", "mypy"} & names["test"]
    assert {"pytest", "hypothesis", "pytest-xdist", "pytest-timeout"} <= names["test"]
    assert "pydantic" not in names["dependencies"]


def test_xgboost_cpu_where_it_has_wheels_and_xgboost_on_macos() -> None:
    deps = PYPROJECT["project"]["dependencies"]
    assert "xgboost-cpu>=2.1; sys_platform != 'darwin'" in deps
    assert "xgboost>=2.1; sys_platform == 'darwin'" in deps


def test_make_install_installs_the_test_and_dev_extras() -> None:
    makefile = (REPO / "Makefile").read_text(encoding="utf-8")
    assert '-m pip install -e ".[test,dev]"' in makefile
    assert "$(VENV)/bin/ruff check autotune tests" in makefile and "$(VENV)/bin/mypy autotune" in makefile


def test_examples_write_under_out_as_the_readme_says() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert "`out/small`" in readme
    assert load_config(REPO / "examples" / "small.yaml").output == REPO / "out" / "small"
    assert load_config(REPO / "examples" / "my_chain.yaml").output == REPO / "out" / "my_chain"
