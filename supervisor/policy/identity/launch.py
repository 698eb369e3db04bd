"""Instance and session ids derived at run time from the launching client process."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from hashlib import sha256

from supervisor.policy.commands import command_name, runner_script
from supervisor.policy.known_clients import KNOWN_CLIENTS, SCRIPT_RUNNERS

from .exec_marker import safe_label
from .instance import CLIENT_ALIASES

__all__ = ["client_family_from_command", "launch_instance_id", "server_session_id"]

#: The seed's families (``CLIENT_ALIASES``) among the clients discovery knows: their npm
#: packages (a client run as ``node <package>/…/script.js``) and program names.
_FAMILIES = frozenset(CLIENT_ALIASES.values())
_SEED_CLIENTS = tuple(client for client in KNOWN_CLIENTS if client.name in _FAMILIES)
_CLIENT_PACKAGES: tuple[tuple[str, str], ...] = tuple(
    (package, client.name) for client in _SEED_CLIENTS for package in client.packages
)
_COMMAND_NAMES = {name: client.name for client in _SEED_CLIENTS for name in client.names}


def client_family_from_command(argv: Sequence[str], aliases: Mapping[str, str]) -> str | None:
    """The client family a process's command line names, or None.

    Only the program's own name counts (``claude``, ``.../claude.exe``), or, for a runner
    such as ``node``, its script's name or the client's npm package in the script's path;
    a directory that happens to be called ``codex`` names nothing. ``aliases`` maps
    normalized names to families (``CLIENT_ALIASES``).
    """
    if not argv:
        return None
    names = [command_name(argv[0])]
    if len(argv) > 1 and (names[0] in SCRIPT_RUNNERS or names[0].startswith("python3.")):
        script = runner_script(argv)
        for package, family in _CLIENT_PACKAGES:
            if package in script:
                return family
        names.append(command_name(script))
    for name in names:
        found = aliases.get(name.replace("-", "_")) or _COMMAND_NAMES.get(name)
        if found:
            return found
    return None


def launch_instance_id(
    client: str, *, machine: str, boot_id: str, client_pid: int, client_start: str, started: float
) -> str:
    """The trusted ``inst-<client>-<UTC stamp>-<12 hex>`` of one client launch.

    Derived, not minted: every server a client starts gets the same id, and two launches
    never do, because a process incarnation (pid and start ticks on one boot of one machine)
    never repeats. ``started`` is the client's start in epoch seconds; only the stamp uses
    it, so a wall-clock step moves the stamp at most, never the digest.
    """
    stamp = datetime.fromtimestamp(int(started), UTC).strftime("%Y%m%dT%H%M%SZ")
    material = f"{machine}\x1f{boot_id}\x1f{client_pid}\x1f{client_start}".encode()
    return f"inst-{client}-{stamp}-{sha256(material).hexdigest()[:12]}"


def server_session_id(instance_id: str, *, name: str, server_pid: int, server_start: str) -> str:
    """One server process's session: unique per incarnation, readable by its name."""
    material = f"{instance_id}\x1f{server_pid}\x1f{server_start}".encode()
    label = safe_label(name) or "server"
    return f"sess-{label}-{sha256(material).hexdigest()[:12]}"
