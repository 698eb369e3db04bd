"""How each real client runs one headless session: its own config file, its environment
pointed at the loopback stand-in, its command line."""

# Claude Code reads the project's .mcp.json (the project trusted and its servers approved
# in ~/.claude.json) and ANTHROPIC_BASE_URL; Codex CLI reads ~/.codex/config.toml, whose
# [model_providers.standin] names the stand-in's base_url (wire_api "responses"); Gemini
# CLI reads ~/.gemini/settings.json and GOOGLE_GEMINI_BASE_URL. Each may call the MCP tools
# without asking: Claude Code through --allowedTools, Codex and Gemini through their
# approval bypasses (the session runs in a namespace with nothing to harm but loopback).

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from tests.realclients.harness import ClientHome, ServerEntry, client_env

__all__ = ["FAMILY", "SESSION_CLIENTS", "STANDIN_PORT", "config_file", "session_argv",
           "session_env", "write_config"]  # fmt: skip

SESSION_CLIENTS = ("claude", "codex", "gemini")
#: ``clients wrap --client`` and the rows' client_type, per client.
FAMILY = {"claude": "claude_code", "codex": "codex", "gemini": "gemini"}
#: The stand-in's port inside each session's own namespace (no other session shares it).
STANDIN_PORT = 18080
_PROMPT = "Call one tool of every MCP server you have, then say done."
_BASE = f"http://127.0.0.1:{STANDIN_PORT}"


def config_file(client: str, home: ClientHome) -> Path:
    if client == "claude":
        return home.project / ".mcp.json"
    if client == "codex":
        return home.home / ".codex" / "config.toml"
    return home.home / ".gemini" / "settings.json"


def _toml(text: str) -> str:
    return json.dumps(text)  # a JSON string is a valid TOML basic string


def write_config(client: str, home: ClientHome, entries: Sequence[ServerEntry]) -> Path:
    """The client's own file listing ``entries``, as a user would have written it."""
    path = config_file(client, home)
    path.parent.mkdir(parents=True, exist_ok=True)
    if client == "claude":
        servers = {e.name: {"command": e.command, "args": list(e.args), "env": dict(e.env)}
                   for e in entries}  # fmt: skip
        path.write_text(json.dumps({"mcpServers": servers}, indent=2))
        trusted = {"enableAllProjectMcpServers": True, "hasTrustDialogAccepted": True}
        claude = {"hasCompletedOnboarding": True, "projects": {str(home.project): trusted}}
        (home.home / ".claude.json").write_text(json.dumps(claude, indent=2))
    elif client == "codex":
        lines = [
            'model = "stand-in"',
            'model_provider = "standin"',
            "",
            "[model_providers.standin]",
            'name = "loopback stand-in"',
            f"base_url = {_toml(_BASE + '/v1')}",
            'wire_api = "responses"',
            "",
        ]
        for e in entries:
            # required: the first turn waits until every server has started (else Codex
            # may begin without the slower ones' tools).
            lines += [f"[mcp_servers.{e.name}]", f"command = {_toml(e.command)}",
                      f"args = [{', '.join(_toml(a) for a in e.args)}]", "required = true", "",
                      f"[mcp_servers.{e.name}.env]"]  # fmt: skip
            lines += [f"{k} = {_toml(v)}" for k, v in e.env.items()]
            lines.append("")
        path.write_text("\n".join(lines))
    else:
        servers = {e.name: {"command": e.command, "args": list(e.args), "env": dict(e.env)}
                   for e in entries}  # fmt: skip
        settings = {
            "mcpServers": servers,
            "telemetry": {"enabled": False},
            "privacy": {"usageStatisticsEnabled": False},
            "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False},
            "security": {"auth": {"selectedType": "gemini-api-key"}},
        }
        path.write_text(json.dumps(settings, indent=2))
        folders = {str(home.project): "TRUST_FOLDER"}
        (path.parent / "trustedFolders.json").write_text(json.dumps(folders))
    return path


def session_env(client: str, home: ClientHome) -> dict[str, str]:
    env = client_env(home.home)
    if client == "claude":
        env |= {"ANTHROPIC_BASE_URL": _BASE, "ANTHROPIC_API_KEY": "sk-stand-in"}
    elif client == "codex":
        env |= {"CODEX_HOME": str(home.home / ".codex"), "OPENAI_API_KEY": "sk-stand-in"}
    else:
        env |= {"GOOGLE_GEMINI_BASE_URL": _BASE, "GEMINI_API_KEY": "stand-in"}
    return env


def session_argv(
    client: str, binary: Path, entries: Sequence[ServerEntry], *, interactive: bool = False
) -> list[str]:
    """The client's command line: a headless session with the prompt, or (``interactive``)
    the interactive one, which waits for what is typed on its terminal."""
    if interactive:
        if client != "gemini":
            raise ValueError(f"no interactive session of {client} is driven here yet")
        return [str(binary), "--skip-trust", "--yolo"]
    if client == "claude":
        allowed = ",".join(f"mcp__{e.name}" for e in entries)
        return [str(binary), "-p", _PROMPT, "--allowedTools", allowed]
    if client == "codex":
        return [str(binary), "exec", "--dangerously-bypass-approvals-and-sandbox",
                "--skip-git-repo-check", _PROMPT]  # fmt: skip
    return [str(binary), "-p", _PROMPT, "--skip-trust", "--yolo"]
