"""Every ``from coursehub... import ...`` in a shipped notebook names what that module defines.

A notebook is not imported by the test suite's static checks (ruff, mypy, the
import arrows), so a name moved to another module broke the teaching notebook
only when it ran (``test_notebook.py``, minutes later). This reads each
notebook's code cells and imports the names it asks for.
"""

from __future__ import annotations

import ast
import importlib
import json
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "coursehub"
NOTEBOOKS = sorted(SRC.rglob("*.ipynb"))


def coursehub_imports(path: Path) -> list[tuple[str, str]]:
    """``(module, name)`` of every ``from coursehub... import name`` in ``path``'s code cells."""
    found = []
    for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
        if cell["cell_type"] != "code":
            continue
        for node in ast.walk(ast.parse(python_of("".join(cell["source"])))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("coursehub"):
                found += [(node.module or "", alias.name) for alias in node.names]
    return found


def python_of(source: str) -> str:
    """``source`` less its ``%magic`` and ``!shell`` lines (and their ``\\`` continuations)."""
    kept, shell = [], False
    for line in source.splitlines():
        shell = shell or line.lstrip().startswith(("%", "!"))
        if not shell:
            kept.append(line)
        shell = shell and line.rstrip().endswith("\\")
    return "\n".join(kept)


def test_there_are_notebooks_to_check():
    assert NOTEBOOKS and any(coursehub_imports(p) for p in NOTEBOOKS)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: str(p.relative_to(SRC)))
def test_each_name_a_notebook_imports_from_coursehub_exists(path):
    missing = [
        f"{module}.{name}"
        for module, name in coursehub_imports(path)
        if not hasattr(importlib.import_module(module), name)
    ]
    assert not missing, f"{path.name} imports names that are gone: {missing}"
