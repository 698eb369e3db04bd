"""The MCP tools over stdio, bridged to the daemon's socket (``fleet-supervisor mcp``)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

import anyio
from anyio.abc import AsyncResource

from supervisor.client import AsyncClient
from supervisor.observe.logs import configure_logging
from supervisor.surfaces.mcp.backend import ToolBackend
from supervisor.surfaces.mcp.bridge_control import SocketOperationCalls
from supervisor.surfaces.mcp.size import DEFAULT_MAX_RESULT_BYTES
from supervisor.surfaces.mcp.stdio import serve_stdio
from supervisor.surfaces.mcp.tools import build_mcp_server
from supervisor.wire import TOKEN_ENV

__all__ = [
    "SocketToolBackend",
    "main",
    "run_stdio_bridge",
    "serve_mcp_stdio",
]

#: How long open HTTP streams get to finish when the daemon stops.
_HTTP_DRAIN_SECONDS = 5


# --- stdio: forward to the daemon -------------------------------------------------------


class SocketToolBackend(SocketOperationCalls, AsyncResource):
    """A ToolBackend that asks the running daemon over its local socket.

    This is what ``fleet-supervisor mcp`` (stdio) runs on: a process of its own
    that forwards every tool call. The MCP-side profile is ignored: the token
    travels with every request and the daemon authenticates it and decides,
    exactly as for the CLI, so this process is trusted with nothing. One
    connection is kept (and remade if the daemon drops it); close with ``aclose``
    (or leave ``async with``: ``AsyncResource``).
    Every declared operation is forwarded by ``SocketOperationCalls.call``.
    """

    def __init__(self, socket_path: str | Path, token: str, *, timeout: float = 30.0) -> None:
        self._client = AsyncClient(socket_path, token=token, timeout=timeout)

    async def aclose(self) -> None:
        await self._client.aclose()


async def serve_mcp_stdio(
    backend: ToolBackend, *, max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES
) -> None:
    """Serve the fleet tools on this process's stdin/stdout until the client disconnects."""
    # No profile on this side: a socket backend carries its own credentials (see above).
    server = build_mcp_server(
        backend, profile_resolver=lambda: None, max_result_bytes=max_result_bytes
    )
    await serve_stdio(server)


async def _bridge(socket_path: str | Path, token: str, max_result_bytes: int) -> None:
    async with SocketToolBackend(socket_path, token) as backend:
        await serve_mcp_stdio(backend, max_result_bytes=max_result_bytes)


def run_stdio_bridge(
    socket_path: str | Path, token: str, *, max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES
) -> int:
    """Blocking entry point for ``fleet-supervisor mcp``; returns the exit code.

    Starts even when the daemon is down: each tool call then answers with a
    structured ``supervisor_unavailable`` result, which tells the model more than
    an MCP server that failed to start.
    """
    # stdout is the MCP transport: every log line must go to stderr.
    configure_logging("warning", stream=sys.stderr)
    anyio.run(_bridge, socket_path, token, max_result_bytes)
    return 0


# --- python -m supervisor.surfaces.mcp.bridge ------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m supervisor.surfaces.mcp.bridge",
        description="Serve the fleet MCP tools over stdio via the running supervisor daemon.",
    )
    parser.add_argument("--socket", required=True, type=Path, help="the daemon's socket path")
    parser.add_argument("--token", help=f"profile token (default: ${TOKEN_ENV})")
    args = parser.parse_args(argv)
    token = args.token or os.environ.get(TOKEN_ENV, "")
    if not token:
        sys.stderr.write(f"mcp_bridge: a profile token is required (--token or ${TOKEN_ENV})\n")
        return 2
    return run_stdio_bridge(args.socket, token)


if __name__ == "__main__":
    sys.exit(main())
