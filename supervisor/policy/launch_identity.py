"""Instance and session ids derived at run time from the launching client process."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from hashlib import sha256

from supervisor.policy.exec_marker import safe_label

__all__ = ["client_family_from_command", "launch_instance_id", "server_session_id"]

#: Command words that name a client family, looked up in a client's argv (basenames and
#: path parts): a native client runs as itself, a Node one as ``node .../gemini-cli/...``.
_CLIENT_WORDS: tuple[tuple[str, str], ...] = (
    ("claude-code", "claude_code"),
    ("claude", "claude_code"),
    ("gemini-cli", "gemini"),
    ("gemini", "gemini"),
    ("codex", "codex"),
    ("cursor", "cursor"),
    ("grok", "grok"),
)


def client_family_from_command(argv: Sequence[str], aliases: Mapping[str, str]) -> str | None:
    """The client family a process's command line names (``claude``, ``node …/gemini-cli/…``),
    or None. ``aliases`` maps normalized names to families (``CLIENT_ALIASES``)."""
    for arg in argv[:3]:
        for part in reversed(arg.replace("\\", "/").split("/")):
            word = part.lower()
            if word in aliases:
                return aliases[word]
            for needle, family in _CLIENT_WORDS:
                if word == needle or word.startswith(needle + "."):
                    return family
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
