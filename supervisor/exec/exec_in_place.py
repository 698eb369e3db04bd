"""``fleet-supervisor exec``: register an MCP server with the daemon, then become the server.

The wrapper is not a resident process. It takes a process group of its own, asks the
kernel to SIGTERM it when its parent (the MCP client) dies, leaves a marker in the
environment, registers itself over the daemon's exec socket (handing over a duplicate
of its stdin so the daemon can see the client hang up), and then ``execve``s the
server in place: same pid, same parent. The client's own stop escalation reaches the
server exactly as it would a bare one, and the daemon, which holds pidfds for the
server and the client, stops the whole group when the client is gone, stdin is closed
for good or the server's leader exits.

Start-up cost is paid by every wrapped server, so this module imports only what it
must: no asyncio, no structlog, no json, no argparse (run it as ``python -I -S``).
"""

from __future__ import annotations

import os
import sys

# Types only: importing typing would pull in re, milliseconds on every server start.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

if __package__ in (None, ""):
    # Run as a script (python -I -S .../supervisor/exec/exec_in_place.py): the package
    # root is three levels up. Appended, never prepended, so nothing shadows the stdlib.
    sys.path.append(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from supervisor.exec.exec_args import (  # noqa: E402
    USAGE,
    ExecOptions,
    HelpRequested,
    UsageError,
    exec_socket_path,
    help_text,
    parse_args,
    resolve_socket_path,
)
from supervisor.policy.identity.exec_marker import (  # noqa: E402 (the path is set up just above)
    MARKER_ENV,
    ExecMarker,
    daemon_key,
    format_marker,
)

__all__ = ["main"]

_PR_SET_PDEATHSIG = 1
_SIGTERM = 15


def _log(level: str, event: str, **fields: object) -> None:
    """One JSON line on stderr; a closed or broken stderr is silently skipped.

    MCP clients close a server's stderr when they exit, and a log line must never be
    the reason a server does not start.
    """
    from _json import encode_basestring_ascii as quote

    parts = [f'"event": {quote(event)}', f'"level": {quote(level)}', '"logger": "exec"']
    for key, value in sorted(fields.items()):
        text = value if isinstance(value, str) else repr(value)
        parts.append(f"{quote(key)}: {quote(text)}")
    line = ("{" + ", ".join(parts) + "}\n").encode()
    try:
        os.write(2, line)
    except (OSError, ValueError):
        pass


def _read(path: str) -> str | None:
    try:
        with open(path, "rb") as handle:
            return handle.read().decode("ascii", "replace")
    except OSError:
        return None


def _start_ticks(pid: int) -> str | None:
    text = _read(f"/proc/{pid}/stat")
    if text is None:
        return None
    # comm may hold spaces and parentheses; only the last ')' ends it. starttime is field 22.
    fields = text.rpartition(")")[2].split()
    return fields[19] if len(fields) > 19 and fields[19].isdigit() else None


def _set_parent_death_signal() -> bool:
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(_PR_SET_PDEATHSIG, _SIGTERM, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False  # not Linux: the daemon's adoption scan is the only net


def _request(options: ExecOptions) -> bytes:
    lines = [
        "v=1",
        f"client={options.client}",
        f"name={options.name}",
        f"namespace={options.namespace}",
    ]
    if options.ttl is not None:
        lines.append(f"ttl={options.ttl!r}")
    return ("\n".join(lines) + "\n").encode()


def _register(path: str, options: ExecOptions) -> tuple[str, str, str]:
    """(outcome, code, detail): ``registered``, ``refused`` or ``unregistered``."""
    import _socket

    # Looked at before the socket exists: with fd 0 closed the socket itself would be fd 0,
    # be handed over as the server's stdin and hang up the moment it is closed.
    try:
        os.fstat(0)
        has_stdin = True
    except OSError:
        has_stdin = False  # no stdin to hand over; the daemon watches the client only
    try:
        sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_SEQPACKET | _socket.SOCK_CLOEXEC)
    except OSError as exc:
        return ("unregistered", "socket_unavailable", str(exc))
    try:
        sock.settimeout(options.timeout)
        try:
            sock.connect(path)
        except OSError as exc:
            # The daemon is down (no file, nobody listening): the server still starts, and a
            # daemon that starts later adopts it from the marker in its environment.
            return ("unregistered", "daemon_unreachable", f"{path}: {exc.strerror or exc}")
        fds = (0).to_bytes(4, sys.byteorder)
        ancillary = [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, fds)] if has_stdin else []
        try:
            sock.sendmsg([_request(options)], ancillary)
            answer = sock.recv(4096).decode("utf-8", "replace")
        except TimeoutError:
            return ("unregistered", "daemon_timeout", f"no answer within {options.timeout}s")
        except OSError as exc:
            return ("unregistered", "daemon_unreachable", str(exc.strerror or exc))
    finally:
        sock.close()
    head, _, detail = answer.partition("\n")
    outcome, _, rest = head.partition(" ")
    code, _, identity = rest.partition(" ")
    if outcome == "registered":
        return (outcome, code, identity)
    return ("refused", code or "no_answer", detail or head)


def main(argv: Sequence[str] | None = None) -> int:
    """Register, then become the server; returns only when the server could not start."""
    env = dict(os.environ)
    try:
        options = parse_args(sys.argv[1:] if argv is None else argv, env)
        socket_path = resolve_socket_path(options, env)
    except HelpRequested:
        try:
            os.write(1, help_text().encode())
        except OSError:
            pass
        return 0
    except UsageError as exc:
        _write_usage(f"exec: {exc}\n")
        return 2
    client_pid = os.getppid()
    # A process group of its own, so the daemon can stop the server's whole tree (npx ->
    # sh -> node) and nothing else. Not when stdin is a terminal: a background group
    # reading its terminal is stopped by SIGTTIN, so interactive use keeps the shell's.
    if not os.isatty(0):
        try:
            os.setpgid(0, 0)
        except OSError:
            pass  # a session leader already leads its own group
    if options.parent_death_signal and client_pid > 1:
        _set_parent_death_signal()
    # A client may itself be pid 1 (the entry point of a container); only a parent that
    # changed while the death signal was being armed means the client is already gone.
    if client_pid < 1 or os.getppid() != client_pid:
        # The client died before the death signal was armed: nobody reads this server.
        _log("warning", "exec_client_gone", client_pid=client_pid)
        return 1
    me = os.getpid()
    exec_path = exec_socket_path(socket_path)
    boot = (_read("/proc/sys/kernel/random/boot_id") or "").strip()
    leader_start, client_start = _start_ticks(me), _start_ticks(client_pid)
    if leader_start and client_start and boot:
        env[MARKER_ENV] = format_marker(
            ExecMarker(
                leader_pid=me,
                leader_start=leader_start,
                client_pid=client_pid,
                client_start=client_start,
                boot_id=boot,
                client=options.client,
                name=options.name,
                namespace=options.namespace,
                daemon=daemon_key(os.path.abspath(exec_path)),
            )
        )
    else:
        env.pop(MARKER_ENV, None)  # never pass on a marker that names another process
    outcome, code, detail = _register(exec_path, options)
    if outcome != "registered":
        _log("warning", f"exec_{outcome}", code=code, detail=detail, pid=me)
    return _become(options.command, env)


def _become(command: Sequence[str], env: Mapping[str, str]) -> int:
    """Replace this process with the server; returns (126 or 127) only when that fails."""
    # The interpreter ignores SIGPIPE and SIGXFSZ, and an ignored signal stays ignored
    # across execve: put them back so the server behaves exactly as it would bare.
    import _signal  # type: ignore[import-not-found]  # no stub; "signal" would load enum

    for name in ("SIGPIPE", "SIGXFSZ"):
        number = getattr(_signal, name, None)
        if number is not None:
            _signal.signal(number, _signal.SIG_DFL)
    try:
        os.execvpe(command[0], list(command), dict(env))
    except FileNotFoundError as exc:
        _log("error", "exec_failed", command=command[0], detail=exc.strerror or str(exc))
        return 127
    except OSError as exc:
        _log("error", "exec_failed", command=command[0], detail=exc.strerror or str(exc))
        return 126


def _write_usage(message: str) -> None:
    try:
        os.write(2, (message + USAGE).encode())
    except OSError:
        pass


if __name__ == "__main__":
    sys.exit(main())
