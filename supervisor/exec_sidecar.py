"""``fleet-supervisor exec``: run an unmodified MCP server as a child and keep it registered."""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
from anyio.abc import Process

from supervisor.client import keep_registered
from supervisor.config import ExecConfig
from supervisor.logs import configure_logging, get_logger
from supervisor.orphan_watch import OrphanGuard, launching_client
from supervisor.policy.identity import (
    ENV_CLIENT,
    ENV_FLEET_RUN,
    ENV_INSTANCE,
    ENV_PROFILE,
    ENV_SESSION,
    NAMESPACES,
)

__all__ = [
    "FORWARDED_SIGNALS",
    "STOP_SIGNALS",
    "claims_from_env",
    "exit_status",
    "releases_on_exit",
    "run_exec",
]

_log = get_logger()

#: Signals a supervisor of processes (the MCP client, a shell, systemd) sends to
#: the process it started; the child is the one that must act on them.
FORWARDED_SIGNALS = (
    signal.SIGTERM,
    signal.SIGINT,
    signal.SIGHUP,
    signal.SIGQUIT,
    signal.SIGUSR1,
    signal.SIGUSR2,
)

#: The ones that ask a server to stop: how an MCP client (or a shell's Ctrl-C, or
#: a closing terminal) shuts down what it started.
STOP_SIGNALS = frozenset({signal.SIGTERM, signal.SIGINT, signal.SIGHUP})


def claims_from_env(
    env: Mapping[str, str], *, namespace: str | None = None, ttl: float | None = None
) -> dict[str, Any]:
    """What the launcher put in the environment, as registration claims."""
    profile = env.get(ENV_PROFILE) or None
    if namespace is None and profile:
        # Launch configs name profiles "<prefix><namespace>", e.g. prgs-author.
        namespace = next((ns for ns in NAMESPACES if profile.endswith(ns)), None)
    claims: dict[str, Any] = {
        "client_name": env.get(ENV_CLIENT) or None,
        "client_instance_id": env.get(ENV_INSTANCE) or None,
        "session_id": env.get(ENV_SESSION) or None,
        "fleet_run_id": env.get(ENV_FLEET_RUN) or None,
        "profile": profile,
        "namespace": namespace,
        "role": namespace,
        "transport": "stdio",
    }
    if ttl is not None:
        claims["heartbeat_ttl_seconds"] = ttl
    return {k: v for k, v in claims.items() if v is not None}


def exit_status(returncode: int) -> int:
    """A shell-style exit status: a child killed by signal N exits 128+N."""
    return 128 - returncode if returncode < 0 else returncode


def releases_on_exit(returncode: int, *, stop_requested: bool) -> bool:
    """Whether the child's exit was a shutdown (release the row) rather than a crash.

    After a stop signal was passed on, any exit is the child obeying it: servers exit
    0, 128+N, -N or whatever their handler picks. A child killed by a stop signal
    someone sent it directly was stopped too. Anything else that is not 0 is a crash,
    and a crashed worker's row is left to go stale and be retired through the
    evidence-checked path.
    """
    if returncode == 0 or stop_requested:
        return True
    return returncode < 0 and -returncode in STOP_SIGNALS


@dataclass(slots=True)
class _Forwarder:
    """Passes signals on to the child and remembers whether one of them asked it to stop."""

    process: Process
    stop_requested: bool = False

    async def run(self) -> None:
        with anyio.open_signal_receiver(*FORWARDED_SIGNALS) as signals:
            async for signum in signals:
                if signum in STOP_SIGNALS:
                    self.stop_requested = True
                if self.process.returncode is None:
                    self.process.send_signal(signum)


async def _supervise_child(
    argv: Sequence[str],
    socket_path: Path,
    claims: Mapping[str, Any],
    orphans: ExecConfig | None = None,
) -> int:
    orphans = orphans or ExecConfig()
    # Recorded before anything else: once the client dies this process is
    # reparented and its parent no longer names the client.
    client = launching_client()
    if client is not None:
        claims = {**claims, **client.claims()}
    # stdin/stdout/stderr are inherited untouched: the child speaks MCP over
    # them, and this process must never write a byte to stdout. A reaped child
    # leads its own process group, so its own children go with it.
    process = await anyio.open_process(
        list(argv), stdin=None, stdout=None, stderr=None, start_new_session=orphans.reap_orphans
    )
    guard = OrphanGuard(
        process, client, reap=orphans.reap_orphans, grace=orphans.reap_grace_seconds
    )
    forwarder = _Forwarder(process)
    async with process, anyio.create_task_group() as tg:
        tg.start_soon(forwarder.run)
        tg.start_soon(guard.run)
        async with keep_registered(socket_path, claims, pid=process.pid) as keeper:
            returncode = await process.wait()
            # A signal sent to the whole process group reaches this process and the
            # child together; let its delivery, already queued, be recorded first.
            await anyio.lowlevel.checkpoint()
            # A reaped orphan was stopped on purpose and is released too.
            released = guard.reaped or releases_on_exit(
                returncode, stop_requested=forwarder.stop_requested
            )
            if not released:
                keeper.abandon()
        tg.cancel_scope.cancel()
    _log.info(
        "child_exited",
        pid=process.pid,
        returncode=returncode,
        stop_requested=forwarder.stop_requested,
        released=released,
    )
    return exit_status(returncode)


def run_exec(
    argv: Sequence[str],
    *,
    socket_path: Path,
    namespace: str | None = None,
    ttl: float | None = None,
    orphans: ExecConfig | None = None,
) -> int:
    """Run ``argv`` as a registered worker; returns the child's exit status.

    ``orphans`` (the ``[exec]`` settings) says whether a child whose launching
    client is gone is stopped and released, or only reported.
    """
    configure_logging("info", stream=sys.stderr)
    claims = claims_from_env(os.environ, namespace=namespace, ttl=ttl)
    try:
        return anyio.run(_supervise_child, argv, socket_path, claims, orphans)
    except FileNotFoundError as exc:
        sys.stderr.write(f"exec: cannot run {argv[0]!r}: {exc.strerror}\n")
        return 127
    except PermissionError as exc:
        sys.stderr.write(f"exec: cannot run {argv[0]!r}: {exc.strerror}\n")
        return 126
