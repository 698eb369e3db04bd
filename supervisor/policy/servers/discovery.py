"""Discovery's verdict on one process seen for the first time: an MCP server or not, and why."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from supervisor.policy.commands import command_name
from supervisor.policy.servers.abandoned import STDIO_ABANDONED
from supervisor.policy.servers.census import (
    PROVENANCE_OBSERVED,
    PROVENANCE_WRAPPED,
    ProcessRef,
)
from supervisor.policy.servers.rules import (
    DEFAULT_RULES,
    DiscoveryRules,
    client_of,
    mcp_word,
)

__all__ = [
    "STDIO_ABANDONED",
    "STDIO_KINDS",
    "UNKNOWN_OWNER",
    "ConfiguredServer",
    "Judgement",
    "ParentSight",
    "Sighting",
    "classify",
    "configured_match",
    "plain_argv",
]

#: What a stdio descriptor may be for a server: a pipe or one end of a socket pair.
STDIO_KINDS = frozenset({"pipe", "socket"})
#: The owner's name when the process its stdio is connected to is no client we know.
UNKNOWN_OWNER = "unknown"


@dataclass(frozen=True, slots=True, kw_only=True)
class Sighting:
    """What a first sight of one process read: who it is, what it runs, where its stdio goes."""

    process: ProcessRef
    ppid: int
    argv: tuple[str, ...]
    comm: str
    env_keys: tuple[str, ...]
    #: Kind of fd 0 and fd 1: ``pipe``, ``socket``, ``tty``, ``file``, … (None: unreadable).
    stdin: str | None
    stdout: str | None
    #: The exec marker in its environment names this very process as a wrapped leader.
    wrapped: bool = False
    #: fd 0 is /dev/null and ``stdin``/``stdout`` are the kinds of the descriptors above
    #: fd 2 that the parent holds the other ends of: the stdio the MCP Python SDK moves
    #: there so that a stray print cannot corrupt the protocol.
    moved: bool = False
    #: Its stdio are socket-pair halves or pipes whose other ends the kernel says no
    #: process holds: whoever started it closed them or exited, wherever it was (its
    #: parent now is whoever adopted it). ``abandoned_via`` is the evidence word.
    abandoned: bool = False
    abandoned_via: str = STDIO_ABANDONED


@dataclass(frozen=True, slots=True, kw_only=True)
class ParentSight:
    """The parent at first sight, and whether it holds the other ends of the child's stdio."""

    process: ProcessRef
    argv: tuple[str, ...]
    comm: str
    #: Both the child's stdin and stdout are connected to descriptors the parent holds
    #: (None: cannot tell, e.g. the parent's descriptors are unreadable).
    connected: bool | None


@dataclass(frozen=True, slots=True, kw_only=True)
class ConfiguredServer:
    """One server entry of a client config file the supervisor could read."""

    client: str
    name: str
    command: str
    args: tuple[str, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class Judgement:
    """A process taken for an MCP server: how, whose, on what evidence."""

    provenance: str
    owner: ProcessRef | None
    owner_name: str | None
    evidence: tuple[str, ...]


def plain_argv(argv: Sequence[str]) -> tuple[str, ...]:
    """A command line as its words. A program that rewrote its title (node's ``npx``
    shows ``npm exec -y pkg`` as one string) left one argument with spaces in it."""
    if len(argv) == 1 and " " in argv[0]:
        return tuple(argv[0].split())
    return tuple(argv)


def _entry_matches(argv: Sequence[str], entry: ConfiguredServer) -> bool:
    count = len(entry.args)
    if len(argv) < count + 1 or tuple(argv[len(argv) - count :]) != entry.args:
        return False
    before = argv[: len(argv) - count]
    wanted = command_name(entry.command)
    if command_name(before[-1]) == wanted:
        return True
    # npx runs as ``npm exec`` once it has set its title.
    return wanted == "npx" and [command_name(w) for w in before[-2:]] == ["npm", "exec"]


def configured_match(
    argv: Sequence[str], configured: Sequence[ConfiguredServer]
) -> ConfiguredServer | None:
    """The configured entry this command line runs: its arguments end the command line and
    the program just before them is the entry's command (by name: a client resolves it
    through PATH, a runner may sit in front)."""
    words = plain_argv(argv)
    return next((entry for entry in configured if _entry_matches(words, entry)), None)


def _stdio_evidence(seen: Sighting, connected: bool | None) -> str:
    plural = {"pipe": "pipes", "socket": "socketpair"}
    kind = plural.get(seen.stdin or "", "mixed") if seen.stdin == seen.stdout else "mixed"
    moved = "moved_" if seen.moved else ""
    return f"stdio_{moved}{kind}_to_parent" if connected else f"stdio_{moved}{kind}"


def classify(
    seen: Sighting,
    parent: ParentSight | None,
    configured: Sequence[ConfiguredServer] = (),
    rules: DiscoveryRules = DEFAULT_RULES,
) -> Judgement | None:
    """An MCP server, or None. Precision first: a process is one only if

    * the wrapper's exec marker names it (``wrapped``), or
    * its stdin and stdout (or, moved, the descriptors that carry them: ``Sighting.moved``)
      are pipes or socket-pair ends, and either its command line is a
      server configured in a client's config file, or its parent is a known MCP client
      holding the other ends of that stdio and its command names an MCP server, or
    * its command names an MCP server, it is no client itself, and its stdio are socket
      pairs or pipes whose other ends no process holds (``Sighting.abandoned``: a leak
      from before this supervisor ran, with no owner to record).

    The owner is the parent holding the other ends of its stdio, whatever that parent is.
    A client's own process under it (Gemini CLI relaunches itself) is never its server.
    """
    if seen.wrapped:
        return Judgement(
            provenance=PROVENANCE_WRAPPED, owner=None, owner_name=None, evidence=("exec_marker",)
        )
    if seen.stdin not in STDIO_KINDS or seen.stdout not in STDIO_KINDS:
        return None
    argv = plain_argv(seen.argv)
    entry = configured_match(argv, configured)
    connected = parent is not None and parent.connected is True
    client = None
    if parent is not None and connected:
        client = client_of(
            plain_argv(parent.argv), parent.comm, child_env=seen.env_keys, rules=rules
        )
    word = mcp_word(argv, rules)
    itself = client_of(argv, seen.comm, rules=rules)
    # Abandoned: an MCP-named process whose client left it (the leak that happened before
    # this supervisor ran); a client's own process is never one.
    abandoned = seen.abandoned and not connected and (word is not None and itself is None)
    if entry is None and (client is None or word is None) and not abandoned:
        return None
    if entry is None and client is not None and client == itself:
        return None  # the client's own process (Gemini CLI relaunches itself), not a server
    evidence = [_stdio_evidence(seen, connected)]
    if seen.abandoned and not connected:
        evidence.append(seen.abandoned_via)
    if client is not None:
        evidence.append(f"parent_known_client:{client}")
    if entry is not None:
        evidence.append(f"configured:{entry.client}:{entry.name}")
    if word is not None:
        evidence.append(f"command_names_mcp:{word}")
    owner = parent.process if parent is not None and connected else None
    return Judgement(
        provenance=PROVENANCE_OBSERVED,
        owner=owner,
        owner_name=(client or UNKNOWN_OWNER) if owner is not None else None,
        evidence=tuple(evidence),
    )
