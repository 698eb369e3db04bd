"""Run one client session inside a network namespace that has only loopback.

Started as ``unshare -n python -m tests.sessions.netns ...`` (``unshare -rn`` when not
root): it brings ``lo`` up, serves the model stand-in on 127.0.0.1, writes the client's
pid to ``--pidfile``, runs the client with its output in ``--output``, and exits with the
client's status. Nothing outside the namespace can be reached from it: the namespace has
no other interface, and Unix sockets (the supervisor's) are files, not addresses.
"""

from __future__ import annotations

import argparse
import fcntl
import os
import socket
import struct
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from tests.sessions.standin import Script, ToolCall, parse_call, serve

__all__ = ["loopback_up", "main"]

_SIOCGIFFLAGS = 0x8913
_SIOCSIFFLAGS = 0x8914
_IFF_UP = 0x1


def loopback_up() -> None:
    """``ip link set lo up``, without needing iproute2."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        request = struct.pack("16sh", b"lo", 0)
        flags = struct.unpack("16sh", fcntl.ioctl(sock, _SIOCGIFFLAGS, request))[1]
        fcntl.ioctl(sock, _SIOCSIFFLAGS, struct.pack("16sh", b"lo", flags | _IFF_UP))


def _only_loopback() -> list[str]:
    """The interfaces this namespace has besides ``lo`` (there must be none)."""
    return [name for _, name in socket.if_nameindex() if name != "lo"]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True, help="the stand-in's port")
    parser.add_argument("--log", type=Path, required=True, help="the stand-in's request log")
    parser.add_argument("--call", action="append", default=[], type=parse_call)
    parser.add_argument("--hold-final", type=Path, help="see standin.Script.hold_final")
    parser.add_argument("--pidfile", type=Path, required=True, help="the client's pid")
    parser.add_argument("--output", type=Path, required=True, help="the client's output")
    parser.add_argument("--timeout", type=float, default=240.0, help="the client's limit")
    parser.add_argument("client", nargs=argparse.REMAINDER, help="-- CLIENT ARGS...")
    args = parser.parse_args(argv)
    client = args.client[1:] if args.client[:1] == ["--"] else args.client
    others = _only_loopback()
    if others:
        sys.stderr.write(f"netns: not an empty namespace, it has {others}\n")
        return 125
    loopback_up()
    calls: tuple[ToolCall, ...] = tuple(args.call)
    server = serve(Script(calls, args.log, args.hold_final), args.port)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    with args.output.open("wb") as output:
        process = subprocess.Popen(
            client, env=env, stdin=subprocess.DEVNULL, stdout=output, stderr=subprocess.STDOUT
        )
        args.pidfile.write_text(f"{process.pid}\n")
        try:
            return process.wait(timeout=args.timeout)
        except subprocess.TimeoutExpired:
            process.kill()  # the test kills the rest of the client's tree by its pids
            process.wait()
            return 124
        finally:
            server.shutdown()


if __name__ == "__main__":
    raise SystemExit(main())
