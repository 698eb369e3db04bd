"""Where each MCP client keeps its server configuration, for this user and one project."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["CLIENTS", "FAMILY", "ConfigFile", "config_files", "parse_file_override"]

#: The clients this command knows, in the order they are listed.
CLIENTS = ("claude_code", "claude_desktop", "gemini", "codex", "cursor", "vscode")

#: The ``--client`` word a wrapped entry carries. Claude Desktop and VS Code have no
#: family of their own in the registry: the daemon takes a word it does not know as
#: "not given" and reads the family from the launching process's command instead.
FAMILY: Mapping[str, str] = {
    "claude_code": "claude_code",
    "claude_desktop": "claude_desktop",
    "gemini": "gemini",
    "codex": "codex",
    "cursor": "cursor",
    "vscode": "vscode",
}


@dataclass(frozen=True, slots=True)
class ConfigFile:
    """One configuration file of one client."""

    client: str
    scope: str  # user | project
    path: Path
    fmt: str  # json | toml
    #: The JSON member holding the server map (``mcpServers``; VS Code: ``servers``).
    key: str = "mcpServers"
    #: A project-scope file's project: the directory its client starts servers in.
    project: Path | None = None

    @property
    def claude(self) -> bool:
        """Claude Code's ``~/.claude.json`` also has per-project maps under ``projects``."""
        return self.client == "claude_code" and self.scope == "user"


def _known(client: str, scope: str, path: Path, project: Path | None = None) -> ConfigFile:
    if client == "codex":
        return ConfigFile(client, scope, path, "toml", "mcp_servers", project)
    key = "servers" if client == "vscode" else "mcpServers"
    return ConfigFile(client, scope, path, "json", key, project)


def _candidates(home: Path, project: Path) -> list[tuple[str, str, Path]]:
    return [
        ("claude_code", "user", home / ".claude.json"),
        ("claude_code", "project", project / ".mcp.json"),
        ("claude_desktop", "user", home / ".config" / "Claude" / "claude_desktop_config.json"),
        ("gemini", "user", home / ".gemini" / "settings.json"),
        ("gemini", "project", project / ".gemini" / "settings.json"),
        ("codex", "user", home / ".codex" / "config.toml"),
        ("cursor", "user", home / ".cursor" / "mcp.json"),
        ("cursor", "project", project / ".cursor" / "mcp.json"),
        ("vscode", "project", project / ".vscode" / "mcp.json"),
    ]


def parse_file_override(text: str) -> tuple[str, Path]:
    """``CLIENT=PATH`` from ``--file``; ValueError with the reason otherwise."""
    client, equals, path = text.partition("=")
    if not equals or not path:
        raise ValueError(f"--file needs CLIENT=PATH, got {text!r}")
    if client not in CLIENTS:
        raise ValueError(f"--file: unknown client {client!r} (one of {', '.join(CLIENTS)})")
    return client, Path(path).expanduser().absolute()


def config_files(
    home: Path, project: Path, overrides: Sequence[tuple[str, Path]] = ()
) -> list[ConfigFile]:
    """Every file that exists, plus every ``--file`` given (those even when missing).

    A client named by ``--file`` is read only from the files given for it: the option
    replaces that client's discovery, so a test or a second setup is never mixed with
    the user's own files.
    """
    overridden = {client for client, _ in overrides}
    found = [
        _known(client, scope, path, project if scope == "project" else None)
        for client, scope, path in _candidates(home, project)
        if client not in overridden and (path.is_file() or path.is_symlink())
    ]
    found += [_known(client, "user", path) for client, path in overrides]
    return sorted(found, key=lambda f: CLIENTS.index(f.client))
