"""``fleet-supervisor exec``: run an unmodified MCP server as a child and keep it registered."""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import Process

from supervisor.client import keep_registered
from supervisor.logs import configure_logging, get_logger
from supervisor.policy.identity import (
    ENV_CLIENT,
    ENV_FLEET_RUN,
    ENV_INSTANCE,
    ENV_PROFILE,
    ENV_SESSION,
    NAMESPACES,
)

__all__ = ["FORWARDED_SIGNALS", "claims_from_env", "exit_status", "run_exec"]

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


async def _forward_signals(process: Process) -> None:
    with anyio.open_signal_receiver(*FORWARDED_SIGNALS) as signals:
        async for signum in signals:
            if process.returncode is None:
                process.send_signal(signum)


async def _supervise_child(
    argv: Sequence[str], socket_path: Path, claims: Mapping[str, Any]
) -> int:
    # stdin/stdout/stderr are inherited untouched: the child speaks MCP over
    # them, and this process must never write a byte to stdout.
    process = await anyio.open_process(
        list(argv), stdin=None, stdout=None, stderr=None, start_new_session=False
    )
    async with process, anyio.create_task_group() as tg:
        tg.start_soon(_forward_signals, process)
        async with keep_registered(socket_path, claims, pid=process.pid) as keeper:
            returncode = await process.wait()
            if returncode != 0:
                # A crashed worker is not released: its row goes stale and is
                # retired through the normal, evidence-checked path.
                keeper.abandon()
        tg.cancel_scope.cancel()
    _log.info("child_exited", pid=process.pid, returncode=returncode)
    return exit_status(returncode)


def run_exec(
    argv: Sequence[str],
    *,
    socket_path: Path,
    namespace: str | None = None,
    ttl: float | None = None,
) -> int:
    """Run ``argv`` as a registered worker; returns the child's exit status."""
    configure_logging("info", stream=sys.stderr)
    claims = claims_from_env(os.environ, namespace=namespace, ttl=ttl)
    try:
        return anyio.run(_supervise_child, argv, socket_path, claims)
    except FileNotFoundError as exc:
        sys.stderr.write(f"exec: cannot run {argv[0]!r}: {exc.strerror}\n")
        return 127
    except PermissionError as exc:
        sys.stderr.write(f"exec: cannot run {argv[0]!r}: {exc.strerror}\n")
        return 126
