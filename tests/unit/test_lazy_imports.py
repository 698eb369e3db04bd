"""The CLI and the daemon's start-up path do not load the MCP SDK or pydantic."""

from __future__ import annotations

import subprocess
import sys

import pytest

HEAVY = ("mcp", "pydantic", "starlette", "uvicorn")


def _printed_by_a_fresh_interpreter(code: str) -> str:
    # A fresh interpreter: this test process has long imported the SDK for other tests.
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    return out.stdout.strip()


@pytest.mark.parametrize(
    "modules",
    [
        ("supervisor.cli",),
        # What `fleet-supervisor run` imports before it serves (no MCP HTTP configured).
        ("supervisor.cli", "supervisor.daemon.service", "supervisor.daemon.app"),
        ("supervisor.entry", "supervisor.exec.exec_in_place"),
    ],
)
def test_light_commands_leave_the_mcp_stack_unloaded(modules: tuple[str, ...]) -> None:
    code = (
        "import importlib, sys\n"
        f"for name in {modules!r}:\n"
        "    importlib.import_module(name)\n"
        f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))\n"
    )
    assert _printed_by_a_fresh_interpreter(code) == "[]"


def test_a_sqlite_daemon_leaves_the_postgresql_driver_unloaded() -> None:
    # The store factory loads asyncpg only for a [database] url (about 3.5 MB of RSS).
    code = (
        "import sys\n"
        "import supervisor.cli, supervisor.daemon.service, supervisor.daemon.app\n"
        "import supervisor.store.factory\n"
        "print(sorted(m for m in ('asyncpg', 'supervisor.store.postgres') if m in sys.modules))\n"
    )
    assert _printed_by_a_fresh_interpreter(code) == "[]"


def test_a_daemon_without_the_metrics_listener_leaves_prometheus_unloaded() -> None:
    # Without [ops] http the daemon counts into the base Metrics (about 2.5 MB less).
    code = (
        "import sys\n"
        "import supervisor.cli, supervisor.daemon.service, supervisor.daemon.app\n"
        "import supervisor.daemon.ops\n"
        "import supervisor.surfaces.http.ops\n"
        "from supervisor.observe.metrics import Metrics\n"
        "m = Metrics()\n"
        "m.commit_seconds.labels('batch').observe(0.1); m.exit_watches.set(3)\n"
        "m.sweeps.inc(); m.actor_restarts.labels('x').inc(); m.accept_heartbeats(2)\n"
        "m.count_outcome('plan', 'planned'); m.count_heartbeats([])\n"
        "print(sorted(m for m in ('prometheus_client',) if m in sys.modules))\n"
    )
    assert _printed_by_a_fresh_interpreter(code) == "[]"


def test_a_daemon_without_the_ops_listener_leaves_the_http_surface_unloaded() -> None:
    # The ops HTTP server (h11), its routes and the fleet page load only with [ops] http.
    code = (
        "import sys\n"
        "import supervisor.cli.main, supervisor.daemon.service, supervisor.daemon.app\n"
        "import supervisor.daemon.ops\n"
        "names = ('h11', 'supervisor.surfaces.http.ops', 'supervisor.surfaces.http.fleet_page')\n"
        "print(sorted(m for m in names if m in sys.modules))\n"
    )
    assert _printed_by_a_fresh_interpreter(code) == "[]"


def test_the_daemon_leaves_the_other_commands_and_their_libraries_unloaded() -> None:
    # `run` imports only its own command: importlib.metadata (the version, about 2 MB),
    # tomlkit (profile edits, about 1 MB) and the other commands' modules load when used.
    code = (
        "import sys\n"
        "from supervisor.cli.main import _command\n"
        "import supervisor.cli.daemon, supervisor.daemon.service, supervisor.daemon.app\n"
        "import supervisor.daemon.ops, supervisor.settings.profiles, actors.census.configs\n"
        "names = ('importlib.metadata', 'tomlkit', 'supervisor.cli.fleet',\n"
        "         'supervisor.cli.format', 'supervisor.cli.launch',\n"
        "         'supervisor.client_configs.launcher', 'supervisor.cli.reap')\n"
        "print(sorted(m for m in names if m in sys.modules))\n"
        "_command('status'); _command('launch-config'); _command('reap')\n"
        "print(sorted(m for m in names[2:] if m not in sys.modules))\n"
    )
    assert _printed_by_a_fresh_interpreter(code).splitlines() == ["[]", "[]"]
