"""The reap plan as every surface shows it: plain dicts, the plan token, what is kept and why."""

from __future__ import annotations

from typing import Any

from supervisor.policy.servers.census import ProcessRef
from supervisor.policy.servers.duplicates import DuplicateGroup
from supervisor.policy.servers.reap_plan import ReapEntry, ReapPlan

__all__ = ["entry_dict", "process_dict", "reap_plan_dict"]


def process_dict(process: ProcessRef) -> dict[str, Any]:
    return {"pid": process.pid, "start": process.start}


def entry_dict(entry: ReapEntry) -> dict[str, Any]:
    """One server with its verdict, its evidence, its tree and what it holds."""
    server, owner = entry.server, entry.server.owner
    usage = server.usage
    return {
        "pid": server.process.pid,
        "start": server.process.start,
        "command": list(server.command),
        "provenance": server.provenance,
        "reason_code": entry.reason_code,
        "detail": entry.detail,
        "evidence": list(server.evidence),
        "owner": None
        if owner is None
        else {
            "name": owner.name,
            **process_dict(owner.process),
            "alive": owner.alive,
            "stdio_open": owner.stdio_open,
        },
        "members": [process_dict(m) for m in entry.members],
        "rss_bytes": usage.rss_bytes,
        "pss_bytes": usage.pss_bytes,
        "cpu_percent": usage.cpu_percent,
        "age_seconds": server.age_seconds,
        "worker_identity": server.worker_identity,
    }


def _duplicate_dict(group: DuplicateGroup) -> dict[str, Any]:
    return {
        "command": list(group.command),
        "cwd": group.cwd,
        "env_keys": list(group.env_keys),
        "servers": [process_dict(p) for p in group.servers],
        "clients": list(group.clients),
        "memory_bytes": group.memory_bytes,
        "repeated_bytes": group.repeated_bytes,
    }


def reap_plan_dict(plan: ReapPlan) -> dict[str, Any]:
    """The plan's answer: targets in full (apply reaps exactly these), kept servers with
    their reasons, live clients' duplicates (reported, never reaped), the token."""
    return {
        "success": True,
        "outcome": "planned",
        "plan_token": plan.plan_token,
        "server_count": plan.server_count,
        "target_count": len(plan.targets),
        "target_rss_bytes": plan.target_rss_bytes,
        "targets": [entry_dict(t) for t in plan.targets],
        "kept_count": len(plan.kept),
        "kept": [entry_dict(k) for k in plan.kept],
        "duplicate_count": len(plan.duplicates),
        "duplicates": [_duplicate_dict(g) for g in plan.duplicates],
        "mutation_performed": False,
    }
