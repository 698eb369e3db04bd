"""`fleet-supervisor namespace-probe`: an offline spawn handshake per namespace (never proof)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from supervisor.client_configs.locations import CLIENTS
from supervisor.policy.control.namespace_health import (
    DEFAULT_NAMESPACES,
    PROBE_SOURCE_OFFLINE,
    classify_namespace_probe,
    required_tool_for,
)

if TYPE_CHECKING:
    from mcp import StdioServerParameters

__all__ = [
    "add_probe_parser",
    "default_mcp_config_path",
    "discovered_servers",
    "probe_namespace",
    "run_probe_command",
]

CONFIG_ENV = "MCP_CONFIG_PATH"


def default_mcp_config_path() -> Path | None:
    """``$MCP_CONFIG_PATH`` when set; else None: the clients' own files are read."""
    configured = os.environ.get(CONFIG_ENV)
    return Path(configured) if configured else None


def add_probe_parser(commands: Any) -> None:
    probe = commands.add_parser(
        "namespace-probe",
        help="spawn each namespace's server from an MCP config and call its required tool "
        "(offline diagnostics only; never proof of the client's namespace)",
    )
    probe.add_argument(
        "--config",
        dest="mcp_config",
        type=Path,
        help=f"one MCP config JSON with mcpServers (default: ${CONFIG_ENV}, else every "
        "client's own configuration, as `clients list` finds it)",
    )
    probe.add_argument("--client", choices=CLIENTS, help="only this client's configuration")
    probe.add_argument("--home", type=Path, help="the user's home for --client (default: ~)")
    probe.add_argument("--project", type=Path, help="the project (default: the cwd)")
    probe.add_argument(
        "--namespace",
        action="append",
        dest="namespaces",
        help=f"repeatable (default: {', '.join(DEFAULT_NAMESPACES)})",
    )
    probe.add_argument("--timeout", type=float, default=30.0, help="seconds per namespace")
    probe.add_argument("--json", action="store_true", help="machine-readable output")


def _describe(exc: BaseException) -> str:
    # Task groups wrap the transport's own error; the leaf says what happened ("EOF").
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(_describe(inner) for inner in exc.exceptions)
    return str(exc) or type(exc).__name__


def _call_text(result: Any) -> str:
    parts = [getattr(block, "text", "") for block in getattr(result, "content", None) or []]
    return " ".join(p for p in parts if p) or "the tool call returned an error"


async def _handshake(
    params: StdioServerParameters, tool: str, time_limit: float
) -> tuple[list[str] | None, dict[str, Any]]:
    """initialize/initialized, tools/list, tools/call: (listed tools, probe result)."""
    # The SDK is imported here, not at module level: the CLI registers this command's
    # parser for every command, and `run` or `exec` must not load the MCP stack.
    from mcp import Client

    listed: list[str] | None = None
    try:
        with anyio.fail_after(time_limit):
            # The initialize handshake explicitly: the point is to exercise that path.
            async with Client(params, mode="legacy") as client:
                listed = [t.name for t in (await client.list_tools()).tools]
                if tool not in listed:
                    return listed, {"success": False, "error": f"{tool} is not listed"}
                called = await client.call_tool(tool, {})
                if called.is_error:
                    return listed, {"success": False, "error": _call_text(called)}
                return listed, {"success": True, "result": called.structured_content}
    except TimeoutError:
        failure = {"error": f"no answer within {time_limit:g}s (timeout)"}
        return listed, {"success": False, **failure, "error_type": "namespace_timeout"}
    except Exception as exc:  # every failure is evidence: reported, not raised
        return listed, {"success": False, "error": _describe(exc)}


async def probe_namespace(
    name: str,
    entry: Mapping[str, Any] | None,
    *,
    config_path: str | None,
    time_limit: float = 30.0,
    required_tool: str | None = None,
) -> dict[str, Any]:
    """Spawn ``entry``'s server and classify the handshake as ``offline_spawn``."""
    tool = required_tool_for(name, required_tool)
    if entry is None or not isinstance(entry.get("command"), str):
        return classify_namespace_probe(
            name,
            required_tool=tool,
            config_path=config_path,
            configured=False,
            probe_source=PROBE_SOURCE_OFFLINE,
        )
    from mcp import StdioServerParameters  # lazily, like _handshake's Client

    env = {str(k): str(v) for k, v in (entry.get("env") or {}).items()}
    params = StdioServerParameters(
        command=entry["command"],
        args=[str(a) for a in entry.get("args") or []],
        env={**os.environ, **env},
    )
    listed, probe = await _handshake(params, tool, time_limit)
    return classify_namespace_probe(
        name,
        required_tool=tool,
        registered_tools=listed,
        probe_result=probe,
        process={"profile": env.get("GITEA_MCP_PROFILE"), "env": env},
        config_path=config_path,
        probe_source=PROBE_SOURCE_OFFLINE,
    )


def _human(result: Mapping[str, Any]) -> str:
    state = "OK" if result["healthy"] else f"FAIL ({result['error_type']})"
    lines = [f"{result['namespace']}: {state} [{result['probe_source']}]"]
    if result.get("error_message"):
        lines.append(f"  error: {result['error_message']}")
    lines.extend(f"  reason: {r}" for r in result["reasons"])
    lines.append(f"  diagnostics: {json.dumps(result['diagnostics'], sort_keys=True)}")
    lines.extend(f"  remediation: {r}" for r in result["remediation"])
    return "\n".join(lines)


async def _probe_all(
    servers: Mapping[str, Any], names: Sequence[str], config_path: str, time_limit: float
) -> list[dict[str, Any]]:
    # One at a time: each spawns a server, and their output stays readable.
    return [
        await probe_namespace(
            name, servers.get(name), config_path=config_path, time_limit=time_limit
        )
        for name in names
    ]


def discovered_servers(
    client: str | None, home: Path, project: Path
) -> tuple[dict[str, Any], dict[str, str], list[str]]:
    """Every server entry of the clients' own files: entries, the file of each, problems.

    Files are read in ``clients list`` order; a name found twice keeps its first entry.
    """
    from supervisor.client_configs.documents import DocumentError, read_entries
    from supervisor.client_configs.locations import config_files

    servers: dict[str, Any] = {}
    sources: dict[str, str] = {}
    problems = []
    for file in config_files(home, project):
        if client is not None and file.client != client:
            continue
        try:
            text = file.path.read_text(encoding="utf-8")
            views = read_entries(text, file.fmt, file.key, claude=file.claude)
        except (OSError, UnicodeDecodeError, DocumentError) as exc:
            problems.append(f"{file.path}: {exc}")
            continue
        for view in views:
            if view.name not in servers:
                servers[view.name] = dict(view.fields)
                sources[view.name] = str(file.path)
    return servers, sources, problems


def _one_file(path: Path) -> dict[str, Any] | str:
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return f"cannot read {path}: {exc}"
    servers = config.get("mcpServers") if isinstance(config, dict) else None
    if not isinstance(servers, dict):
        return f"{path} has no mcpServers object"
    return servers


def run_probe_command(args: argparse.Namespace) -> int:
    """Exit 0 only if every namespace was configured and answered its required tool."""
    path = args.mcp_config or (None if args.client else default_mcp_config_path())
    if path is not None:
        loaded = _one_file(path)
        if isinstance(loaded, str):
            sys.stderr.write(f"namespace-probe: {loaded}\n")
            return 2
        servers, where = loaded, str(path)
    else:
        home = (args.home or Path.home()).expanduser().absolute()
        project = (args.project or Path.cwd()).expanduser().absolute()
        servers, sources, problems = discovered_servers(args.client, home, project)
        for problem in problems:
            sys.stderr.write(f"namespace-probe: {problem}\n")
        if problems:
            return 2
        where = ", ".join(sorted(set(sources.values()))) or "no client configuration found"
    names = args.namespaces or list(DEFAULT_NAMESPACES)
    results = anyio.run(_probe_all, servers, names, where, args.timeout)
    if args.json:
        sys.stdout.write(json.dumps(results, indent=2, default=str) + "\n")
    else:
        sys.stdout.write("\n".join(_human(r) for r in results) + "\n")
        sys.stdout.write(
            "note: offline_spawn results never prove the client's namespace; record a "
            "client_namespace probe with `work health` for the gates.\n"
        )
    return 0 if all(r["healthy"] for r in results) else 1
