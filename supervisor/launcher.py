"""Builds the mcpServers map for one application launch: one trusted instance id, five workers."""

from __future__ import annotations

import secrets
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from supervisor.policy.identity import (
    NAMESPACES,
    UntrustedInstanceError,
    assess_instance_identity,
    mint_instance_id,
    namespace_worker_env,
    normalize_client_name,
)

__all__ = ["build_launch_config"]


def build_launch_config(
    *,
    client_type: str,
    command: str,
    args: Sequence[str] = (),
    instance_id: str | None = None,
    session_id: str | None = None,
    fleet_run_id: str | None = None,
    profile_prefix: str = "prgs-",
    exec_wrapper: Sequence[str] | None = None,
    extra_env: Mapping[str, str] | None = None,
    now: datetime | None = None,
) -> dict[str, Any]:
    """Mint (or reuse a trusted) instance id and give all five namespaces the same one.

    ``exec_wrapper`` is the argv prefix that runs a command under the
    supervisor's ``exec`` sidecar; with it, unmodified servers join the fleet.
    """
    if instance_id is None:
        minted = mint_instance_id(
            client_type, now=now or datetime.now(UTC), nonce=secrets.token_hex(16)
        )
    else:
        assessed = assess_instance_identity(instance_id)
        if not assessed.trusted or assessed.client_instance_id is None:
            raise UntrustedInstanceError(assessed.reason)
        minted = assessed.client_instance_id
    session = session_id or f"launch-{secrets.token_hex(12)}"
    servers: dict[str, Any] = {}
    for namespace in NAMESPACES:
        env = namespace_worker_env(
            profile=f"{profile_prefix}{namespace}",
            client_type=client_type,
            client_instance_id=minted,
            # Ownership is per worker: a session shared by five processes would
            # tie a dead worker to its live siblings and make it unretirable
            # (and reads as a session collision). The launch stays visible as
            # the common prefix.
            session_id=f"{session}.{namespace}",
            fleet_run_id=fleet_run_id,
            extra_env=extra_env,
        )
        if exec_wrapper:
            entry_command, entry_args = exec_wrapper[0], [*exec_wrapper[1:], "--", command, *args]
        else:
            entry_command, entry_args = command, list(args)
        servers[f"gitea-{namespace}"] = {"command": entry_command, "args": entry_args, "env": env}
    return {
        "mcpServers": servers,
        "client_instance_id": minted,
        "client_type": normalize_client_name(client_type),
        "session_id": session,
        "namespaces": list(NAMESPACES),
    }
