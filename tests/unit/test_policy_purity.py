"""Guards DESIGN §3: supervisor.policy stays pure (no I/O, no async, no clock, no outside deps)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

POLICY_PACKAGE = "supervisor.policy"
POLICY_DIR = Path(__file__).resolve().parents[2] / "supervisor" / "policy"

# Top-level modules that mean I/O, concurrency, ambient time or randomness.
# importlib is here because a dynamic import would bypass every other check.
FORBIDDEN_MODULES = frozenset(
    {
        "aiosqlite",
        "anyio",
        "asyncio",
        "asyncpg",
        "importlib",
        "io",
        "os",
        "pathlib",
        "psutil",
        "random",
        "secrets",
        "socket",
        "sqlite3",
        "structlog",
        "subprocess",
        "threading",
        "time",
        "trio",
    }
)
# Our own packages: policy may import only itself.
OWN_PACKAGES = frozenset({"supervisor", "actors"})
AMBIENT_TIME_METHODS = frozenset({"now", "utcnow", "today"})
TIME_CLASSES = frozenset({"datetime", "date"})


def _is_outside_policy(module: str) -> bool:
    return module != POLICY_PACKAGE and not module.startswith(POLICY_PACKAGE + ".")


def _import_violation(module: str, lineno: int) -> str | None:
    top = module.partition(".")[0]
    if top in FORBIDDEN_MODULES:
        return f"line {lineno}: imports {module}"
    if top in OWN_PACKAGES and _is_outside_policy(module):
        return f"line {lineno}: imports {module}, outside {POLICY_PACKAGE}"
    return None


def _resolve_relative(package: str, level: int, module: str | None) -> str:
    parts = package.split(".")
    if level - 1 >= len(parts):
        # Beyond the top-level package: certainly not inside policy.
        return "<outside>" + ("." + module if module else "")
    base = parts[: len(parts) - (level - 1)]
    return ".".join(base + ([module] if module else []))


def find_violations(source: str, package: str = POLICY_PACKAGE) -> list[str]:
    """Every impure import or ambient-time access in `source`, a module of `package`."""
    tree = ast.parse(source)
    violations: list[str] = []
    # Names bound to the datetime/date classes or the datetime module, so an
    # alias (`from datetime import datetime as dt`) cannot hide `dt.now()`.
    class_names = set(TIME_CLASSES)
    module_names: set[str] = set()

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if (problem := _import_violation(alias.name, node.lineno)) is not None:
                    violations.append(problem)
                if alias.name == "datetime":
                    module_names.add(alias.asname or "datetime")
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = _resolve_relative(package, node.level, node.module)
            else:
                base = node.module or ""
            if base.startswith("<outside>"):
                violations.append(f"line {node.lineno}: relative import escapes the package")
                continue
            # `from supervisor import store` imports a module named by the alias.
            targets = [base] + [f"{base}.{alias.name}" for alias in node.names]
            checked = targets[1:] if base in OWN_PACKAGES else targets[:1]
            for target in checked:
                if (problem := _import_violation(target, node.lineno)) is not None:
                    violations.append(problem)
            if base == "datetime":
                for alias in node.names:
                    if alias.name in TIME_CLASSES:
                        class_names.add(alias.asname or alias.name)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "__import__"
        ):
            violations.append(f"line {node.lineno}: calls __import__")

    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute) or node.attr not in AMBIENT_TIME_METHODS:
            continue
        owner = node.value
        on_class = isinstance(owner, ast.Name) and owner.id in class_names
        on_module_class = (
            isinstance(owner, ast.Attribute)
            and owner.attr in TIME_CLASSES
            and isinstance(owner.value, ast.Name)
            and owner.value.id in module_names
        )
        if on_class or on_module_class:
            violations.append(f"line {node.lineno}: reads ambient time via .{node.attr}")
    return violations


def _policy_modules() -> list[tuple[Path, str]]:
    modules = []
    for path in sorted(POLICY_DIR.rglob("*.py")):
        relative = path.relative_to(POLICY_DIR.parent.parent).with_suffix("")
        parts = list(relative.parts)
        if parts[-1] == "__init__":
            parts.pop()
            package = ".".join(parts)
        else:
            package = ".".join(parts[:-1])
        modules.append((path, package))
    return modules


POLICY_MODULES = _policy_modules()


def test_policy_package_is_found() -> None:
    # Without this, moving the package would make the purity test vacuous.
    assert (POLICY_DIR / "__init__.py") in [path for path, _ in POLICY_MODULES]


@pytest.mark.parametrize(
    ("path", "package"),
    POLICY_MODULES,
    ids=[str(path.relative_to(POLICY_DIR)) for path, _ in POLICY_MODULES],
)
def test_policy_module_is_pure(path: Path, package: str) -> None:
    assert find_violations(path.read_text(encoding="utf-8"), package) == []


@pytest.mark.parametrize(
    "source",
    [
        "import anyio",
        "import os.path",
        "from os import path",
        "import time as t",
        "import asyncio, json",
        "from sqlite3 import connect",
        "import structlog",
        "from pathlib import Path",
        "import random",
        "import secrets",
        "import importlib",
        "m = __import__('os')",
        "import supervisor.store",
        "from supervisor.clock import FakeClock",
        "from supervisor import store",
        "from supervisor import policy, probes",
        "import actors.messages",
        "from actors import messages",
        "from ..store import schema",
        "from .. import probes",
        "from .... import anything",
        "from datetime import datetime\nx = datetime.now()",
        "from datetime import datetime\nx = datetime.utcnow()",
        "from datetime import date\nx = date.today()",
        "import datetime\nx = datetime.datetime.now()",
        "import datetime as d\nx = d.date.today()",
        "from datetime import datetime as dt\nclock = dt.now",
        "def f() -> None:\n    import subprocess",
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from supervisor.store import Row",
    ],
)
def test_checker_rejects_impure_source(source: str) -> None:
    assert find_violations(source, "supervisor.policy") != []


@pytest.mark.parametrize(
    "source",
    [
        "from __future__ import annotations",
        "import hashlib, json, math\nfrom dataclasses import dataclass",
        "from datetime import UTC, datetime, timedelta\n"
        "def age(now: datetime, then: datetime) -> timedelta:\n    return now - then",
        "from datetime import datetime\nx = datetime.fromisoformat('2030-01-01T00:00:00+00:00')",
        "from . import fingerprints",
        "from .eligibility import plan",
        "from .. import policy",
        "from supervisor.policy import fingerprints",
        "from supervisor.policy.eligibility import plan",
        "from supervisor import policy",
        "import supervisor.policy.snapshot",
        "now = current.now",
    ],
)
def test_checker_accepts_pure_source(source: str) -> None:
    assert find_violations(source, "supervisor.policy") == []


def test_relative_imports_resolve_from_nested_subpackages() -> None:
    nested = "supervisor.policy.identity"
    assert find_violations("from .. import fingerprints", nested) == []
    assert find_violations("from ...store import schema", nested) != []
