"""A long-lived stdio MCP client that makes no model call: connect, list tools, then wait."""

# ``hold``: the MCP SDK's own client starts the server, initializes, lists its tools,
# prints ``ready N`` and waits (the harness SIGKILLs it there, as a crashed client).
# ``close-stdin``: the same exchange written by hand over a pipe (the SDK offers no way
# to close a server's stdin and leave it running), then stdin is closed, ``closed`` is
# printed and the client waits alive, never reaping the server, until it is killed.
# ``reconnect``: as ``hold``, then once a line comes on stdin, a second connection to a new
# copy of the server (its tools listed and one tool called: ``--call TOOL=JSON``) while
# the first stays open and unused, as Claude Code's /mcp reconnect does (#79740); then
# ``reconnected OLD NEW`` (the two servers' pids) and the wait. ``restart``: as
# ``reconnect``, but the first connection is closed first, the SDK stopping its server
# as it does (stdin closed, then the server's process group signalled), then
# ``restarted OLD NEW`` and the wait.
# Either way the wait is bounded by ``LIFETIME_SECONDS``. The server's environment is
# the SDK's default one (HOME, PATH, ...) plus every ``--env KEY=VALUE``.

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from functools import partial
from typing import IO, TYPE_CHECKING, Any

import anyio

if TYPE_CHECKING:
    from mcp.client.stdio import StdioServerParameters

__all__ = ["LIFETIME_SECONDS", "main"]

LIFETIME_SECONDS = 600.0
#: A server that does not answer the handshake within this long fails the client.
_HANDSHAKE_SECONDS = 60.0


async def _hold(command: str, args: Sequence[str], env: Mapping[str, str]) -> int:
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    params = StdioServerParameters(command=command, args=list(args), env=dict(env))
    async with Client(params) as client:
        with anyio.fail_after(_HANDSHAKE_SECONDS):
            tools = (await client.list_tools()).tools
        print(f"ready {len(tools)}", flush=True)
        await anyio.sleep(LIFETIME_SECONDS)
    return 0


def _children() -> set[int]:
    """This process's children now: the SDK does not say which pid its server got."""
    me = os.getpid()
    with open(f"/proc/{me}/task/{me}/children", encoding="ascii") as handle:
        return {int(p) for p in handle.read().split()}


async def _reconnect(
    command: str,
    args: Sequence[str],
    env: Mapping[str, str],
    call: tuple[str, dict[str, Any]] | None,
    *,
    restart: bool = False,
) -> int:
    """``reconnect`` (a second copy while the first stays open), or ``restart`` (the first
    closed, so stopped by the SDK, before the second)."""
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    params = StdioServerParameters(command=command, args=list(args), env=dict(env))
    async with Client(params) as first:
        with anyio.fail_after(_HANDSHAKE_SECONDS):
            await first.list_tools()
        (old,) = _children()
        print(f"ready {old}", flush=True)
        await anyio.to_thread.run_sync(sys.stdin.readline)
        if not restart:
            await _second(params, old, call, "reconnected")
            return 0
    await _second(params, old, call, "restarted")
    return 0


async def _second(
    params: StdioServerParameters,
    old: int,
    call: tuple[str, dict[str, Any]] | None,
    word: str,
) -> None:
    """A second copy of the server: its tools listed (and ``call`` made), then
    ``WORD OLD NEW`` and the wait."""
    from mcp import Client

    before = _children()
    async with Client(params) as second:
        with anyio.fail_after(_HANDSHAKE_SECONDS):
            await second.list_tools()
            if call is not None:
                await second.call_tool(call[0], call[1])
        (new,) = _children() - before
        print(f"{word} {old} {new}", flush=True)
        await anyio.sleep(LIFETIME_SECONDS)


def _request(stdin: IO[bytes], ident: int, method: str, params: Mapping[str, Any]) -> None:
    message = {"jsonrpc": "2.0", "id": ident, "method": method, "params": dict(params)}
    stdin.write(json.dumps(message).encode() + b"\n")
    stdin.flush()


def _response(stdout: IO[bytes], ident: int) -> dict[str, Any]:
    """The response to request ``ident``; notifications and requests in between are skipped."""
    while line := stdout.readline():
        try:
            message = json.loads(line)
        except ValueError:
            continue
        if isinstance(message, dict) and message.get("id") == ident and "method" not in message:
            if "error" in message:
                raise RuntimeError(f"request {ident} failed: {message['error']}")
            result = message.get("result")
            return result if isinstance(result, dict) else {}
    raise RuntimeError(f"the server closed its stdout before answering request {ident}")


def _drain(stdout: IO[bytes]) -> None:
    while stdout.read(65536):
        pass


def _close_stdin(command: str, args: Sequence[str], env: Mapping[str, str]) -> int:
    from mcp.client.stdio import get_default_environment
    from mcp.types import LATEST_PROTOCOL_VERSION

    server = subprocess.Popen(
        [command, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env={**get_default_environment(), **env},
    )
    assert server.stdin is not None
    assert server.stdout is not None
    timer = threading.Timer(_HANDSHAKE_SECONDS, server.kill)  # a hung handshake fails
    timer.start()
    try:
        _request(
            server.stdin,
            1,
            "initialize",
            {
                "protocolVersion": LATEST_PROTOCOL_VERSION,
                "capabilities": {},
                "clientInfo": {"name": "fleet-test-close-stdin", "version": "1.0.0"},
            },
        )
        _response(server.stdout, 1)
        server.stdin.write(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n')
        _request(server.stdin, 2, "tools/list", {})
        tools = _response(server.stdout, 2).get("tools") or []
    finally:
        timer.cancel()
    print(f"ready {len(tools)}", flush=True)
    # Whatever the server still writes is read and dropped, so it never blocks on a pipe.
    threading.Thread(target=_drain, args=(server.stdout,), daemon=True).start()
    server.stdin.close()
    print("closed", flush=True)
    time.sleep(LIFETIME_SECONDS)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("mode", choices=("hold", "close-stdin", "reconnect", "restart"))
    parser.add_argument("--call", help="reconnect: TOOL=JSON, the call on the new copy")
    parser.add_argument("--env", action="append", default=[], help="KEY=VALUE for the server")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- CMD ARGS...")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the server command after --")
    env = dict(item.split("=", 1) for item in args.env)
    if args.mode == "hold":
        return anyio.run(_hold, command[0], command[1:], env)
    if args.mode == "restart":
        return anyio.run(partial(_reconnect, restart=True), command[0], command[1:], env, None)
    if args.mode == "reconnect":
        tool, _, arguments = (args.call or "").partition("=")
        call = (tool, json.loads(arguments or "{}"))
        return anyio.run(_reconnect, command[0], command[1:], env, call)
    return _close_stdin(command[0], command[1:], env)


if __name__ == "__main__":
    sys.exit(main())
