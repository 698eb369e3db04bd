"""A wrapped server's registration claims, derived from the process tree (never self-declared)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from supervisor.policy.identity.instance import (
    CLIENT_ALIASES,
    UNKNOWN_CLIENT,
    normalize_client_name,
)
from supervisor.policy.identity.launch import (
    client_family_from_command,
    launch_instance_id,
    server_session_id,
)
from supervisor.policy.identity.worker_env import NAMESPACES
from supervisor.system.probes import ProbeBackend
from supervisor.system.process_tree import client_argv, start_epoch

__all__ = ["ServerFacts", "derive_claims"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerFacts:
    """Who a server is and who launched it, as read from ``/proc`` by the supervisor."""

    pid: int
    start: str
    client_pid: int
    client_start: str
    client_label: str
    name: str
    namespace: str
    ttl: float | None = None


def _family(label: str, client_pid: int) -> str:
    named = normalize_client_name(label) if label else UNKNOWN_CLIENT
    if named != UNKNOWN_CLIENT:
        return named
    detected = client_family_from_command(client_argv(client_pid), CLIENT_ALIASES)
    return detected or UNKNOWN_CLIENT


def derive_claims(facts: ServerFacts, probes: ProbeBackend) -> dict[str, Any] | None:
    """Registration claims for a wrapped server, or None when this host cannot vouch.

    The instance id is a function of the client incarnation (host, boot, client pid and
    start ticks): every server one client launch starts shares it, and no other launch
    can have it. The label picks only the family word in the id.
    """
    host, boot = probes.host_id(), probes.boot_id()
    if not host or not boot:
        return None
    started = start_epoch(facts.client_start, boot)
    if started is None:
        return None
    family = _family(facts.client_label, facts.client_pid)
    instance = launch_instance_id(
        family,
        machine=host,
        boot_id=boot,
        client_pid=facts.client_pid,
        client_start=facts.client_start,
        started=started,
    )
    namespace = facts.namespace if facts.namespace in NAMESPACES else None
    claims: dict[str, Any] = {
        "client_name": family,
        "client_instance_id": instance,
        "session_id": server_session_id(
            instance, name=facts.name, server_pid=facts.pid, server_start=facts.start
        ),
        "namespace": namespace,
        "role": namespace,
        "transport": "stdio",
        "client_pid": facts.client_pid,
        "client_process_start_time": facts.client_start,
        "heartbeat_ttl_seconds": facts.ttl,
    }
    return {key: value for key, value in claims.items() if value is not None}
