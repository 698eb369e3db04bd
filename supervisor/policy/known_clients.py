"""The MCP client families the supervisor knows, and how each one's process is recognised."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["KNOWN_CLIENTS", "SCRIPT_RUNNERS", "KnownClient"]


@dataclass(frozen=True, slots=True, kw_only=True)
class KnownClient:
    """One MCP client family and how its process is told from any other.

    A process is this client when its program's name (``argv[0]``, or the script a
    runner such as ``node`` runs) is one of ``names``, or a runner's script path holds
    one of ``packages`` (the client's npm package or install directory). A client with
    ``runners`` is a program built on an MCP SDK: discovery recognises it only by the
    environment the SDK gives the servers it starts, under one of those runners.
    """

    name: str
    names: frozenset[str] = frozenset()
    packages: tuple[str, ...] = ()
    runners: frozenset[str] = frozenset()


_NODE_RUNNERS = frozenset({"node", "nodejs", "bun", "deno"})
_PYTHON_RUNNERS = frozenset({"python", "python3"})
#: Programs that run a client's script: the script then names the client.
SCRIPT_RUNNERS = _NODE_RUNNERS | _PYTHON_RUNNERS

#: Discovery reads every entry; launch identity credits a launch only to the seed's
#: families among them (``CLIENT_ALIASES``), so both tell a client by the same words.
KNOWN_CLIENTS: tuple[KnownClient, ...] = (
    KnownClient(
        name="claude_code",
        names=frozenset({"claude", "claude-code"}),
        packages=("@anthropic-ai/claude-code/",),
    ),
    KnownClient(
        name="claude_desktop",
        names=frozenset({"claude-desktop", "claude_desktop"}),
        packages=("/claude-desktop/", "/Claude/resources/"),
    ),
    KnownClient(name="codex", names=frozenset({"codex"}), packages=("@openai/codex/",)),
    KnownClient(
        name="gemini", names=frozenset({"gemini", "gemini-cli"}), packages=("@google/gemini-cli/",)
    ),
    KnownClient(name="grok", names=frozenset({"grok"})),
    KnownClient(name="cursor", names=frozenset({"cursor"}), packages=("/cursor/resources/app/",)),
    KnownClient(
        name="vscode",
        names=frozenset({"code", "code-insiders", "codium", "code-oss"}),
        packages=("/vscode/resources/app/", "/code/resources/app/"),
    ),
    KnownClient(name="zed", names=frozenset({"zed", "zed-editor", "zeditor"})),
    KnownClient(
        name="mcp_inspector",
        names=frozenset({"mcp-inspector", "mcp-inspector-cli"}),
        packages=("@modelcontextprotocol/inspector",),
    ),
    KnownClient(name="mcp_python_sdk", runners=_PYTHON_RUNNERS),
    KnownClient(name="mcp_typescript_sdk", runners=_NODE_RUNNERS),
)
