"""The workers' client library loads no server module: only ``supervisor.wire`` and leaves."""

from __future__ import annotations

import json
import subprocess
import sys

#: Top-level modules (and their submodules) a worker must never pay for.
_SERVER_PACKAGES = (
    "actors",
    "supervisor.surfaces",
    "supervisor.store",
    "supervisor.policy",
    "supervisor.daemon.app",
    "supervisor.daemon.service",
    "mcp",
    "aiosqlite",
    "asyncpg",
    "psutil",
)
#: Families of sibling modules: ``supervisor.handle``, ``supervisor.handle_checks``, ...
#: (``supervisor.cli`` must not match ``supervisor.client``, hence the explicit ``_``).
_SERVER_FAMILIES = ("supervisor.handle", "supervisor.cli")


def _server_module(name: str) -> bool:
    if any(name == package or name.startswith(package + ".") for package in _SERVER_PACKAGES):
        return True
    return any(
        name == family or name.startswith((family + ".", family + "_"))
        for family in _SERVER_FAMILIES
    )


def _modules_after(statement: str) -> list[str]:
    # A fresh interpreter: this test process has long imported the whole server.
    code = f"import json, sys\n{statement}\nprint(json.dumps(sorted(sys.modules)))\n"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    loaded: list[str] = json.loads(out.stdout)
    return loaded


def test_the_filter_names_the_server_modules_and_spares_the_client() -> None:
    assert _server_module("supervisor.cli_format")
    assert _server_module("supervisor.handle_hosts")
    assert _server_module("actors.messages")
    assert not _server_module("supervisor.client")
    assert not _server_module("supervisor.client_configs")
    assert not _server_module("supervisor.wire")


def test_importing_the_client_library_loads_no_server_module() -> None:
    loaded = _modules_after("import supervisor.client")
    assert "supervisor.client" in loaded
    assert [name for name in loaded if _server_module(name)] == []


def test_the_public_names_load_no_server_module() -> None:
    loaded = _modules_after(
        "from supervisor.client import AsyncClient, Client, keep_registered, start_heartbeat_thread"
    )
    assert [name for name in loaded if _server_module(name)] == []
