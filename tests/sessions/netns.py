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
import pty
import select
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Sequence
from pathlib import Path

from tests.offline import loopback_up, offline
from tests.sessions.standin import Script, ToolCall, parse_call, serve

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True, help="the stand-in's port")
    parser.add_argument("--log", type=Path, required=True, help="the stand-in's request log")
    parser.add_argument("--call", action="append", default=[], type=parse_call)
    parser.add_argument("--hold-final", type=Path, help="see standin.Script.hold_final")
    parser.add_argument("--pidfile", type=Path, required=True, help="the client's pid")
    parser.add_argument("--output", type=Path, required=True, help="the client's output")
    parser.add_argument("--timeout", type=float, default=240.0, help="the client's limit")
    parser.add_argument(
        "--pty-input",
        type=Path,
        help="run the client on a pseudo-terminal (an interactive session) and type what is "
        "appended to this file",
    )
    parser.add_argument("client", nargs=argparse.REMAINDER, help="-- CLIENT ARGS...")
    args = parser.parse_args(argv)
    client = args.client[1:] if args.client[:1] == ["--"] else args.client
    if not offline():
        sys.stderr.write("netns: not an empty namespace, it has more than lo\n")
        return 125
    loopback_up()
    calls: tuple[ToolCall, ...] = tuple(args.call)
    server = serve(Script(calls, args.log, args.hold_final), args.port)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if args.pty_input is not None:
        try:
            return _interactive(client, env, args)
        finally:
            server.shutdown()
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


def _interactive(client: list[str], env: dict[str, str], args: argparse.Namespace) -> int:
    """The client on a pseudo-terminal: its screen to ``--output``, and every byte appended
    to ``--pty-input`` typed into it, until it exits or the limit passes."""
    pid, terminal = pty.fork()
    if pid == 0:  # the child: becomes the client on the terminal, or ends here
        try:
            os.execvpe(client[0], client, {**env, "TERM": "xterm-256color"})
        finally:
            os._exit(127)
    # A terminal of a usual size: a terminal UI draws nothing useful on a 0x0 one.
    fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    args.pidfile.write_text(f"{pid}\n")
    typed = 0
    deadline = time.monotonic() + args.timeout
    with args.output.open("wb") as output:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([terminal], [], [], 0.1)
            if ready:
                try:
                    output.write(os.read(terminal, 65536))
                    output.flush()
                except OSError:
                    break  # the client closed its terminal: it is exiting
            keys = args.pty_input.read_bytes() if args.pty_input.exists() else b""
            if len(keys) > typed:
                os.write(terminal, keys[typed:])
                typed = len(keys)
    finished, status = os.waitpid(pid, os.WNOHANG)
    if finished == 0:
        os.kill(pid, 9)  # past the limit: the test kills the rest of its tree by pid
        _, status = os.waitpid(pid, 0)
    os.close(terminal)
    return os.waitstatus_to_exitcode(status)


if __name__ == "__main__":
    raise SystemExit(main())
