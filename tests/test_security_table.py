"""docs/security.md prints the table of processes (coursehub.sandbox.processes), none missing.

The page must print exactly the rendered table; every row's ``entry`` and
``plan`` must name code that exists; and every module that builds a
sandbox plan (calls ``plan_sandbox_command``) must be the plan of a row, so that a
new path running someone else's code cannot be added without the table.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

from coursehub.sandbox.processes import PROCESSES, render_process_table

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"


def resolve(dotted: str) -> object:
    module_name, _, attribute = dotted.partition(":")
    target: object = importlib.import_module(module_name)
    for part in attribute.split("."):
        target = getattr(target, part)
    return target


def test_the_security_page_prints_the_table_of_processes():
    page = (ROOT / "docs" / "security.md").read_text(encoding="utf-8")
    assert render_process_table() in page


@pytest.mark.parametrize("row", PROCESSES, ids=lambda row: row.process)
def test_each_process_names_code_that_starts_it_and_that_sandboxes_it(row):
    assert resolve(row.entry)
    if row.plan:
        assert resolve(row.plan)


def modules_building_a_plan() -> set[str]:
    """Modules outside coursehub.sandbox that call ``plan_sandbox_command`` (any import form)."""
    found = set()
    for path in sorted((SRC / "coursehub").rglob("*.py")):
        module = ".".join(path.relative_to(SRC).with_suffix("").parts)
        if module.startswith("coursehub.sandbox"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call):
                func = node.func
                name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
                if name == "plan_sandbox_command":
                    found.add(module.removesuffix(".__init__"))
    return found


def test_every_module_that_sandboxes_a_job_is_a_row_of_the_table():
    planned = {row.plan.partition(":")[0] for row in PROCESSES if row.plan}
    building = modules_building_a_plan()
    assert building, "no module builds a sandbox plan: the search is broken"
    assert building <= planned
