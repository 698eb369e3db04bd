"""Human-readable renderings of supervisor results for the CLI (``--json`` bypasses these)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from supervisor.cli.format_servers import server_lines, status_line
from supervisor.cli.table import table

__all__ = ["format_apply", "format_plan", "format_snapshot", "format_status", "table"]


def format_status(result: Mapping[str, Any]) -> str:
    """A few lines an operator reads at a glance; ``--json`` has everything."""
    if not result.get("success", True):
        return _refusal(result)
    server = result.get("server") or {}
    liveness = result.get("liveness") or {}
    leases = result.get("leases") or {}
    fleet = result.get("fleet") or {}
    caller = result.get("profile") or f"socket owner ({result.get('authenticated_by')})"
    lines = [
        f"supervisor pid {server.get('pid')}  socket {server.get('socket_path')}  "
        f"connections {server.get('active_connections')}/{server.get('max_connections')}  "
        f"as {caller}",
    ]
    if fleet.get("available"):
        owned = fleet.get("by_ownership") or {}
        counts = "  ".join(f"{k} {v}" for k, v in owned.items()) or "none"
        spread = fleet.get("active_by_namespace") or {}
        lines.append(f"workers: {counts}  orphaned {fleet.get('orphaned', 0)}")
        if spread:
            lines.append("active by namespace: " + "  ".join(f"{k} {v}" for k, v in spread.items()))
    elif fleet:
        lines.append(f"workers: unavailable ({fleet.get('detail')})")
    verdicts = liveness.get("verdicts") or {}
    lines.append(
        f"liveness: {liveness.get('sweeps_completed')} sweeps  "
        f"{liveness.get('watched_pids')} exit watches  "
        + ("  ".join(f"{k} {v}" for k, v in verdicts.items()) or "no verdicts")
    )
    lease_line = f"leases: {leases.get('active_lease_count')} active"
    if not leases.get("readable", True):
        lease_line += f" (unreadable: {leases.get('detail')})"
    lines.append(lease_line)
    servers = status_line(result.get("servers") or {})
    if servers:
        lines.append(servers)
    return "\n".join(lines)


def format_snapshot(result: Mapping[str, Any]) -> str:
    if not result.get("success", True):
        return _refusal(result)
    rows = [
        (
            w.get("worker_identity"),
            w.get("namespace"),
            w.get("pid"),
            w.get("status"),
            w.get("ownership_state"),
            "yes" if w.get("live") else "no",
            w.get("client_instance_id"),
        )
        for w in result.get("workers") or []
    ]
    out = [
        table(["worker", "namespace", "pid", "status", "ownership", "live", "instance"], rows),
        "",
        f"live {result.get('live_worker_count')}  stale {result.get('stale_worker_count')}  "
        f"historical {result.get('historical_worker_count')}  "
        f"live_fleet_safe {result.get('live_fleet_safe')}",
    ]
    if result.get("registry_revision"):
        # Said next to the stamp because it looks like a token and is not one.
        out.append(
            f"observed {result.get('snapshot_at')}  registry_revision "
            f"{result.get('registry_revision')} (observation stamp; apply takes a plan's tokens)"
        )
    blockers = result.get("active_blockers") or []
    if blockers:
        out.append("blockers:")
        out.extend(f"  {b.get('classification')}: {b.get('detail')}" for b in blockers)
    out.extend(_orphans(result))
    out.extend(server_lines(result))
    return "\n".join(out)


def _orphans(result: Mapping[str, Any]) -> list[str]:
    """The workers whose launching client is gone, as the page and ``--json`` show them."""
    orphans = result.get("orphaned_workers") or []
    if not orphans:
        return []
    rows = [
        (
            o.get("worker_identity"),
            o.get("namespace"),
            o.get("pid"),
            o.get("client_pid"),
            o.get("reason_code"),
        )
        for o in orphans
    ]
    return [
        f"\norphaned workers (their client is gone): {len(orphans)}",
        table(["worker", "namespace", "pid", "client pid", "reason"], rows),
    ]


def _entry_rows(entries: Sequence[Mapping[str, Any]]) -> list[tuple[Any, ...]]:
    return [
        (
            e.get("worker_identity"),
            e.get("reason_code"),
            (e.get("evidence") or {}).get("pid"),
            (e.get("evidence") or {}).get("namespace"),
        )
        for e in entries
    ]


def format_plan(result: Mapping[str, Any]) -> str:
    if not result.get("success", True):
        return _refusal(result)
    candidates = result.get("candidates") or []
    listed = result.get("preserved")
    out = [
        f"candidates: {result.get('candidate_count', len(candidates))}   "
        f"preserved: {result.get('preserved_count', len(listed or []))}",
    ]
    if candidates:
        out.append(table(["worker", "reason", "pid", "namespace"], _entry_rows(candidates)))
    summary = result.get("preserved_summary") or []
    if summary:
        out.append("\npreserved by reason (first examples; --reason CODE lists them):")
        for group in summary:
            examples = ", ".join(str(e.get("worker_identity")) for e in group.get("examples") or [])
            out.append(f"  {group.get('reason_code')}: {group.get('count')}  {examples}")
    if listed:
        out.append("")
        out.append(table(["worker", "reason", "pid", "namespace"], _entry_rows(listed)))
    if result.get("next_cursor"):
        out.append(f"more: --cursor {result.get('next_cursor')}")
    out.extend(_orphans(result))
    out += [
        "",
        f"registry_fingerprint:  {result.get('registry_fingerprint')}",
        f"scope_fingerprint:     {result.get('scope_fingerprint')}",
        f"candidate_fingerprint: {result.get('candidate_fingerprint')}",
    ]
    identities = result.get("candidate_worker_identities") or [
        c.get("worker_identity") for c in candidates
    ]
    if identities:
        workers = ",".join(str(w) for w in identities)
        out.append(
            "\nto retire them: fleet-supervisor apply "
            f"--scope-fingerprint {result.get('scope_fingerprint')} "
            f"--candidate-fingerprint {result.get('candidate_fingerprint')} --workers {workers}"
        )
    return "\n".join(out)


def format_apply(result: Mapping[str, Any]) -> str:
    out = [
        f"outcome: {result.get('outcome')}   retired: {result.get('retired_count', 0)}   "
        f"preserved: {result.get('preserved_count', 0)}"
    ]
    for reason in result.get("reasons") or []:
        out.append(f"  {reason}")
    rows = [
        (r.get("worker_identity"), "retired", r.get("reason_code"))
        for r in result.get("retired") or []
    ]
    rows += [
        (p.get("worker_identity"), "preserved", p.get("reason_code"))
        for p in result.get("preserved") or []
    ]
    if rows:
        out.append(table(["worker", "result", "reason"], rows))
    post = result.get("post_apply") or {}
    if post.get("available"):
        out.append(
            f"after: live {post.get('live_worker_count')}  stale {post.get('stale_worker_count')}  "
            f"live_fleet_safe {post.get('live_fleet_safe')}"
        )
    return "\n".join(out)


def _refusal(result: Mapping[str, Any]) -> str:
    reasons = result.get("reasons") or ["refused"]
    return "refused: " + "; ".join(str(r) for r in reasons)
