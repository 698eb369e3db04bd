"""The systemd unit ``service install`` writes: where it goes and what it says."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from supervisor.settings.config import Settings

__all__ = [
    "SCOPES",
    "UNIT_NAME",
    "WRITTEN_BY",
    "UnitTarget",
    "created_directories",
    "daemon_command",
    "exec_start",
    "render_unit",
    "unit_target",
]

UNIT_NAME = "fleet-supervisor.service"
SCOPES = ("user", "system")
#: The unit's first line: ``service uninstall`` removes only a file that carries it.
WRITTEN_BY = "# Written by `fleet-supervisor service install`; `service uninstall` removes it."
#: A comment naming the directories install created for the unit, so that uninstall
#: removes them again (when empty) and leaves the user's tree as it was.
_CREATED = "# Directories created for it: "
_WANTED_BY = {"user": "default.target", "system": "multi-user.target"}


@dataclass(frozen=True, slots=True)
class UnitTarget:
    """Where one scope's unit file goes."""

    scope: str
    directory: Path

    @property
    def path(self) -> Path:
        return self.directory / UNIT_NAME

    @property
    def systemctl(self) -> tuple[str, ...]:
        return ("systemctl", "--user") if self.scope == "user" else ("systemctl",)


def unit_target(scope: str, env: Mapping[str, str], unit_dir: Path | None = None) -> UnitTarget:
    """The user manager's unit directory (``$XDG_CONFIG_HOME/systemd/user``), the system's
    (``/etc/systemd/system``), or ``unit_dir`` when given."""
    if scope not in SCOPES:
        raise ValueError(f"scope must be one of {', '.join(SCOPES)}, got {scope!r}")
    if unit_dir is not None:
        return UnitTarget(scope, unit_dir.expanduser().absolute())
    if scope == "system":
        return UnitTarget(scope, Path("/etc/systemd/system"))
    config = env.get("XDG_CONFIG_HOME", "")
    # A relative XDG value is invalid by the spec and ignored, as settings/config.py does.
    base = Path(config) if config and os.path.isabs(config) else Path.home() / ".config"
    return UnitTarget(scope, base / "systemd" / "user")


def daemon_command(settings: Settings, config: Path | None) -> list[str]:
    """``fleet-supervisor run`` as this installation runs it, with this user's paths.

    The paths are written out rather than left to the defaults: a service manager's
    environment (``XDG_*``) need not be the shell's, and the daemon must listen where
    this user's CLI and wrapped servers look for it.
    """
    script = Path(sys.executable).parent / "fleet-supervisor"
    if script.is_file() and os.access(script, os.X_OK):
        program = [str(script)]
    else:
        program = [sys.executable, "-m", "supervisor.cli"]
    top = ["--config", str(config.absolute())] if config is not None else []
    top += ["--socket", str(settings.socket.path.absolute())]
    paths = [
        "--db",
        str(settings.database.path.absolute()),
        "--profiles",
        str(settings.auth.profiles_path.absolute()),
    ]
    return [*program, *top, "run", *paths]


def _word(arg: str) -> str:
    # systemd expands %specifiers and $VARIABLES in ExecStart: double them to keep them.
    escaped = arg.replace("%", "%%").replace("$", "$$")
    if escaped and not any(c.isspace() or c in "\"'\\;" for c in escaped):
        return escaped
    return '"' + escaped.replace("\\", "\\\\").replace('"', '\\"') + '"'


def exec_start(command: Sequence[str]) -> str:
    """``command`` as one ExecStart line, each word quoted where systemd would split it."""
    return " ".join(_word(arg) for arg in command)


def render_unit(scope: str, command: Sequence[str], created: Sequence[Path] = ()) -> str:
    """The unit text: notify readiness, the watchdog, restart on failure, a clean drain."""
    made = f"{_CREATED}{json.dumps([str(p) for p in created])}\n" if created else ""
    return f"""{WRITTEN_BY}
{made}
[Unit]
Description=MCP fleet supervisor (worker registry, liveness, leases, MCP server guard)
Documentation=https://github.com/mcp-fleet-supervisor/mcp-fleet-supervisor#readme

[Service]
# READY=1 once the registry writer has migrated and the socket listens; WATCHDOG=1 every
# WatchdogSec/2 only while every actor answers, so a wedged daemon is restarted.
Type=notify
# Only the daemon may report readiness, not a wrapped server that inherited NOTIFY_SOCKET.
NotifyAccess=main
ExecStart={exec_start(command)}
WatchdogSec=30
Restart=on-failure
RestartSec=2
# SIGTERM drains: the socket closes first, then every actor finishes what it holds, so
# everything acknowledged is committed. It gets time before SIGKILL.
KillSignal=SIGTERM
TimeoutStopSec=30
NoNewPrivileges=yes
LockPersonality=yes
RestrictRealtime=yes

[Install]
WantedBy={_WANTED_BY[scope]}
"""


def created_directories(text: str) -> list[Path]:
    """The directories a unit's text says install created for it."""
    for line in text.splitlines():
        if line.startswith(_CREATED):
            try:
                named = json.loads(line[len(_CREATED) :])
            except ValueError:
                return []  # edited by hand: then nothing is removed but the unit
            return [Path(p) for p in named if isinstance(p, str)] if isinstance(named, list) else []
    return []
