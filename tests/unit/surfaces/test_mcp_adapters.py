"""The MCP tool adapters over a recording backend: argument translation and error mapping."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest
from mcp import Client
from mcp.types import CallToolResult

from supervisor.errors import (
    ActorStopped,
    PermissionDenied,
    ProtocolError,
    SupervisorError,
    Unavailable,
)
from supervisor.operations.requests import Request, arguments
from supervisor.policy.control.permissions import Profile
from supervisor.policy.fleet.snapshot import ManifestEntry
from supervisor.surfaces.mcp.fleet_tools import APPLY_TOOL, PLAN_TOOL, SNAPSHOT_TOOL
from supervisor.surfaces.mcp.operation_tools import HEARTBEAT_TOOL
from supervisor.surfaces.mcp.tools import build_mcp_server
from supervisor.surfaces.socket.protocol import decode_request
from supervisor.version import package_version

pytestmark = pytest.mark.anyio

OPERATOR = Profile(name="ops", role_kind="controller")
APPLY_ARGS = {
    "candidate_fingerprint": "candidatefp-1",
    "registry_fingerprint": "registryfp-1",
    "worker_identities": ["w-1"],
}


@dataclass
class Recorder:
    """A ToolBackend that records each call and answers with ``answer`` (or raises ``error``)."""

    error: SupervisorError | None = None
    answer: Mapping[str, Any] = field(
        default_factory=lambda: {"success": True, "outcome": "applied"}
    )
    calls: list[tuple[str, Profile | None, dict[str, Any]]] = field(default_factory=list)

    def _record(self, op: str, profile: Profile | None, **args: Any) -> Mapping[str, Any]:
        self.calls.append((op, profile, args))
        if self.error is not None:
            raise self.error
        return self.answer

    async def call(self, profile: Profile | None, request: Request) -> Mapping[str, Any]:
        """Records the op's arguments as the backend receives them (a plan: its repository
        only; an apply's override only when asked)."""
        args = arguments(request)
        if request.op == "plan":
            args = {"canonical_repository": args["canonical_repository"]}
        if args.get("override_mass_guard") is False:
            del args["override_mass_guard"]
        return self._record(request.op, profile, **args)


async def structured(
    backend: Recorder, tool: str, *, expect_error: bool = False, **arguments: Any
) -> dict[str, Any]:
    async with Client(build_mcp_server(backend, profile_resolver=lambda: OPERATOR)) as client:
        result = await client.call_tool(tool, arguments)
    assert isinstance(result, CallToolResult)
    assert result.is_error is expect_error, result.content
    assert isinstance(result.structured_content, dict)
    return result.structured_content


async def test_the_resolver_is_asked_on_every_call() -> None:
    backend = Recorder()
    callers = iter([OPERATOR, None])
    server = build_mcp_server(backend, profile_resolver=lambda: next(callers))
    async with Client(server) as client:
        await client.call_tool(PLAN_TOOL, {})
        await client.call_tool(PLAN_TOOL, {})

    assert [profile for _, profile, _ in backend.calls] == [OPERATOR, None]


async def test_blank_optional_strings_mean_not_given() -> None:
    backend = Recorder()
    await structured(
        backend,
        APPLY_TOOL,
        candidate_fingerprint="candidatefp-1",
        registry_fingerprint=" ",
        scope_fingerprint="scopefp-1",
        canonical_repository="",
        worker_identities='["w-1", " w-2 "]',
    )
    await structured(backend, SNAPSHOT_TOOL, canonical_repository="", expected_live_revision="")

    (_, _, applied), (_, _, snapshot) = backend.calls
    assert applied == {
        "candidate_fingerprint": "candidatefp-1",
        "worker_identities": ("w-1", "w-2"),
        "registry_fingerprint": None,
        "scope_fingerprint": "scopefp-1",
        "canonical_repository": None,
    }
    assert snapshot == {
        "canonical_repository": None,
        "expected_manifest": (),
        "expected_live_revision": None,
        "include_history": False,
    }


@pytest.mark.parametrize(
    ("tool", "op", "args"),
    [
        (SNAPSHOT_TOOL, "snapshot", {"expected_live_revision": "r" * 513}),
        (SNAPSHOT_TOOL, "snapshot", {"expected_manifest": [{"client_type": "codex"}]}),
        (PLAN_TOOL, "plan", {"cursor": "c" * 513}),
        (PLAN_TOOL, "plan", {"reason": "not_a_reason"}),
        (APPLY_TOOL, "apply", {**APPLY_ARGS, "candidate_fingerprint": "f" * 513}),
        (APPLY_TOOL, "apply", {**APPLY_ARGS, "candidate_fingerprint": " "}),
        (APPLY_TOOL, "apply", {**APPLY_ARGS, "worker_identities": '["w-1", ""]'}),
        (HEARTBEAT_TOOL, "lease_heartbeat", {"session_id": "s" * 600, "lease_id": "l-1"}),
        (
            HEARTBEAT_TOOL,
            "lease_heartbeat",
            {"session_id": "s", "lease_id": "l", "lease_ttl_seconds": 1e13},
        ),
    ],
)
async def test_a_tool_refuses_what_the_socket_refuses_in_its_words(
    tool: str, op: str, args: dict[str, Any]
) -> None:
    """The daemon's tools read their arguments with the socket's parser, as the stdio bridge
    (which sends them over the socket) always has: the same input, the same refusal, and
    nothing reaches the backend."""
    frame = json.dumps({"v": 1, "op": op, "token": "t", "args": args}).encode()
    with pytest.raises(ProtocolError) as on_the_socket:
        decode_request(frame)
    backend = Recorder()

    result = await structured(backend, tool, expect_error=True, **args)

    assert result["success"] is False
    assert result["reasons"] == [on_the_socket.value.detail]
    assert backend.calls == []


async def test_include_history_reaches_the_backend() -> None:
    backend = Recorder()
    await structured(backend, SNAPSHOT_TOOL, include_history=True)
    [(_, _, snapshot)] = backend.calls
    assert snapshot["include_history"] is True


async def test_manifest_entries_reach_the_backend_as_manifest_entries() -> None:
    backend = Recorder()
    await structured(
        backend,
        SNAPSHOT_TOOL,
        expected_manifest=[
            {
                "client_instance_id": "inst-a",
                "client_type": "codex",
                "fleet_run_id": "run-1",
                "namespaces": ["author", "reviewer"],
            }
        ],
    )

    (_, _, args) = backend.calls[0]
    assert args["expected_manifest"] == (
        ManifestEntry(
            client_instance_id="inst-a",
            client_type="codex",
            fleet_run_id="run-1",
            namespaces=("author", "reviewer"),
        ),
    )


async def test_the_audit_context_is_echoed_with_the_repository_the_supervisor_used() -> None:
    backend = Recorder(answer={"success": True, "canonical_repository": "/srv/default"})
    result = await structured(backend, PLAN_TOOL, host="git.example", repo="fleet")

    assert result["repository"] == {
        "remote": "dadeschools",
        "host": "git.example",
        "org": None,
        "repo": "fleet",
        "canonical_repository": "/srv/default",
    }


@pytest.mark.parametrize("tool", [SNAPSHOT_TOOL, PLAN_TOOL])
async def test_a_lost_answer_to_a_read_is_a_structured_failure(tool: str) -> None:
    result = await structured(
        Recorder(error=ActorStopped("retirement stopped")), tool, expect_error=True
    )

    assert result["success"] is False
    assert result["outcome"] == "failed"
    assert result["error"] == "actor_stopped"
    assert result["reasons"] == ["retirement stopped"]
    assert result["mutation_performed"] is False


async def test_a_refused_apply_retired_nothing() -> None:
    result = await structured(
        Recorder(error=PermissionDenied("no grant")), APPLY_TOOL, expect_error=True, **APPLY_ARGS
    )

    assert result["outcome"] == "refused"
    assert result["error"] == "permission_denied"
    assert result["mutation_performed"] is False
    assert result["retired_count"] == 0


@pytest.mark.parametrize("error", [ActorStopped("writer stopped"), Unavailable("gone")])
async def test_a_lost_answer_to_an_apply_does_not_claim_nothing_was_retired(
    error: SupervisorError,
) -> None:
    result = await structured(Recorder(error=error), APPLY_TOOL, expect_error=True, **APPLY_ARGS)

    assert result["success"] is False
    assert result["outcome"] == "outcome_unknown"
    assert "mutation_performed" not in result
    assert "retired_count" not in result
    assert result["error"] == error.code
    assert any("plan again" in reason for reason in result["reasons"])


@pytest.mark.parametrize(
    ("answer", "flagged"),
    [
        # A compare-and-swap that moved wrote nothing although the call itself went fine.
        ({"success": True, "outcome": "registry_revision_moved", "retired_count": 0}, True),
        ({"success": False, "outcome": "mass_retirement_guard", "retired_count": 0}, True),
        ({"success": True, "outcome": "nothing_requested", "retired_count": 0}, True),
        ({"success": True, "outcome": "already_retired", "retired_count": 0}, False),
        ({"success": True, "outcome": "applied", "retired_count": 1}, False),
    ],
)
async def test_apply_is_an_error_unless_it_applied(answer: dict[str, Any], flagged: bool) -> None:
    result = await structured(
        Recorder(answer=answer), APPLY_TOOL, expect_error=flagged, **APPLY_ARGS
    )
    # The structured answer travels either way, reason code included.
    assert result["outcome"] == answer["outcome"]


async def test_a_denied_read_is_flagged_and_an_unsafe_fleet_is_not() -> None:
    denied = {"success": False, "outcome": "refused", "reasons": ["no grant"], "denied": True}
    body = await structured(Recorder(answer=denied), PLAN_TOOL, expect_error=True)
    assert body["reasons"] == ["no grant"]
    unsafe = {"success": True, "live_fleet_safe": False, "blockers": ["duplicate"]}
    assert (await structured(Recorder(answer=unsafe), SNAPSHOT_TOOL))["live_fleet_safe"] is False


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_server_info_names_the_package_version(mode: str) -> None:
    """``legacy`` is the initialize handshake; ``auto`` discovers (2026-era servers)."""
    server = build_mcp_server(Recorder(), profile_resolver=lambda: OPERATOR)
    async with Client(server, mode=mode) as client:
        info = client.server_info
    assert info is not None
    assert info.name == "fleet-supervisor"
    assert info.version == package_version()
    assert info.version != "0+unknown"
