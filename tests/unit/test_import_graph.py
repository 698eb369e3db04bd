"""Guards the module graph: no import circles in supervisor/ and actors/, and no upward imports."""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("supervisor", "actors")

#: (layer, what it must never import). A name matches the module itself, anything under
#: it, and its ``_``-suffixed siblings (``supervisor.cli`` covers ``cli_links`` and a
#: future ``cli/`` package alike), so the rule survives modules moving into packages.
FORBIDDEN_UPWARD: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "supervisor.store",
        (
            "actors",
            "supervisor.surfaces",
            "supervisor.cli",
            "supervisor.daemon",
            "supervisor.handle",
        ),
    ),
    (
        "actors",
        ("supervisor.surfaces", "supervisor.cli", "supervisor.daemon", "supervisor.handle"),
    ),
    ("supervisor.handle", ("supervisor.surfaces", "supervisor.cli", "supervisor.daemon")),
    ("supervisor.surfaces", ("supervisor.cli", "supervisor.daemon")),
    ("supervisor.observe", ("actors", "supervisor.store", "supervisor.handle")),
)
POLICY = "supervisor.policy"


@dataclass(frozen=True, slots=True)
class Module:
    name: str
    path: Path
    is_package: bool


def discover(root: Path = ROOT, packages: Iterable[str] = PACKAGES) -> dict[str, Module]:
    """Every module under the packages' directories, by dotted name (walked, not listed)."""
    found: dict[str, Module] = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            is_package = parts[-1] == "__init__"
            if is_package:
                parts.pop()
            found[".".join(parts)] = Module(".".join(parts), path, is_package)
    return found


def imported_names(module: Module, source: str) -> list[str]:
    """Every module name ``source`` imports, wherever the statement sits.

    Lazy (function-level) and ``TYPE_CHECKING`` imports count: both hide a circle rather
    than remove it. ``from package import name`` names ``package`` as well as
    ``package.name``: the statement reads from the package's namespace, so the
    package's ``__init__`` must have run by then.
    """
    names: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(module, node.level, node.module) if node.level else node.module
            if not base:
                continue
            names.append(base)
            names.extend(f"{base}.{alias.name}" for alias in node.names if alias.name != "*")
    return names


def _absolute(module: Module, level: int, name: str | None) -> str:
    parts = module.name.split(".")
    if not module.is_package:
        parts.pop()
    parts = parts[: len(parts) - (level - 1)] if level > 1 else parts
    return ".".join([*parts, *([name] if name else [])])


def _owner(name: str, modules: Mapping[str, Module]) -> str | None:
    """The project module ``name`` refers to (a name inside a module maps to the module)."""
    while name:
        if name in modules:
            return name
        name = name.rpartition(".")[0]
    return None


def import_graph(modules: Mapping[str, Module]) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, module in modules.items():
        for imported in imported_names(module, module.path.read_text(encoding="utf-8")):
            target = _owner(imported, modules)
            if target is not None and target != name:
                graph[name].add(target)
    return graph


def cycles(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            for target in edges:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph.get(target, ())))))
                    break
                if target in on_stack:
                    low[node] = min(low[node], index[target])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    component: list[str] = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return sorted(found)


def _within(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith((prefix + ".", prefix + "_"))


def upward_imports(graph: Mapping[str, Iterable[str]]) -> list[str]:
    problems: list[str] = []
    for name, targets in sorted(graph.items()):
        for layer, forbidden in FORBIDDEN_UPWARD:
            if not (name == layer or name.startswith(layer + ".")):
                continue
            problems.extend(
                f"{name} imports {target}"
                for target in sorted(targets)
                if any(_within(target, higher) for higher in forbidden)
            )
    return problems


def impure_policy_imports(modules: Mapping[str, Module]) -> list[str]:
    """Imports in supervisor.policy of anything but itself and the standard library."""
    problems: list[str] = []
    for name, module in sorted(modules.items()):
        if not (name == POLICY or name.startswith(POLICY + ".")):
            continue
        for imported in imported_names(module, module.path.read_text(encoding="utf-8")):
            top = imported.partition(".")[0]
            if imported == POLICY or imported.startswith(POLICY + "."):
                continue
            if top != "__future__" and (top in PACKAGES or top not in sys.stdlib_module_names):
                problems.append(f"{name} imports {imported}")
    return problems


def area(name: str) -> str:
    """The package a module belongs to: ``actors``, or ``supervisor.<package or module>``."""
    parts = name.split(".")
    return parts[0] if parts[0] != "supervisor" else ".".join(parts[:2])


def area_graph(graph: Mapping[str, Iterable[str]]) -> dict[str, set[str]]:
    """The module graph collapsed onto packages: one package's modules become one node."""
    collapsed: dict[str, set[str]] = {}
    for name, targets in graph.items():
        edges = collapsed.setdefault(area(name), set())
        edges.update(area(t) for t in targets if area(t) != area(name))
    return collapsed


MODULES = discover()
GRAPH = import_graph(MODULES)


def test_the_packages_are_walked() -> None:
    # Without this, a move could leave the graph empty and every check vacuous.
    assert {"supervisor.policy", "supervisor.store", "actors"} <= set(MODULES)
    assert len(MODULES) > 100


def test_no_import_circles() -> None:
    found = cycles(GRAPH)
    assert found == [], "import circles:\n" + "\n".join(" <-> ".join(c) for c in found)


def test_packages_depend_on_each_other_one_way() -> None:
    # Modules without a circle can still tie two packages together both ways (a helper
    # here, a caller there); then neither package can be read, or moved, alone.
    found = cycles(area_graph(GRAPH))
    assert found == [], "package circles:\n" + "\n".join(" <-> ".join(c) for c in found)


def test_package_circles_are_found() -> None:
    graph = {
        "supervisor.cli.main": {"supervisor.clients.command"},
        "supervisor.clients.command": {"supervisor.cli.launcher"},
        "supervisor.cli.launcher": set(),
    }
    assert cycles(area_graph(graph)) == [["supervisor.cli", "supervisor.clients"]]


def test_no_layer_imports_a_higher_one() -> None:
    problems = upward_imports(GRAPH)
    assert problems == [], "\n".join(problems)


def test_policy_imports_only_itself_and_the_standard_library() -> None:
    assert impure_policy_imports(MODULES) == []


# --- the checker itself ---------------------------------------------------------------


def _modules(tmp_path: Path, files: Mapping[str, str]) -> dict[str, Module]:
    for relative, source in files.items():
        path = tmp_path / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source, encoding="utf-8")
    return discover(tmp_path, ("pkg",))


@pytest.mark.parametrize(
    "files",
    [
        {"pkg/__init__.py": "", "pkg/a.py": "import pkg.b", "pkg/b.py": "from pkg.a import x"},
        {"pkg/__init__.py": "", "pkg/a.py": "from . import b", "pkg/b.py": "from .a import x"},
        # A lazy import and a type-only import hide a circle; they do not remove it.
        {
            "pkg/__init__.py": "",
            "pkg/a.py": "def f():\n    from pkg.b import g\n",
            "pkg/b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import pkg.a\n",
        },
        # A package that re-exports a module which reads a sibling through the package.
        {
            "pkg/__init__.py": "from pkg.a import x",
            "pkg/a.py": "from pkg import b",
            "pkg/b.py": "",
        },
        {
            "pkg/__init__.py": "",
            "pkg/sub/__init__.py": "",
            "pkg/sub/a.py": "from ..b import y",
            "pkg/b.py": "from pkg.sub.a import x",
        },
    ],
)
def test_checker_finds_a_circle(tmp_path: Path, files: Mapping[str, str]) -> None:
    assert cycles(import_graph(_modules(tmp_path, files))) != []


@pytest.mark.parametrize(
    "files",
    [
        {"pkg/__init__.py": "", "pkg/a.py": "import pkg.b", "pkg/b.py": "import os"},
        {
            "pkg/__init__.py": "from pkg.a import x",
            "pkg/a.py": "from pkg.b import y",
            "pkg/b.py": "",
        },
        {"pkg/__init__.py": "", "pkg/a.py": "import pkg.a\nfrom . import a"},
    ],
)
def test_checker_accepts_a_tree(tmp_path: Path, files: Mapping[str, str]) -> None:
    assert cycles(import_graph(_modules(tmp_path, files))) == []


@pytest.mark.parametrize(
    ("importer", "imported", "allowed"),
    [
        ("supervisor.store.sqlite.store", "actors.mailbox", False),
        ("supervisor.store", "supervisor.handle_links", False),
        ("supervisor.store.base", "supervisor.cli.format", False),
        ("actors.writer.actor", "supervisor.surfaces.protocol", False),
        ("actors.heartbeat", "supervisor.daemon.app", False),
        ("actors.heartbeat", "supervisor.store.base", True),
        ("supervisor.surfaces.protocol", "actors.mailbox", True),
        ("supervisor.store.base", "supervisor.policy.retirement.history", True),
        ("actors.liveness", "supervisor.clients_x", True),
    ],
)
def test_layer_rule(importer: str, imported: str, allowed: bool) -> None:
    assert (upward_imports({importer: [imported]}) == []) is allowed
