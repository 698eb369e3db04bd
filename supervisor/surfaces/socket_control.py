"""Control-plane socket ops: one handle call each, made as the profile the token proved."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from supervisor.errors import ProtocolError
from supervisor.handle_control import ControlPlaneCalls
from supervisor.policy.control.permissions import Profile
from supervisor.surfaces.protocol_control import ControlArgs

__all__ = ["dispatch_control"]


async def dispatch_control(
    handle: ControlPlaneCalls, profile: Profile, args: ControlArgs
) -> Mapping[str, Any]:
    """Authorization happens in the handle (``permissions.decide``), as for MCP callers."""
    v = args.values
    match args.op:
        case "session_upsert":
            return await handle.upsert_session(profile, **v)
        case "work_item_upsert":
            return await handle.upsert_work_item(profile, **v)
        case "assign":
            return await handle.assign_and_lease(profile, **v)
        case "allocate":
            return await handle.allocate_next_work(profile, **v)
        case "assignment_check":
            return await handle.require_valid_assignment(profile, **v)
        case "lease_heartbeat":
            return await handle.heartbeat_lease(profile, **v)
        case "lease_release":
            return await handle.release_lease(profile, **v)
        case "terminal_lock_set":
            return await handle.set_terminal_lock(profile, **v)
        case "terminal_lock_get":
            return await handle.get_terminal_lock(profile, **v)
        case "namespace_health_assess":
            return await handle.assess_namespace_health(profile, **v)
        case "namespace_health_gate":
            return await handle.namespace_health_gate(profile, **v)
        case "incident_link_upsert":
            return await handle.upsert_incident_link(profile, **v)
        case "incident_link_get":
            return await handle.get_incident_link_for_gitea_issue(profile, **v)
    raise ProtocolError(f"op {args.op!r} has no handler")
