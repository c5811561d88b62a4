"""Where a config's paths lead: relative to a base directory (the config file's, or the current
one for the command line), and for ``search.space`` also the repository's ``search_spaces/``."""

from __future__ import annotations

from pathlib import Path

from .yamldoc import YamlDoc, suggest

REPO_ROOT = Path(__file__).resolve().parents[2]
SPACES_DIR = REPO_ROOT / "search_spaces"


def resolve_path(base: Path, text: str) -> Path:
    """``text`` (``~`` expanded) as an absolute path, relative to ``base``."""
    return (base / Path(text).expanduser()).resolve()


def is_file(path: Path) -> bool:
    """Whether ``path`` is a file; False also for a path the system cannot look up."""
    try:
        return path.is_file()
    except (OSError, ValueError):  # a name too long, or with a NUL byte
        return False


def space_file(doc: YamlDoc, text: str, base: Path) -> Path:
    """The space file: relative to the config file, else in the repository (``search_spaces/NAME[.yaml]``)."""
    given = Path(text).expanduser()
    candidates = [base / given]
    if not given.is_absolute():
        if len(given.parts) == 1:
            candidates += [SPACES_DIR / given, SPACES_DIR / f"{text}.yaml"]
        else:
            candidates.append(REPO_ROOT / given)
    for candidate in candidates:
        if is_file(candidate):
            return candidate.resolve()
    known = sorted(p.stem for p in SPACES_DIR.glob("*.yaml"))
    looked = ", ".join(str(c) for c in candidates)
    raise doc.error(
        ("search", "space"), f"no space file {text!r} (looked for {looked}){suggest(given.stem, known)}"
    )
