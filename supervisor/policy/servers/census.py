"""The census record: one MCP server process on this host, what it holds, who owns it."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "PROVENANCE_OBSERVED",
    "PROVENANCE_WRAPPED",
    "Census",
    "OwnerClient",
    "ProcessRef",
    "ServerRecord",
    "Usage",
]

#: Launched through this supervisor's wrapper: registered, watched by the server guard.
PROVENANCE_WRAPPED = "wrapped"
#: Found by discovery on the host: never launcher-trusted, its evidence is all it has.
PROVENANCE_OBSERVED = "observed"


@dataclass(frozen=True, slots=True, kw_only=True)
class ProcessRef:
    """One process incarnation: the pid and the incarnation token (``ticks-<n>[@ino-<i>]``,
    compared with ``policy.incarnation.same_incarnation``, never with ``==``)."""

    pid: int
    start: str


@dataclass(frozen=True, slots=True, kw_only=True)
class OwnerClient:
    """The MCP client a server belongs to: its parent at first sight (or the wrapper's
    recorded client). ``name`` is the known-client table's name (``claude_code``,
    ``gemini``, ``codex``, ``inspector``, …); ``alive`` is None when it cannot be told."""

    process: ProcessRef
    name: str
    alive: bool | None
    #: The client's end of the server's stdio is still open (None: cannot tell).
    stdio_open: bool | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Usage:
    """What one server tree holds at one read; None where the kernel would not say."""

    rss_bytes: int | None
    pss_bytes: int | None
    cpu_seconds: float | None
    #: CPU over the interval since the previous read of this incarnation, in percent of
    #: one core; None at first sight.
    cpu_percent: float | None
    open_fds: int | None
    #: The tree's other members (children, grandchildren), leader excluded.
    children: tuple[ProcessRef, ...] = ()
    #: Bytes the tree's processes have read and written, summed (the kernel's rchar and
    #: wchar); None when any member's counters could not be read.
    io_bytes: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerRecord:
    """One MCP server (the leader of its tree) as the census sees it."""

    process: ProcessRef
    provenance: str
    command: tuple[str, ...]
    cwd: str | None
    #: The environment's variable names (sorted), never their values: duplicates are
    #: grouped by them and values may be secrets.
    env_keys: tuple[str, ...]
    uid: int | None
    owner: OwnerClient | None
    #: Why this process was taken for an MCP server: stable rule codes with their facts,
    #: e.g. ``("stdio_pipes_to_parent", "parent_known_client:claude_code")``.
    evidence: tuple[str, ...]
    first_seen: str
    age_seconds: float | None
    usage: Usage
    #: The wrapped server's registry row, None for an observed one.
    worker_identity: str | None = None
    #: No owner was recorded, and the kernel says no process holds the other end of any
    #: of its stdio sockets or pipes: whoever started it is gone. Or, what survived its
    #: server's leader while the owner runs: nothing of that stdio is left in its tree,
    #: and nothing connects it to the owner or another server. None: not judged, or not
    #: proven. ``stdio_detail`` says why, in words.
    stdio_abandoned: bool | None = None
    stdio_detail: str | None = None
    #: Seconds since its tree last did I/O, at least: since the sweep that first saw its
    #: counters move, or since it was first read if they never did. None: the kernel's
    #: counters could not be read, so nothing is known (and nothing is decided on it).
    idle_seconds: float | None = None
    #: When the server started, and since when its tree's counters have not moved, in
    #: seconds after boot (the clock process start times count in); None: unknown.
    started_since_boot: float | None = None
    quiet_since_boot: float | None = None
    #: The name a wrapped server registered under (``exec --name``); None when observed.
    label: str | None = None

    @property
    def duplicate_key(self) -> tuple[tuple[str, ...], str | None, tuple[str, ...]]:
        """Servers with one key run the same thing: same command and arguments, working
        directory and environment names."""
        return (self.command, self.cwd, self.env_keys)


@dataclass(frozen=True, slots=True, kw_only=True)
class Census:
    """Every server on this host at ``taken_at`` (monotonic seconds), sorted by pid."""

    servers: tuple[ServerRecord, ...]
    taken_at: float
