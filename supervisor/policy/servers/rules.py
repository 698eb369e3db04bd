"""The one table discovery judges by: which processes are MCP clients, which commands servers."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from supervisor.policy.commands import command_name, runner_script
from supervisor.policy.known_clients import KNOWN_CLIENTS, SCRIPT_RUNNERS, KnownClient

__all__ = [
    "DEFAULT_RULES",
    "SDK_DEFAULT_ENV",
    "DiscoveryRules",
    "client_of",
    "mcp_word",
    "parse_extra_clients",
    "with_extras",
]


#: The environment the MCP SDKs (Python ``get_default_environment``, TypeScript
#: ``getDefaultEnvironment``) hand a stdio server: these names (where the client has
#: them), plus what the client passes explicitly.
SDK_DEFAULT_ENV = frozenset({"HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER"})

#: Programs that run a script or a package: the words after them name the program. The
#: client script runners, and the package runners and container engines besides.
_RUNNERS = SCRIPT_RUNNERS | frozenset(
    {"bunx", "npx", "npm", "pnpm", "pnpx", "yarn", "uv", "uvx", "pipx", "docker", "podman"}
)
#: How many words after a runner are looked at for a server's name.
_WORDS_AFTER_RUNNER = 8

#: A word names an MCP server when it holds ``mcp`` as a word of its own (``mcp-server-time``,
#: ``github-mcp-server``, ``mcp_server_fetch``), ends in it (``fastmcp``, ``@playwright/mcp``)
#: or names the protocol's own packages.
_MCP_WORD = re.compile(r"(?:^|[^a-z0-9])mcp(?:[^a-z]|$)|mcp$|modelcontextprotocol")


@dataclass(frozen=True, slots=True, kw_only=True)
class DiscoveryRules:
    """The clients and server words discovery accepts (defaults plus the operator's)."""

    clients: tuple[KnownClient, ...] = KNOWN_CLIENTS
    #: Extra words that mark a command as an MCP server (matched as whole words).
    server_words: frozenset[str] = frozenset()
    #: An SDK client's server has at most this many environment names beyond
    #: ``SDK_DEFAULT_ENV`` (a shell or an editor passes on dozens).
    sdk_extra_env: int = 12
    runners: frozenset[str] = field(default=_RUNNERS)


DEFAULT_RULES = DiscoveryRules()


def _is_runner(name: str, runners: frozenset[str]) -> bool:
    return name in runners or (name.startswith("python3.") and "python3" in runners)


def client_of(
    argv: Sequence[str],
    comm: str,
    *,
    child_env: Iterable[str] | None = None,
    rules: DiscoveryRules = DEFAULT_RULES,
) -> str | None:
    """The known client a process is (by its command line and ``comm``), or None.

    ``child_env``: the environment names of a server it started, for the SDK clients,
    which are told only by what they give their servers.
    """
    program = command_name(argv[0]) if argv else command_name(comm)
    names = {program, command_name(comm)}
    runner = _is_runner(program, rules.runners)
    script = runner_script(argv) if runner else ""
    if runner and script:
        names.add(command_name(script))
    for client in rules.clients:
        if names & client.names:
            return client.name
        if runner and any(package in script for package in client.packages):
            return client.name
    if child_env is None or not runner:
        return None
    env = frozenset(child_env)
    if "PATH" not in env or len(env - SDK_DEFAULT_ENV) > rules.sdk_extra_env:
        return None
    return next((c.name for c in rules.clients if _is_runner(program, c.runners)), None)


def _words(argv: Sequence[str], runners: frozenset[str]) -> list[str]:
    """The words that name what a command runs: the program, and after a runner the
    arguments that are not options (a script, a package, a module, an image)."""
    if not argv:
        return []
    words = [command_name(argv[0])]
    if not _is_runner(words[0], runners):
        return words
    for arg in argv[1 : 1 + _WORDS_AFTER_RUNNER]:
        if arg and not arg.startswith("-"):
            words.append(arg.lower().rstrip("/"))
    return words


def mcp_word(argv: Sequence[str], rules: DiscoveryRules = DEFAULT_RULES) -> str | None:
    """The word of a command line that names an MCP server (the evidence), or None."""
    for word in _words(argv, rules.runners):
        if _MCP_WORD.search(word) or command_name(word) in rules.server_words:
            return word
    return None


def parse_extra_clients(entries: Iterable[str]) -> tuple[KnownClient, ...]:
    """``NAME=WORD`` entries (a client named NAME whose program is WORD); ValueError names
    the first malformed one."""
    extra: dict[str, set[str]] = {}
    for entry in entries:
        name, equals, word = entry.partition("=")
        name, word = name.strip(), word.strip().lower()
        if not equals or not name or not word or "/" in word:
            raise ValueError(f"expected NAME=PROGRAM, got {entry!r}")
        extra.setdefault(name, set()).add(word)
    return tuple(KnownClient(name=n, names=frozenset(w)) for n, w in sorted(extra.items()))


def with_extras(
    extra_clients: Iterable[str] = (),
    server_words: Iterable[str] = (),
    base: DiscoveryRules = DEFAULT_RULES,
) -> DiscoveryRules:
    """``base`` with the operator's clients put first (they win a tie) and server words."""
    clients = parse_extra_clients(extra_clients)
    words = frozenset(w.strip().lower() for w in server_words if w.strip())
    return DiscoveryRules(
        clients=clients + base.clients,
        server_words=base.server_words | words,
        sdk_extra_env=base.sdk_extra_env,
        runners=base.runners,
    )
