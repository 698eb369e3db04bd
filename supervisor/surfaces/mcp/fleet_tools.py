"""The fleet MCP tools (snapshot, plan, apply): named as their operations declare, each a
thin adapter from tool arguments to a backend's call, with the socket's own parsers."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol, TypeVar

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations

from supervisor.errors import ProtocolError
from supervisor.operations.registry import tool_name
from supervisor.policy.control.permissions import Profile
from supervisor.policy.fleet.snapshot import ManifestEntry
from supervisor.surfaces.mcp.answers import tool_answer
from supervisor.surfaces.mcp.size import fit_result
from supervisor.surfaces.socket.fleet_args import (
    parse_manifest,
    parse_plan_query,
    parse_worker_identities,
)
from supervisor.wire import PlanQuery

__all__ = [
    "APPLY_TOOL",
    "PLAN_TOOL",
    "SNAPSHOT_TOOL",
    "TOOL_NAMES",
    "ProfileResolver",
    "ToolArgumentError",
    "ToolBackend",
    "register_fleet_tools",
]


SNAPSHOT_TOOL = tool_name("snapshot")
PLAN_TOOL = tool_name("plan")
APPLY_TOOL = tool_name("apply")
TOOL_NAMES = (SNAPSHOT_TOOL, PLAN_TOOL, APPLY_TOOL)

_T = TypeVar("_T")

ProfileResolver = Callable[[], Profile | None]


class ToolBackend(Protocol):
    """What the tools call: the in-process SupervisorHandle, or the daemon over its socket.

    ``profile`` is the caller the MCP transport authenticated; a backend that
    authenticates by other means (the socket backend sends its token) ignores it.
    """

    async def snapshot(
        self,
        profile: Profile | None,
        *,
        canonical_repository: str | None,
        expected_manifest: Sequence[ManifestEntry],
        expected_live_revision: str | None,
        include_history: bool = False,
    ) -> Mapping[str, Any]: ...

    async def plan(
        self,
        profile: Profile | None,
        *,
        canonical_repository: str | None,
        query: PlanQuery | None = None,
    ) -> Mapping[str, Any]: ...

    async def apply(
        self,
        profile: Profile | None,
        *,
        candidate_fingerprint: str,
        worker_identities: Sequence[str],
        registry_fingerprint: str | None,
        scope_fingerprint: str | None,
        canonical_repository: str | None,
    ) -> Mapping[str, Any]: ...


class ToolArgumentError(ToolError):
    """A tool's arguments are unusable; the server answers with a structured refusal."""

    def __init__(self, reasons: Sequence[str]) -> None:
        super().__init__("; ".join(reasons))
        self.reasons = tuple(reasons)


def _optional_text(value: str | None) -> str | None:
    # A blank string from a model means "not given"; the socket protocol would refuse it.
    return value if value is not None and value.strip() else None


def _parsed(parse: Callable[[object], _T], raw: object) -> _T:
    """The socket protocol's own parser, so both surfaces accept and refuse the same input."""
    try:
        return parse(raw)
    except ProtocolError as exc:
        raise ToolArgumentError([exc.detail]) from exc


def _body_budget(max_result_bytes: int) -> int:
    # A tool result carries the answer twice (structured content, and the SDK's
    # indented JSON text of it), so one copy gets a third of the whole budget.
    return max(1024, max_result_bytes // 3)


#: What an apply whose answer was lost tells its caller (it may have retired rows).
_APPLY_LOST = (
    "no answer came back, so whether anything was retired is unknown; "
    "plan again to see the registry as it is now"
)


async def _answer(task: str, call: Awaitable[Mapping[str, Any]]) -> dict[str, Any]:
    if task == "apply":
        return await tool_answer(
            call, mutating=True, lost=_APPLY_LOST, refused_extra={"retired_count": 0}
        )
    return await tool_answer(call, mutating=False, lost="")


def _located(
    result: dict[str, Any],
    where: tuple[str, str | None, str | None, str | None],
    canonical_repository: str | None,
    max_result_bytes: int,
) -> dict[str, Any]:
    """``result`` with the audit context it was asked in (remote, host, org, repo), cut to size."""
    remote, host, org, repo = where
    result["repository"] = {
        "remote": remote,
        "host": host,
        "org": org,
        "repo": repo,
        # The supervisor's default applies when none was given; report the one it used.
        "canonical_repository": result.get("canonical_repository") or canonical_repository,
    }
    return fit_result(result, _body_budget(max_result_bytes))


def register_fleet_tools(
    server: MCPServer[Any],
    backend: ToolBackend,
    *,
    profile_resolver: ProfileResolver,
    max_result_bytes: int,
) -> None:
    """Add the snapshot, plan and apply tools to ``server``; every decision is the backend's."""

    @server.tool(
        name=SNAPSHOT_TOOL,
        annotations=ToolAnnotations(read_only_hint=True, destructive_hint=False),
    )
    async def snapshot_tool(
        canonical_repository: str | None = None,
        expected_manifest: list[dict[str, Any]] | None = None,
        expected_live_revision: str | None = None,
        include_history: bool = False,
    ) -> dict[str, Any]:
        """Read-only: classify every worker registration and the live fleet.

        Returns live, stale and historical counts, each worker's classification
        (in workers and again in live_workers, stale_workers, historical_workers),
        instance groups, identity collisions and the active blockers that make the
        live fleet unsafe. registry_revision / consistency_token are observation
        stamps that move on every call: never pass them to apply. Needs gitea.read
        and a controller or reconciler role.

        Args:
            canonical_repository: Repository the workers should be bound to
                (defaults to the supervisor's configured repository).
            expected_manifest: Approved instances, each an object with
                client_instance_id (required), client_type, fleet_run_id and
                namespaces; live instances off the list and listed instances that
                are not live become blockers.
            expected_live_revision: Revision live workers are expected to run.
            include_history: Also list every released, superseded and retired
                registration in workers and historical_workers (otherwise history
                is only counted); costs a read of the whole registry.
        """
        manifest = _parsed(parse_manifest, expected_manifest)
        answer = await _answer(
            "snapshot",
            backend.snapshot(
                profile_resolver(),
                canonical_repository=_optional_text(canonical_repository),
                expected_manifest=manifest,
                expected_live_revision=_optional_text(expected_live_revision),
                include_history=include_history is True,
            ),
        )
        return fit_result(answer, _body_budget(max_result_bytes))

    @server.tool(
        name=PLAN_TOOL,
        annotations=ToolAnnotations(read_only_hint=True, destructive_hint=False),
    )
    async def plan_tool(
        *,
        remote: str = "dadeschools",
        host: str | None = None,
        org: str | None = None,
        repo: str | None = None,
        canonical_repository: str | None = None,
        reason: str | None = None,
        namespace: str | None = None,
        instance: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
        full: bool = False,
    ) -> dict[str, Any]:
        """Read-only: which worker registrations are conclusively stale, with tokens to retire them.

        Every registration is either a candidate or preserved with the first
        reason it cannot be proven stale. Returns registry_fingerprint,
        scope_fingerprint, candidate_fingerprint and candidate_worker_identities
        for the apply tool, the candidates in full, and preserved rows as counts
        per reason code with a few examples (preserved_summary); pass reason,
        namespace or instance for full preserved entries, a page at a time.
        Retires nothing. Needs gitea.read and a controller or reconciler role.

        Args:
            remote: Instance name, recorded as audit context only.
            host: Host override, recorded as audit context only.
            org: Organisation, recorded as audit context only.
            repo: Repository name, recorded as audit context only.
            canonical_repository: Repository binding workers must have to be
                retired (defaults to the supervisor's configured repository).
            reason: List the preserved entries with this reason code.
            namespace: List the preserved entries of this namespace.
            instance: List the preserved entries of this client_instance_id.
            limit: Entries per page (default 50).
            cursor: The next_cursor of the previous page.
            full: List every preserved entry (large; the answer is cut to size).
        """
        wanted: dict[str, Any] = {
            key: value
            for key, value in {
                "reason": _optional_text(reason),
                "namespace": _optional_text(namespace),
                "instance": _optional_text(instance),
                "limit": limit,
                "cursor": _optional_text(cursor),
                "full": full,
            }.items()
            if value is not None
        }
        query = _parsed(lambda _raw: parse_plan_query(wanted), wanted)
        result = await _answer(
            "plan",
            backend.plan(
                profile_resolver(),
                canonical_repository=_optional_text(canonical_repository),
                query=query,
            ),
        )
        where = (remote, host, org, repo)
        return _located(result, where, _optional_text(canonical_repository), max_result_bytes)

    @server.tool(
        name=APPLY_TOOL,
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True),
    )
    async def apply_tool(
        *,
        candidate_fingerprint: str,
        worker_identities: list[str] | str,
        registry_fingerprint: str | None = None,
        scope_fingerprint: str | None = None,
        remote: str = "dadeschools",
        host: str | None = None,
        org: str | None = None,
        repo: str | None = None,
        canonical_repository: str | None = None,
    ) -> dict[str, Any]:
        """Retire the plan's stale worker registrations under compare-and-swap.

        Give the plan's candidate_fingerprint, its exact
        candidate_worker_identities, and exactly one of registry_fingerprint
        (whole registry unchanged) or scope_fingerprint (only the rows that share
        an identity with a candidate unchanged). The supervisor re-reads the
        registry, re-plans, re-probes each process and retires nothing if
        anything moved. Rows are marked retired, never deleted. Needs
        gitea.worker_registry.retire and a controller or reconciler role.

        Args:
            candidate_fingerprint: The plan's candidate_fingerprint.
            worker_identities: The plan's candidate_worker_identities (a list, a
                JSON list, or a comma-separated string).
            registry_fingerprint: The plan's registry_fingerprint (strict mode).
            scope_fingerprint: The plan's scope_fingerprint (scoped mode).
            remote: Instance name, recorded as audit context only.
            host: Host override, recorded as audit context only.
            org: Organisation, recorded as audit context only.
            repo: Repository name, recorded as audit context only.
            canonical_repository: Must be the value the plan used.
        """
        identities = _parsed(parse_worker_identities, worker_identities)
        result = await _answer(
            "apply",
            backend.apply(
                profile_resolver(),
                candidate_fingerprint=candidate_fingerprint,
                worker_identities=identities,
                registry_fingerprint=_optional_text(registry_fingerprint),
                scope_fingerprint=_optional_text(scope_fingerprint),
                canonical_repository=_optional_text(canonical_repository),
            ),
        )
        where = (remote, host, org, repo)
        return _located(result, where, _optional_text(canonical_repository), max_result_bytes)
