"""The exec marker: what the wrapper leaves in a server's environment for a daemon to verify."""

# Imported by the exec wrapper before it replaces itself with the server: stdlib only and
# nothing slow to import (no re, no json, no dataclasses), since it is paid on every start.

from __future__ import annotations

__all__ = [
    "MARKER_ENV",
    "MARKER_VERSION",
    "ExecMarker",
    "daemon_key",
    "format_marker",
    "parse_marker",
    "safe_label",
]

#: Environment variable the wrapper sets before it execs the server. Every process of the
#: server's tree inherits it (unless a server scrubs its environment), and it is what a
#: daemon that starts later finds in ``/proc/<pid>/environ`` to adopt running servers.
MARKER_ENV = "FLEET_SUPERVISOR_EXEC"
MARKER_VERSION = "v1"

_LABEL_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")
_MAX_LABEL = 64


class ExecMarker:
    """What the wrapper knew when it started the server: the facts a daemon re-verifies."""

    # A plain class: NamedTuple and dataclasses import typing and re, which would add
    # milliseconds to every wrapped server's start.
    __slots__ = (
        "boot_id",
        "client",
        "client_pid",
        "client_start",
        "daemon",
        "leader_pid",
        "leader_start",
        "name",
        "namespace",
    )

    def __init__(
        self,
        *,
        leader_pid: int,
        leader_start: str,
        client_pid: int,
        client_start: str,
        boot_id: str,
        client: str,
        name: str,
        namespace: str,
        daemon: str,
    ) -> None:
        self.leader_pid = leader_pid
        self.leader_start = leader_start
        self.client_pid = client_pid
        self.client_start = client_start
        self.boot_id = boot_id
        self.client = client
        self.name = name
        self.namespace = namespace
        #: ``daemon_key`` of the exec socket the wrapper used: on a host with several
        #: daemons (one per user, a test's own) each adopts only the servers sent to it.
        self.daemon = daemon

    def _key(self) -> tuple[object, ...]:
        return tuple(getattr(self, name) for name in self.__slots__)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ExecMarker) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return f"ExecMarker({format_marker(self)!r})"


def safe_label(raw: object) -> str:
    """A short label made of ``[A-Za-z0-9._-]`` only (others become ``_``); empty stays empty."""
    if not isinstance(raw, str):
        return ""
    return "".join(c if c in _LABEL_CHARS else "_" for c in raw[:_MAX_LABEL])


def format_marker(marker: ExecMarker) -> str:
    """``v1;leader=P:T;client=P:T;boot=B;client_name=C;name=N;namespace=S;daemon=K``."""
    return ";".join(
        (
            MARKER_VERSION,
            f"leader={marker.leader_pid}:{marker.leader_start}",
            f"client={marker.client_pid}:{marker.client_start}",
            f"boot={safe_label(marker.boot_id)}",
            f"client_name={safe_label(marker.client)}",
            f"name={safe_label(marker.name)}",
            f"namespace={safe_label(marker.namespace)}",
            f"daemon={safe_label(marker.daemon)}",
        )
    )


def _pid_and_start(text: str) -> tuple[int, str] | None:
    pid, sep, start = text.partition(":")
    # isdigit alone admits other scripts' digits ("\u0661", "\u00b2"), which int() reads
    # differently or refuses: only ASCII digits name a pid or a start.
    if not sep or not (pid + start).isascii() or len(pid) > 10:
        return None
    if not pid.isdigit() or not start.isdigit():
        return None
    value = int(pid)
    return (value, start) if 0 < value < 2**31 else None


def parse_marker(text: object) -> ExecMarker | None:
    """The marker in ``text``, or None for anything that is not exactly a v1 marker."""
    if not isinstance(text, str) or len(text) > 1024:
        return None
    version, _, rest = text.partition(";")
    if version != MARKER_VERSION:
        return None
    fields: dict[str, str] = {}
    for part in rest.split(";"):
        key, sep, value = part.partition("=")
        if not sep or key in fields:
            return None
        fields[key] = value
    leader = _pid_and_start(fields.get("leader", ""))
    client = _pid_and_start(fields.get("client", ""))
    if leader is None or client is None:
        return None
    labels = {k: fields.get(k, "") for k in ("boot", "client_name", "name", "namespace", "daemon")}
    if any(safe_label(v) != v for v in labels.values()) or not labels["boot"]:
        return None
    return ExecMarker(
        leader_pid=leader[0],
        leader_start=leader[1],
        client_pid=client[0],
        client_start=client[1],
        boot_id=labels["boot"],
        client=labels["client_name"],
        name=labels["name"],
        namespace=labels["namespace"],
        daemon=labels["daemon"],
    )


def daemon_key(exec_socket: str) -> str:
    """A short key naming one daemon by its exec socket's absolute path (FNV-1a, 64 bits:
    hashlib would cost the wrapper milliseconds, and this only tells daemons apart)."""
    value = 0xCBF29CE484222325
    for byte in exec_socket.encode("utf-8", "surrogateescape"):
        value = ((value ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return f"{value:016x}"
