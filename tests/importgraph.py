"""The import graph of ``src/coursehub``, read with :mod:`ast` (nothing is imported).

Every ``import``/``from ... import`` counts, at module level, inside functions
or under ``TYPE_CHECKING``. An edge goes to the module an import *names*:

- ``import coursehub.a.b`` and ``from coursehub.a.b import name``: to ``coursehub.a.b``
  (a package's face, ``a/b/__init__.py``, when ``b`` is a package);
- ``from coursehub.a import b`` where ``b`` is a sub-module: to ``coursehub.a.b`` only,
  not to the face ``coursehub.a``; where ``b`` is a name defined in the face: to
  ``coursehub.a``.

An import of a module's own package face is an edge like any other, so a face
that imports its sub-modules while they import it back is a cycle (Python runs a
face before any of its sub-modules). :func:`cycles` finds every cycle
(Tarjan's strongly connected components, Tarjan 1972, SIAM J. Comput. 1(2)).
Shared by ``tests/test_import_arrows.py`` and ``scripts/code-metrics``.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"


def module_name(path: Path, src: Path = SRC) -> str:
    """``src/coursehub/hub/sync.py`` -> ``coursehub.hub.sync``; a face drops ``__init__``."""
    parts = path.relative_to(src).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def find_modules(src: Path = SRC) -> dict[str, Path]:
    """Every module of ``src/coursehub``: dotted name -> file, sorted by name."""
    return {module_name(p, src): p for p in sorted((src / "coursehub").rglob("*.py"))}


def imported_names(path: Path, name: str) -> list[tuple[str, str | None]]:
    """The imports of module ``name`` (file ``path``): (absolute module, imported name or None).

    ``import a.b`` gives ``("a.b", None)``; ``from a import b, c`` gives ``("a", "b")``
    and ``("a", "c")``; relative imports are resolved against ``name``.
    """
    tree = ast.parse(path.read_text(encoding="utf-8"))
    here = name.split(".")
    is_package = path.name == "__init__.py"
    found: list[tuple[str, str | None]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(alias.name, None) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = here if is_package else here[:-1]
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            found += [(base, alias.name) for alias in node.names]
    return found


def resolve(name: str, modules: Iterable[str]) -> str | None:
    """The longest known module that ``name`` is or lies in; None outside ``modules``."""
    known = set(modules)
    while name:
        if name in known:
            return name
        name = name.rpartition(".")[0]
    return None


def targets(path: Path, name: str, modules: Mapping[str, Path]) -> set[str]:
    """The coursehub modules that module ``name`` imports (itself excluded)."""
    out: set[str] = set()
    for base, imported in imported_names(path, name):
        if not base.startswith("coursehub"):
            continue
        full = f"{base}.{imported}" if imported else base
        target = full if full in modules else resolve(base, modules)
        if target is not None and target != name:
            out.add(target)
    return out


def build_graph(modules: Mapping[str, Path]) -> dict[str, set[str]]:
    """module -> the coursehub modules it imports, for every module of ``modules``."""
    return {name: targets(path, name, modules) for name, path in modules.items()}


def cycles(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """Every group of modules that import each other in a ring (size > 1), each sorted.

    Tarjan's algorithm, iterative (no recursion limit on a deep graph).
    """
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    found.append(sorted(group))
    return sorted(found)
