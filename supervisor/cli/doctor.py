"""``fleet-supervisor doctor``: is this machine set up to supervise its MCP servers?"""

from __future__ import annotations

import argparse
import json
import os
import socket
import stat
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from supervisor.cli.common import EXIT_OK, EXIT_REFUSED
from supervisor.errors import SupervisorError
from supervisor.settings.config import Settings

__all__ = ["Finding", "doctor_findings", "leaks_finding", "run_doctor"]

OK, WARN, FAIL, SKIP = "ok", "warn", "fail", "skip"
_START = "start it: fleet-supervisor run (from login: fleet-supervisor service install)"


@dataclass(frozen=True, slots=True)
class Finding:
    """One check's answer; ``action`` is the one thing that fixes a warn or a fail."""

    check: str
    state: str
    detail: str
    action: str = ""
    #: A failure of a check that matters makes ``doctor`` exit non-zero.
    matters: bool = True


def _daemon(settings: Settings) -> tuple[Finding, Mapping[str, Any] | None]:
    from supervisor.client import Client

    path = settings.socket.path
    try:
        with Client(path, timeout=5.0) as client:
            status = client.request("status", {})
    except SupervisorError as exc:
        return Finding("daemon", FAIL, f"not reachable at {path}: {exc.detail}", _START), None
    pid = status.get("server", {}).get("pid")
    return Finding("daemon", OK, f"up (pid {pid}), answering on {path}"), status


def _socket_mode(settings: Settings) -> Finding:
    path = settings.socket.path
    try:
        facts = path.stat()
    except OSError:
        return Finding("socket mode", SKIP, f"no socket at {path}", _START, matters=False)
    mode, wanted = stat.S_IMODE(facts.st_mode), settings.socket.mode
    if mode != wanted:
        return Finding(
            "socket mode",
            FAIL,
            f"{path} is {mode:04o}, [socket] mode says {wanted:04o}",
            "restart the daemon: it sets the socket's mode when it binds",
        )
    return Finding("socket mode", OK, f"{path} is {mode:04o}")


def _profiles_mode(settings: Settings) -> Finding:
    path = settings.auth.profiles_path
    try:
        facts = path.stat()
    except FileNotFoundError:
        return Finding(
            "profiles file",
            OK,
            f"{path} not created yet (`fleet-supervisor token create PROFILE` creates it, 0600)",
        )
    except OSError as exc:
        return Finding("profiles file", FAIL, f"cannot read {path}: {exc.strerror}", "")
    mode = stat.S_IMODE(facts.st_mode)
    fix = f"chmod 600 {path}"
    if mode & 0o022:
        # Whoever may write it may grant themselves the retire operation.
        return Finding("profiles file", FAIL, f"{path} is {mode:04o}: others may write it", fix)
    if facts.st_uid != os.geteuid():
        owner = f"owned by uid {facts.st_uid}, not {os.geteuid()}"
        return Finding("profiles file", WARN, f"{path} is {owner}", f"chown {os.geteuid()} {path}")
    if mode & 0o044:
        detail = f"{path} is {mode:04o}: others may read its token hashes"
        return Finding("profiles file", WARN, detail, fix, matters=False)
    return Finding("profiles file", OK, f"{path} is {mode:04o}")


def _pidfd() -> Finding:
    from supervisor.system.pidfd import pidfd_supported

    if pidfd_supported():
        return Finding("pidfd", OK, "pidfd_open works: exits are seen at once, signals verified")
    return Finding(
        "pidfd",
        FAIL,
        "pidfd_open is missing: no process can be signalled safely, so nothing is stopped",
        "run on Linux 5.3 or newer",
    )


def _ptrace_scope() -> int | None:
    try:
        return int(Path("/proc/sys/kernel/yama/ptrace_scope").read_text().strip())
    except (OSError, ValueError):
        return None  # no Yama: ordinary ptrace rules, a process may reach its own user's


def _pidfd_getfd() -> Finding:
    from supervisor.system.pidfd import pidfd_open
    from supervisor.system.process_tree import duplicate_fd

    read_end, write_end = os.pipe()
    pidfd = pidfd_open(os.getpid())
    try:
        copy = None if pidfd is None else duplicate_fd(pidfd, read_end)
    finally:
        for fd in (read_end, write_end, pidfd):
            if fd is not None:
                os.close(fd)
    why = "a restarted daemon cannot watch an adopted server's stdin (it still watches its client)"
    if copy is None:
        return Finding("pidfd_getfd", WARN, f"unavailable: {why}", "run on Linux 5.6 or newer",
                       matters=False)  # fmt: skip
    os.close(copy)
    scope = _ptrace_scope()
    if os.geteuid() != 0 and scope is not None and scope >= 1:
        return Finding(
            "pidfd_getfd",
            WARN,
            f"works, but kernel.yama.ptrace_scope is {scope}: {why}",
            "run the daemon as root, or set kernel.yama.ptrace_scope to 0",
            matters=False,
        )
    return Finding("pidfd_getfd", OK, "works for this user's processes")


def _sock_diag() -> Finding:
    from supervisor.system.unix_diag import UnixPeers

    left, right = socket.socketpair()
    try:
        peer = UnixPeers().peer(os.fstat(left.fileno()).st_ino)
        seen = peer == os.fstat(right.fileno()).st_ino
    finally:
        left.close()
        right.close()
    if seen:
        return Finding("sock_diag", OK, "the kernel names a socket pair's other end")
    return Finding(
        "sock_diag",
        WARN,
        "the kernel does not answer sock_diag: leaks on socket pairs cannot be proven",
        "load the kernel module: modprobe unix_diag",
        matters=False,
    )


def _hidepid() -> str | None:
    """The ``hidepid`` option /proc is mounted with, when it hides anything."""
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        fields = line.split()
        if len(fields) > 4 and fields[4] == "/proc" and " - proc " in line:
            for option in line.rsplit(" ", 1)[-1].split(","):
                name, _, value = option.partition("=")
                if name == "hidepid" and value not in ("0", "off"):
                    return option
    return None


def _proc() -> Finding:
    try:
        Path("/proc/self/stat").read_bytes()
        os.listdir("/proc/self/fd")
    except OSError as exc:
        return Finding("/proc", FAIL, f"cannot read /proc: {exc}", "mount /proc (Linux only)")
    hidden = _hidepid()
    if hidden is not None and os.geteuid() != 0:
        return Finding(
            "/proc",
            WARN,
            f"/proc is mounted with {hidden}: other users' servers are not seen",
            "run the daemon as root, or remount /proc without hidepid",
            matters=False,
        )
    return Finding("/proc", OK, "readable" + (f" ({hidden}, as root)" if hidden else ""))


def _clients() -> Iterator[Finding]:
    from supervisor.client_configs.command import plan_files
    from supervisor.client_configs.locations import config_files
    from supervisor.client_configs.rewrite import Selection

    files = config_files(Path.home(), Path.cwd(), [])
    reports = plan_files(files, "list", Selection(), None)
    if not reports:
        yield Finding("clients", OK, "no MCP client configuration found", matters=False)
    for report in reports:
        name = f"{report.file.client} ({report.file.scope})"
        where = str(report.file.path)
        if report.error:
            yield Finding(name, WARN, f"{where}: {report.error}", f"fix {where}", matters=False)
            continue
        wrappable = [e for e in report.entries if e.wrappable or e.wrapped]
        wrapped = sum(e.wrapped for e in wrappable)
        if not wrappable:
            yield Finding(name, OK, f"{where}: no stdio servers", matters=False)
        elif wrapped == len(wrappable):
            yield Finding(name, OK, f"{where}: wrapped ({wrapped} of {wrapped})", matters=False)
        else:
            state = "unwrapped" if wrapped == 0 else f"partly wrapped ({wrapped}/{len(wrappable)})"
            fix = f"fleet-supervisor clients wrap --client {report.file.client}"
            yield Finding(name, WARN, f"{where}: {state}", fix, matters=False)


def leaks_finding(status: Mapping[str, Any] | None) -> Finding:
    if status is None:
        return Finding("leaks", SKIP, "the daemon is not reachable", _START, matters=False)
    servers = status.get("servers", {})
    if not servers.get("available", False):
        return Finding("leaks", SKIP, "the census has not run yet", matters=False)
    orphaned = int(servers.get("orphaned", 0))
    if orphaned:
        return Finding(
            "leaks",
            WARN,
            f"{orphaned} orphaned MCP server(s) wait for a reap",
            "fleet-supervisor reap plan, then reap apply --plan-token …",
            matters=False,
        )
    return Finding("leaks", OK, f"no orphaned MCP servers among {servers.get('servers', 0)}")


def doctor_findings(settings: Settings) -> list[Finding]:
    """Every check, in the order a newcomer would fix them."""
    daemon, status = _daemon(settings)
    checks: list[Callable[[], Finding]] = [
        lambda: _socket_mode(settings),
        lambda: _profiles_mode(settings),
        _pidfd,
        _pidfd_getfd,
        _sock_diag,
        _proc,
    ]
    return [daemon, *(check() for check in checks), *_clients(), leaks_finding(status)]


def _table(findings: list[Finding]) -> str:
    width = max(len(f.check) for f in findings)
    lines = []
    for f in findings:
        lines.append(f"{f.state.upper():<4}  {f.check:<{width}}  {f.detail}")
        if f.action and f.state in (WARN, FAIL):
            lines.append(f"{'':<4}  {'':<{width}}  fix: {f.action}")
    return "\n".join(lines)


def run_doctor(args: argparse.Namespace, settings: Settings) -> int:
    """Exit 1 when a check that matters fails; warnings alone exit 0."""
    findings = doctor_findings(settings)
    failed = any(f.state == FAIL and f.matters for f in findings)
    if args.json:
        answer = {"ok": not failed, "checks": [asdict(f) for f in findings]}
        sys.stdout.write(json.dumps(answer, indent=2) + "\n")
    else:
        sys.stdout.write(_table(findings) + "\n")
    return EXIT_REFUSED if failed else EXIT_OK
