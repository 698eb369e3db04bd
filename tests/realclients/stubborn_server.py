"""A stdio MCP server that ignores stdin EOF and stop signals, with a child just as stubborn."""

# Standard library only: it runs under any Python 3.11, and its start-up stays fast.
# It answers ``initialize``, ``ping``, ``tools/list`` and ``tools/call`` (one echo tool),
# so a client shows it connected. Every signal it receives and the EOF on its stdin are
# appended to the log file named by ``--log`` (one line each: epoch seconds, pid, event),
# which is how the harness sees how a client tries to stop its servers. ``--polite``
# makes it exit on EOF and on SIGTERM/SIGINT/SIGHUP instead (an observer of well-behaved
# shutdown); ``--child`` starts one child process that ignores the same signals;
# ``--detached-child`` starts it in a session of its own, as Playwright starts its browser,
# so a client that signals the server's process group does not reach it;
# ``--hold-until PATH`` answers nothing until PATH exists (a test looks at the tree while
# the client still waits for it). Every wait is bounded: after ``LIFETIME_SECONDS`` it
# exits whatever happened.

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from types import FrameType
from typing import Any

__all__ = ["LIFETIME_SECONDS", "TOOL_NAME", "main"]

#: The longest any process of this script lives; tests kill it by pid long before.
LIFETIME_SECONDS = 600.0
#: The one tool it lists.
TOOL_NAME = "stubborn_echo"
_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


class _Log:
    def __init__(self, path: Path | None, role: str) -> None:
        self.path = path
        self.role = role

    def event(self, what: str) -> None:
        if self.path is None:
            return
        line = f"{time.time():.3f} {os.getpid()} {self.role} {what}\n"
        # O_APPEND: the server and its child write to one file, each line whole.
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)


def _install_handlers(log: _Log, *, polite: bool) -> None:
    def handler(signum: int, frame: FrameType | None) -> None:
        log.event(f"signal {signal.Signals(signum).name}")
        if polite:
            log.event("exit")
            os._exit(128 + signum)

    for signum in _STOP_SIGNALS:
        signal.signal(signum, handler)


def _sleep_out(deadline: float) -> None:
    """Sleep until ``deadline`` (monotonic); a signal's handler runs and the sleep goes on."""
    while (left := deadline - time.monotonic()) > 0:
        time.sleep(min(left, 1.0))


def _result(request: dict[str, Any]) -> dict[str, Any] | None:
    method = request.get("method")
    params = request.get("params") or {}
    if method == "initialize":
        return {
            "protocolVersion": params.get("protocolVersion", "2025-06-18"),
            "capabilities": {"tools": {"listChanged": False}},
            "serverInfo": {"name": "stubborn", "version": "1.0.0"},
        }
    if method == "ping":
        return {}
    if method == "tools/list":
        return {
            "tools": [
                {
                    "name": TOOL_NAME,
                    "description": "Return the text unchanged.",
                    "inputSchema": {
                        "type": "object",
                        "properties": {"text": {"type": "string"}},
                        "required": ["text"],
                    },
                }
            ]
        }
    if method == "tools/call":
        text = str((params.get("arguments") or {}).get("text", ""))
        return {"content": [{"type": "text", "text": text}], "isError": False}
    return None


def _answer(line: bytes) -> bytes | None:
    try:
        request = json.loads(line)
    except ValueError:
        return None
    if not isinstance(request, dict) or "id" not in request:
        return None  # a notification (or garbage): nothing to answer
    result = _result(request)
    if result is None:
        reply: dict[str, Any] = {
            "jsonrpc": "2.0",
            "id": request["id"],
            "error": {"code": -32601, "message": f"method not found: {request.get('method')}"},
        }
    else:
        reply = {"jsonrpc": "2.0", "id": request["id"], "result": result}
    return json.dumps(reply).encode() + b"\n"


def _hold(path: Path, deadline: float) -> None:
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.01)


def _serve(log: _Log, *, polite: bool, deadline: float, hold: Path | None = None) -> None:
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    if hold is not None:
        _hold(hold, deadline)
    while time.monotonic() < deadline:
        line = stdin.readline()
        if not line:
            log.event("eof")
            if polite:
                log.event("exit")
                return
            _sleep_out(deadline)
            return
        reply = _answer(line)
        if b'"tools/call"' in line:
            log.event("call")  # the session harness checks the call arrived
        if reply is not None:
            try:
                stdout.write(reply)
                stdout.flush()
            except BrokenPipeError:
                log.event("broken pipe")


def _start_child(log_path: Path | None, *, detached: bool = False) -> None:
    argv = [sys.executable, os.path.abspath(__file__), "--sleeper"]
    if log_path is not None:
        argv += ["--log", str(log_path)]
    # Not the server's pipes: the child must not keep the client's stdio open.
    subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=detached,
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--log", type=Path, help="append received signals and EOF here")
    parser.add_argument("--polite", action="store_true", help="exit on EOF and stop signals")
    parser.add_argument("--child", action="store_true", help="start one stubborn child")
    parser.add_argument("--detached-child", action="store_true", help="... in its own session")
    parser.add_argument("--hold-until", type=Path, help="answer nothing until this file exists")
    parser.add_argument("--sleeper", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    deadline = time.monotonic() + LIFETIME_SECONDS
    log = _Log(args.log, "child" if args.sleeper else "server")
    _install_handlers(log, polite=args.polite and not args.sleeper)
    log.event("start")
    if args.sleeper:
        _sleep_out(deadline)
        return 0
    if args.child or args.detached_child:
        _start_child(args.log, detached=args.detached_child)
    _serve(log, polite=args.polite, deadline=deadline, hold=args.hold_until)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
