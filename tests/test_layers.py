"""Imports point one way: a module may import only from its own layer and the layers above it.

The order below is DESIGN.md's "Layers" list (first = lowest, importable by all),
except that memory comes before lowering (the planner's lowering pass imports memory)
and that ``files`` was added below everything but errors (atomic writes are needed by
memory, codegen and search).
``autotune/__init__.py`` is the public facade; it imports everything and is exempt.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

LAYERS: tuple[str, ...] = (
    "errors",
    "files",
    "ir",
    "analysis",
    "te",
    "workloads",
    "schedule",
    "memory",
    "lowering",
    "codegen",
    "measure",
    "config",
    "search",
    "report",
    "api",
    "cli",
)
RANK = {name: i for i, name in enumerate(LAYERS)}
# Modules that are not a layer of their own: `python -m autotune` is the CLI.
ALIASES = {"__main__": "cli"}
# Layers that are single modules directly in the package (the others are subpackages).
MODULE_LAYERS = frozenset({"errors", "files", "config", "api", "cli"})

REPO_ROOT = Path(__file__).resolve().parents[1]
PACKAGE_DIR = REPO_ROOT / "autotune"


@dataclass(frozen=True)
class Violation:
    lineno: int
    statement: str
    reason: str


def layer_of(dotted: str) -> str | None:
    """The layer of an ``autotune...`` module name; None for the facade or a name in no layer."""
    parts = dotted.split(".")
    if parts[0] != "autotune" or len(parts) < 2:
        return None
    layer = ALIASES.get(parts[1], parts[1])
    return layer if layer in RANK else None


def _resolve(node: ast.ImportFrom, package: str) -> str | None:
    """Absolute module name of ``from <level dots><module> import ...`` inside ``package``."""
    if node.level == 0:
        return node.module
    base = package.split(".")
    if node.level - 1 >= len(base):
        return None
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def _targets(node: ast.Import | ast.ImportFrom, package: str) -> list[str] | None:
    """The autotune modules a statement may load (None if a relative import escapes the package)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    module = _resolve(node, package)
    if module is None:
        return None
    if module == "autotune":
        # `from autotune import ir` loads a layer; `from autotune import Schedule` loads the facade.
        return [f"autotune.{a.name}" if layer_of(f"autotune.{a.name}") else "autotune" for a in node.names]
    return [module]


def check_source(module_layer: str, source: str, package: str | None = None) -> list[Violation]:
    """Every import in ``source`` that points to a layer below ``module_layer``.

    ``package`` is the dotted package the source lives in, needed for relative imports;
    by default ``autotune.<module_layer>`` for a subpackage layer, ``autotune`` otherwise.
    """
    if package is None:
        package = "autotune" if module_layer in MODULE_LAYERS else f"autotune.{module_layer}"
    rank = RANK[module_layer]
    found: list[Violation] = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        statement = ast.unparse(node)
        targets = _targets(node, package)
        if targets is None:
            found.append(Violation(node.lineno, statement, f"relative import beyond the top of {package}"))
            continue
        for target in targets:
            if target != "autotune" and not target.startswith("autotune."):
                continue  # not ours
            layer = layer_of(target)
            if target == "autotune":
                reason = "imports the public facade `autotune` from inside the package"
            elif layer is None:
                reason = f"imports {target}, which is in no layer (add it to LAYERS)"
            elif RANK[layer] > rank:
                reason = f"layer {module_layer} imports layer {layer} below it"
            else:
                continue
            found.append(Violation(node.lineno, statement, reason))
    return found


def check_package(package_dir: Path = PACKAGE_DIR) -> list[str]:
    """One line per offending import in every module of the package, as ``file:line: import  (why)``."""
    lines: list[str] = []
    for path in sorted(package_dir.rglob("*.py")):
        rel = path.relative_to(package_dir.parent)
        if rel == Path("autotune", "__init__.py"):
            continue
        package = ".".join(rel.parent.parts)
        layer = layer_of(".".join([*rel.parent.parts, path.stem]))
        if layer is None:
            lines.append(f"{rel}: module is in no layer (add it to LAYERS in tests/test_layers.py)")
            continue
        for v in check_source(layer, path.read_text(encoding="utf-8"), package):
            lines.append(f"{rel}:{v.lineno}: {v.statement}  ({v.reason})")
    return lines


def test_imports_follow_layers() -> None:
    offences = check_package()
    assert not offences, "imports that point down the layer order:\n" + "\n".join(offences)


BAD_IN_IR = [
    "import autotune.schedule",
    "import autotune.schedule.primitives.loops as loops",
    "from autotune.schedule import Schedule",
    "from autotune import schedule",
    "from autotune import Schedule",
    "import autotune",
    "from ..schedule import Schedule",
    "from .. import lowering",
    "def f():\n    from autotune.codegen import build\n",
    "from autotune.nowhere import thing",
]

OK_IN_IR = [
    "import numpy as np",
    "from autotune.errors import IRError",
    "from autotune import errors",
    "from ..errors import IRError",
    "from .. import errors",
    "from . import nodes",
    "from .nodes import Buffer",
    "import autotune.ir.nodes",
]


@pytest.mark.parametrize("source", BAD_IN_IR)
def test_checker_catches_downward_import(source: str) -> None:
    found = check_source("ir", source, package="autotune.ir")
    assert len(found) == 1, found


@pytest.mark.parametrize("source", OK_IN_IR)
def test_checker_allows_upward_and_same_layer_imports(source: str) -> None:
    assert check_source("ir", source, package="autotune.ir") == []


def test_checker_resolves_relative_imports_from_nested_packages() -> None:
    # autotune/schedule/primitives/loops.py: `..` is autotune.schedule, `...` is autotune.
    package = "autotune.schedule.primitives"
    assert check_source("schedule", "from ...ir import Buffer\nfrom .. import trace", package) == []
    found = check_source("schedule", "from ...lowering import PASSES", package)
    assert [v.reason for v in found] == ["layer schedule imports layer lowering below it"]
    assert check_source("schedule", "from ..... import x", package)[0].reason.startswith("relative import")


def test_package_report_names_file_and_line(tmp_path: Path) -> None:
    pkg = tmp_path / "autotune"
    (pkg / "ir").mkdir(parents=True)
    (pkg / "__init__.py").write_text("from autotune.cli import main\n")  # facade: exempt
    (pkg / "ir" / "nodes.py").write_text("import numpy\n\nfrom autotune.schedule import Schedule\n")
    (pkg / "cli.py").write_text("from autotune.ir.nodes import Buffer\n")
    (pkg / "extra.py").write_text("")
    assert check_package(pkg) == [
        "autotune/extra.py: module is in no layer (add it to LAYERS in tests/test_layers.py)",
        "autotune/ir/nodes.py:3: from autotune.schedule import Schedule"
        "  (layer ir imports layer schedule below it)",
    ]
