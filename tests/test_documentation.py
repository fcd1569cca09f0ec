"""The README and docs/ point at things that exist: links, repository paths, module names.

Every relative Markdown link resolves to a file of the repository (its
``#anchor`` aside); every repository path quoted in backquotes (``src/...``,
``tests/...``, ``scripts/...``, ``docs/...``, ``benchmarks/...``, ``examples/...``)
exists; every ``coursehub.x.y`` name quoted in backquotes names a module, or a
name defined at the top of a module (or in one of its classes). A move that
forgets the docs fails here instead of on a reader.
"""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

import pytest

import importgraph

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
QUOTED = re.compile(r"`([^`\n]+)`")
REPO_PATH = re.compile(r"^(?:src|tests|scripts|docs|benchmarks|examples)/[\w./-]+$")
DOTTED = re.compile(r"^coursehub(?:\.\w+)+$")
MODULES = importgraph.find_modules()


def _page_id(path: Path) -> str:
    return str(path.relative_to(ROOT))


@functools.cache
def defined_names(module: str) -> dict[str, set[str]]:
    """Top-level names of ``module`` -> the names its class (if it is one) defines."""
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
    names: dict[str, set[str]] = {}
    for node in tree.body:
        inner: set[str] = set()
        if isinstance(node, ast.ClassDef):
            for item in ast.walk(node):
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    inner.add(item.name)
                elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    inner.add(item.target.id)
                elif isinstance(item, ast.Assign):
                    inner |= {t.id for t in item.targets if isinstance(t, ast.Name)}
            names[node.name] = inner
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names[node.name] = inner
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                for name in ast.walk(target):
                    if isinstance(name, ast.Name):
                        names[name.id] = inner
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names[node.target.id] = inner
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                names[(alias.asname or alias.name).split(".")[0]] = inner
    return names


def names_something(dotted: str) -> bool:
    """Whether ``dotted`` is a module, or a module's name (and attribute) that exists."""
    module = importgraph.resolve(dotted, MODULES)
    if module is None:
        return False
    rest = dotted[len(module) :].lstrip(".").split(".") if dotted != module else []
    if not rest:
        return True
    names = defined_names(module)
    if rest[0] not in names:
        return False
    return len(rest) == 1 or not names[rest[0]] or rest[1] in names[rest[0]]


@pytest.mark.parametrize("page", PAGES, ids=_page_id)
def test_every_relative_link_resolves(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    broken = []
    for target in LINK.findall(text):
        if re.match(r"^[a-z]+:", target) or target.startswith("#"):
            continue
        path = (page.parent / target.split("#", 1)[0]).resolve()
        if not path.exists():
            broken.append(target)
    assert broken == []


@pytest.mark.parametrize("page", PAGES, ids=_page_id)
def test_every_quoted_repository_path_exists(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    missing = [
        q
        for q in QUOTED.findall(text)
        if REPO_PATH.match(q.rstrip("/")) and "*" not in q and not (ROOT / q.rstrip("/")).exists()
    ]
    assert missing == []


@pytest.mark.parametrize("page", PAGES, ids=_page_id)
def test_every_quoted_module_name_exists(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    candidates = {q.split("(")[0].rstrip(".") for q in QUOTED.findall(text)}
    unknown = sorted(q for q in candidates if DOTTED.match(q) and not names_something(q))
    assert unknown == []


def test_the_name_check_tells_a_moved_name_from_a_real_one() -> None:
    assert names_something("coursehub.settings.data_dir")
    assert names_something("coursehub.cli.COMMANDS")
    assert names_something("coursehub.settings.Setting.meaning")
    assert not names_something("coursehub.settings.no_such_name")
    assert not names_something("coursehub.pipelines.pendulum")
