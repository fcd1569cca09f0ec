"""Each package imports only the packages below it (docs/architecture.md), lazy imports included.

Every module under ``src/coursehub`` is parsed with :mod:`ast`
(:mod:`importgraph`); every ``import``/``from ... import`` (at module level,
inside functions, or under ``TYPE_CHECKING``) is mapped to the module it names,
a package's own face included, and compared with :data:`ALLOWED`. No module
cycle is allowed anywhere, and no command is routed by a string: the command
table (:data:`coursehub.cli.COMMANDS`) holds the register functions themselves.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

import importgraph

SRC = importgraph.SRC

#: The top face (``coursehub/__init__.py``: the version and a docstring): any module may import it.
TOP = {"__init__"}
#: Modules at the bottom that any package may import.
BASE = {"errors", "contract", "filemodes", "csvsafe", "atomicfile", "settings"}
#: package (or top-level module) -> the coursehub packages it may import.
ALLOWED: dict[str, set[str]] = {
    "errors": set(),
    "settings": {"errors"},
    "resources": {"errors"},
    "contract": {"errors", "resources"},
    "filemodes": {"errors"},
    "csvsafe": {"errors"},
    "atomicfile": {"errors"},
    "sandbox": {"errors", "resources"},
    # the exam workspace: loaded by the hub and by the student's exam server
    "examroom": {"errors", "sandbox"},
    # homequota: its fs, reading and usage modules (no catalog): quota at spawn, disk display
    "spawn": {"errors", "resources", "contract", "atomicfile", "courselayout", "meter", "settings"}
    | {"homequota", "examroom"},
    "meter": {"errors", "resources", "filemodes", "atomicfile"},
    "catalog": BASE | {"resources", "meter"},
    "hub": BASE | {"resources", "catalog", "homequota"},
    "runner": BASE | {"resources", "meter"},
    "material": BASE | {"resources", "catalog", "coursedata"},
    "grading": BASE | {"resources", "catalog", "hub", "runner", "sandbox", "examroom"},
    "admin": BASE | {"resources", "catalog", "hub", "grading", "meter"},
    "lti": BASE | {"resources", "catalog", "hub", "grading"},
    "web": BASE
    | {"resources", "catalog", "hub", "grading", "admin", "material", "lti"}
    | {"courselayout", "coursedata", "courseenv", "teamaccess", "books"}
    | {"usage", "meter", "usecases", "homequota"},
    "demo": BASE
    | {"resources", "catalog", "hub", "grading", "admin", "material", "web", "books"}
    | {"courselayout"},
    "pendulum": BASE | {"resources", "runner"},
    "bench": BASE | {"resources", "runner", "pendulum"},
    "usecases": BASE
    | {"resources", "runner", "pendulum", "catalog", "hub", "material", "books"}
    | {"courselayout", "coursedata", "teamaccess"},
    "courselayout": {"errors", "settings"},
    "coursedata": BASE | {"resources", "catalog", "courselayout"},
    "accounts": BASE | {"resources", "catalog", "coursedata"},
    "deploy": BASE | {"resources", "catalog", "hub"},
    # an upgrade: a backup, then the install's files as deploy renders them
    "upgrade": BASE | {"resources", "catalog", "hub", "deploy", "backup"},
    "courseenv": BASE | {"resources", "catalog", "courselayout", "material", "sandbox"},
    "books": BASE | {"resources", "catalog", "material", "runner", "courselayout", "sandbox"},
    "teamaccess": BASE | {"resources", "catalog", "hub"},
    "usage": BASE | {"resources", "catalog", "meter", "homequota"},
    "homequota": BASE | {"resources", "catalog"},
    "doctor": BASE
    | {"resources", "meter", "catalog", "hub", "runner", "sandbox", "homequota", "backup"},
    # every part's place on the host: the catalog's URL, grading, material, books, LTI key,
    # the deploy layout's secrets
    "backup": BASE | {"resources", "catalog", "grading", "material", "books", "lti", "deploy"},
    # the command table: every part's cli module and the use cases, nothing else of theirs
    "cli": {"__init__", "errors", "pendulum", "runner", "bench", "catalog", "admin"}
    | {"material", "web", "hub", "grading", "demo", "coursedata", "courseenv", "books"}
    | {"usage", "lti", "usecases", "homequota", "doctor", "backup", "accounts"}
    | {"deploy", "upgrade"},
    "__main__": {"cli"},
    "__init__": set(),
}
#: package -> third-party top-level modules it must never import.
FORBIDDEN: dict[str, set[str]] = {
    "resources": {"torch", "flask", "sqlalchemy", "jupyterhub"},
    "contract": {"torch", "flask", "sqlalchemy", "jupyterhub", "requests"},
    "spawn": {"torch", "flask", "sqlalchemy"},
    "catalog": {"torch", "flask", "jupyterhub"},
    "hub": {"torch", "flask", "jupyterhub"},
    "admin": {"torch", "flask", "jupyterhub"},
    "material": {"torch", "flask", "jupyterhub"},
    "web": {"torch"},  # jupyterhub.services.auth: the course app is a hub service
    "pendulum": {"flask", "jupyterhub"},
    "usecases": {"torch", "flask", "jupyterhub"},
    "coursedata": {"torch", "flask", "jupyterhub"},
    "courseenv": {"torch", "flask", "jupyterhub"},
    "teamaccess": {"torch", "flask", "jupyterhub"},
    "books": {"torch", "flask", "jupyterhub"},
    "meter": {"torch", "flask", "sqlalchemy", "jupyterhub"},
    "sandbox": {"torch", "flask", "sqlalchemy", "jupyterhub", "nbgrader"},
    "examroom": {"torch", "flask", "sqlalchemy", "jupyterhub", "nbgrader"},
    "usage": {"torch", "flask", "jupyterhub"},
    "homequota": {"torch", "flask", "jupyterhub"},
    "doctor": {"torch", "flask", "jupyterhub"},
    "backup": {"torch", "flask", "jupyterhub"},
    "lti": {"torch", "flask", "jupyterhub"},
}


def package_of(module: str) -> str:
    """``coursehub.hub.sync`` -> ``hub``; ``coursehub`` -> ``__init__``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


MODULES = importgraph.find_modules()


def imported_names(path: Path) -> list[str]:
    """Every absolute module name ``path`` imports (relative imports resolved)."""
    return [base for base, _ in importgraph.imported_names(path, importgraph.module_name(path))]


@functools.cache
def module_graph() -> dict[str, set[str]]:
    return importgraph.build_graph(MODULES)


def test_every_package_is_in_the_table():
    assert {package_of(m) for m in MODULES} - set(ALLOWED) == set()


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_a_package_imports_only_the_packages_below_it(package):
    wrong = sorted(
        f"{module} -> {target}"
        for module, targets in module_graph().items()
        for target in targets
        if package_of(module) == package
        and package_of(target) not in {package, *TOP}
        and package_of(target) not in ALLOWED[package]
    )
    assert wrong == []


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_a_package_never_imports_its_forbidden_libraries(package):
    wrong = sorted(
        f"{module} -> {name}"
        for module, path in MODULES.items()
        if package_of(module) == package
        for name in imported_names(path)
        if name.split(".")[0] in FORBIDDEN[package]
    )
    assert wrong == []


def test_the_allowed_table_itself_has_no_cycle():
    seen: dict[str, int] = {}

    def visit(package: str, path: tuple[str, ...]) -> None:
        assert package not in path, " -> ".join([*path, package])
        if seen.get(package):
            return
        for below in ALLOWED[package]:
            visit(below, (*path, package))
        seen[package] = 1

    for package in ALLOWED:
        visit(package, ())


def test_no_module_cycle_at_all_package_faces_included():
    assert importgraph.cycles(module_graph()) == []


def write_modules(root: Path, files: dict[str, str]) -> dict[str, Path]:
    """Write ``{"coursehub/web/views/__init__.py": text, ...}`` below ``root``; their modules."""
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    return importgraph.find_modules(root)


def test_a_face_importing_its_blueprints_that_import_it_back_is_a_cycle(tmp_path):
    """The shape ``web/views/__init__.py`` had: its blueprints imported the face for helpers."""
    modules = write_modules(
        tmp_path,
        {
            "coursehub/__init__.py": "",
            "coursehub/web/__init__.py": "",
            "coursehub/web/views/__init__.py": (
                "def init_app(app):\n    from coursehub.web.views import admin, courses\n"
                "def load_course():\n    pass\n"
            ),
            "coursehub/web/views/admin.py": "from coursehub.web.views import load_course\n",
            "coursehub/web/views/courses.py": "from . import load_course\n",
        },
    )
    assert importgraph.cycles(importgraph.build_graph(modules)) == [
        ["coursehub.web.views", "coursehub.web.views.admin", "coursehub.web.views.courses"]
    ]


def test_helpers_in_their_own_module_are_no_cycle(tmp_path):
    modules = write_modules(
        tmp_path,
        {
            "coursehub/__init__.py": "",
            "coursehub/web/__init__.py": "",
            "coursehub/web/views/__init__.py": '"""Pages."""\n',
            "coursehub/web/views/base.py": "def load_course():\n    pass\n",
            "coursehub/web/views/admin.py": "from coursehub.web.views.base import load_course\n",
            "coursehub/web/app.py": "from coursehub.web.views import admin, base\n",
        },
    )
    graph = importgraph.build_graph(modules)
    assert graph["coursehub.web.app"] == {"coursehub.web.views.admin", "coursehub.web.views.base"}
    assert importgraph.cycles(graph) == []


def _quiet_in_a_face(node: ast.stmt) -> bool:
    """A docstring or ``from __future__``: all a package face holds."""
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
        return True
    return isinstance(node, ast.ImportFrom) and node.module == "__future__"


def test_package_faces_are_docstrings_only():
    """No face runs code or re-exports names: importers name the module that defines a thing."""
    loud = []
    for module, path in MODULES.items():
        if path.name != "__init__.py" or module == "coursehub":
            continue
        body = ast.parse(path.read_text(encoding="utf-8")).body
        if not all(_quiet_in_a_face(node) for node in body):
            loud.append(module)
    assert loud == []


# --- the command table -----------------------------------------------------------------


def test_every_command_row_registers_and_sub_commands_follow_their_command():
    from coursehub.cli import COMMANDS, build_parser

    names = [name for name, _ in COMMANDS]
    assert len(names) == len(set(names))
    for position, name in enumerate(names):
        part, _, verb = name.partition(" ")
        if verb:
            assert part in names[:position], f"{name!r} comes before {part!r}"
    build_parser()  # every row registers


def test_every_use_case_is_a_row_of_the_command_table():
    from coursehub.cli import COMMANDS

    registered = {register.__module__ for _, register in COMMANDS}
    use_cases = {m for m in MODULES if m.startswith("coursehub.usecases.")}
    assert use_cases <= registered


def test_a_table_row_without_its_command_is_refused():
    from coursehub.cli import build_parser

    with pytest.raises(ValueError, match="'hub sync': no row for 'hub'"):
        build_parser((("hub sync", lambda commands: None),))


#: Modules that import third-party names read from a setting (coursehub's own refused there):
#: the kernel fork server's ``COURSEHUB_GRADING_PRELOAD``.
IMPORTS_BY_SETTING = {"coursehub.grading.sandbox.forkserver"}


def test_no_coursehub_module_is_imported_by_a_string():
    """``importlib.import_module``/``__import__`` of our own names hides an arrow from this test."""
    wrong = []
    for module, path in MODULES.items():
        if module in IMPORTS_BY_SETTING:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if called not in {"import_module", "__import__"}:
                continue
            first = node.args[0] if node.args else None
            named = first.value if isinstance(first, ast.Constant) else None
            if not (isinstance(named, str) and not named.startswith("coursehub")):
                wrong.append(f"{module}:{node.lineno}")
    assert wrong == []
