"""The worker ops and the operator's fleet ops (status, snapshot, plan, apply)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from supervisor.operations.rules import ANY_READ, OPERATOR_READ, OPERATOR_RETIRE
from supervisor.operations.spec import (
    INT,
    INT64_MAX,
    OBJECT,
    OBJECTS,
    TEXT,
    TEXT_OR_TEXTS,
    TEXTS,
    Arg,
    Command,
    Flag,
    Operation,
    Tool,
)
from supervisor.policy.retirement.reasons import (
    OUTCOME_ALREADY_RETIRED,
    OUTCOME_APPLIED,
    PLAN_REASON_CODES,
)
from supervisor.wire import DEFAULT_PAGE, MAX_EXAMPLES, MAX_PAGE

__all__ = ["FLEET_OPERATIONS", "OPERATOR_OPS", "WORKER_OPS"]

# Their wire arguments are read by ``surfaces.socket.protocol`` from these declarations:
# strings must be non-empty, integers within their bounds, and the arguments are checked
# in the order declared here (a frame with several faults is refused for the first).
# Every worker heartbeat takes a fast path there; their MCP tools answer through hooks
# (``surfaces.mcp.fleet_tools``) that take names, order and parameters from here.
_FENCED = (
    Arg("fencing_epoch", INT, required=True, bounds=(0, INT64_MAX)),
    Arg("worker_identity", TEXT, required=True),
    Arg("pid", INT, required=True, bounds=(1, INT64_MAX)),
    Arg("generation_id", TEXT, required=True),
)

# Workers act for their own process, proved by peer credentials: no profile, no task.
REGISTER = Operation(
    "register",
    "register",
    {},
    args=(Arg("pid", INT, bounds=(1, INT64_MAX)), Arg("claims", OBJECT)),
)
HEARTBEAT = Operation("heartbeat", "heartbeat", {}, args=_FENCED)
RELEASE = Operation("release", "release", {}, args=_FENCED)

_REPOSITORY = Arg("canonical_repository", TEXT, cli=Flag("--canonical-repository"))
#: Where the caller says it is working: recorded with a plan or apply answer, never used.
_CONTEXT = (
    Arg("remote", TEXT, default="dadeschools"),
    Arg("host", TEXT),
    Arg("org", TEXT),
    Arg("repo", TEXT),
)
_CONTEXT_DOCS = (
    ("remote", "Instance name, recorded as audit context only."),
    ("host", "Host override, recorded as audit context only."),
    ("org", "Organisation, recorded as audit context only."),
    ("repo", "Repository name, recorded as audit context only."),
)


def _fleet_safe(result: Mapping[str, Any], request: Mapping[str, Any]) -> bool:
    del request
    return bool(result.get("success", True) and result.get("live_fleet_safe", False))


def _all_retired(result: Mapping[str, Any], request: Mapping[str, Any]) -> bool:
    # Applied, and every named row retired: a partial retirement is not a success. A
    # replay (already_retired: every named row already is) leaves nothing wrong either.
    if result.get("outcome") == OUTCOME_ALREADY_RETIRED:
        return True
    return result.get("outcome") == "applied" and result.get("retired_count") == len(
        request["worker_identities"]
    )


STATUS = Operation.gated(
    "status",
    ANY_READ,
    call="status_report",
    command=Command(
        "",
        "status",
        "daemon, liveness and lease summary",
        succeeded=lambda result, _request: bool(result.get("success", True)),
        watch=True,
    ),
    extra_flags=(
        Flag("--watch", "refresh until interrupted", kind="true"),
        Flag("--interval", "seconds between refreshes (2)", type=float, default=2.0),
        Flag("--count", "with --watch: stop after N refreshes", type=int),
    ),
)
SNAPSHOT = Operation.gated(
    "snapshot",
    OPERATOR_READ,
    args=(
        _REPOSITORY,
        Arg("expected_manifest", OBJECTS),
        Arg("expected_live_revision", TEXT),
        Arg.switch(
            "include_history",
            "--history",
            "also list released, superseded and retired rows (reads all history)",
        ),
    ),
    tool=Tool(
        "gitea_snapshot_instance_fleet",
        "snapshot_tool",
        """\
Read-only: classify every worker registration and the live fleet.

Returns live, stale and historical counts, each worker's classification
(in workers and again in live_workers, stale_workers, historical_workers),
instance groups, identity collisions and the active blockers that make the
live fleet unsafe. registry_revision / consistency_token are observation
stamps that move on every call: never pass them to apply. Needs gitea.read
and a controller or reconciler role.""",
        (
            (
                "canonical_repository",
                """\
Repository the workers should be bound to
(defaults to the supervisor's configured repository).""",
            ),
            (
                "expected_manifest",
                """\
Approved instances, each an object with
client_instance_id (required), client_type, fleet_run_id and
namespaces; live instances off the list and listed instances that
are not live become blockers.""",
            ),
            ("expected_live_revision", "Revision live workers are expected to run."),
            (
                "include_history",
                """\
Also list every released, superseded and retired
registration in workers and historical_workers (otherwise history
is only counted); costs a read of the whole registry.""",
            ),
        ),
        "",
        read_only=True,
        hooked=True,
    ),
    command=Command("", "snapshot", "classified fleet snapshot", succeeded=_fleet_safe),
)
# By default a plan lists candidates in full and preserved rows only as counts per reason
# with a few examples; the listing flags ask for full preserved entries.
#: The listing filters: name, which preserved entries it lists, the only words it may be.
_LISTINGS: tuple[tuple[str, str, frozenset[str] | None], ...] = (
    ("reason", "with this reason code", PLAN_REASON_CODES),
    ("namespace", "of this namespace", None),
    ("instance", "of this client_instance_id", None),
)
PLAN = Operation.gated(
    "plan",
    OPERATOR_READ,
    args=(
        _REPOSITORY,
        Arg.switch("full", "--full", "every preserved entry (large)"),
        *(
            Arg(
                name,
                TEXT,
                choices=choices,
                cli=Flag(f"--{name}", f"list preserved entries {which}"),
            )
            for name, which, choices in _LISTINGS
        ),
        Arg(
            "limit",
            INT,
            bounds=(1, MAX_PAGE),
            cli=Flag("--limit", f"entries per page (default {DEFAULT_PAGE})", type=int),
        ),
        Arg(
            "cursor",
            TEXT,
            cli=Flag("--cursor", "continue after this cursor (a page's next_cursor)"),
        ),
        Arg(
            "examples",
            INT,
            bounds=(0, MAX_EXAMPLES),
            cli=Flag("--examples", "examples per reason code (default 3)", type=int),
        ),
    ),
    tool=Tool(
        "gitea_plan_stale_worker_retirement",
        "plan_tool",
        """\
Read-only: which worker registrations are conclusively stale, with tokens to retire them.

Every registration is either a candidate or preserved with the first
reason it cannot be proven stale. Returns registry_fingerprint,
scope_fingerprint, candidate_fingerprint and candidate_worker_identities
for the apply tool, the candidates in full, and preserved rows as counts
per reason code with a few examples (preserved_summary); pass reason,
namespace or instance for full preserved entries, a page at a time.
Retires nothing. Needs gitea.read and a controller or reconciler role.""",
        (
            *_CONTEXT_DOCS,
            (
                "canonical_repository",
                """\
Repository binding workers must have to be
retired (defaults to the supervisor's configured repository).""",
            ),
            *((name, f"List the preserved entries {which}.") for name, which, _ in _LISTINGS),
            ("limit", "Entries per page (default 50)."),
            ("cursor", "The next_cursor of the previous page."),
            ("full", "List every preserved entry (large; the answer is cut to size)."),
        ),
        "",
        read_only=True,
        own=_CONTEXT,
        hooked=True,
    ),
    command=Command("", "plan", "dry-run retirement plan"),
)
APPLY = Operation.gated(
    "apply",
    OPERATOR_RETIRE,
    args=(
        Arg(
            "registry_fingerprint",
            TEXT,
            cli=Flag("--registry-fingerprint", "strict: whole-registry token", group="tokens"),
        ),
        Arg(
            "scope_fingerprint",
            TEXT,
            cli=Flag("--scope-fingerprint", "scoped: decision-scope token", group="tokens"),
        ),
        Arg("candidate_fingerprint", TEXT, required=True, cli=Flag("--candidate-fingerprint")),
        Arg(
            "worker_identities",
            TEXTS,
            cli=Flag.comma("--workers", "identities", required=True),
        ),
        _REPOSITORY,
        Arg.switch(
            "override_mass_guard",
            "--override-mass-guard",
            "retire even past the mass-retirement guard, this once (audited)",
        ),
    ),
    tool=Tool(
        "gitea_apply_stale_worker_retirement",
        "apply_tool",
        """\
Retire the plan's stale worker registrations under compare-and-swap.

Give the plan's candidate_fingerprint, its exact
candidate_worker_identities, and exactly one of registry_fingerprint
(whole registry unchanged) or scope_fingerprint (only the rows that share
an identity with a candidate unchanged). The supervisor re-reads the
registry, re-plans, re-probes each process and retires nothing if
anything moved. Rows are marked retired, never deleted. Needs
gitea.worker_registry.retire and a controller or reconciler role.""",
        (
            ("candidate_fingerprint", "The plan's candidate_fingerprint."),
            (
                "worker_identities",
                """\
The plan's candidate_worker_identities (a list, a
JSON list, or a comma-separated string).""",
            ),
            ("registry_fingerprint", "The plan's registry_fingerprint (strict mode)."),
            ("scope_fingerprint", "The plan's scope_fingerprint (scoped mode)."),
            *_CONTEXT_DOCS,
            ("canonical_repository", "Must be the value the plan used."),
            (
                "override_mass_guard",
                """\
Retire even when the mass-retirement guard refuses
(too much of this host's fleet at once), for this call only; recorded
in the audit trail.""",
            ),
        ),
        # It may have retired rows.
        "no answer came back, so whether anything was retired is unknown; "
        "plan again to see the registry as it is now",
        own=(*_CONTEXT, Arg("worker_identities", TEXT_OR_TEXTS, required=True)),
        destructive=True,
        hooked=True,
        ok_outcomes=frozenset({OUTCOME_APPLIED, OUTCOME_ALREADY_RETIRED}),
        refused_extra=(("retired_count", 0),),
    ),
    command=Command(
        "",
        "apply",
        "retire the rows a plan approved (compare-and-swap)",
        order=(
            "--canonical-repository",
            "--registry-fingerprint",
            "--scope-fingerprint",
            "--candidate-fingerprint",
            "--workers",
            "--override-mass-guard",
        ),
        required_groups=("tokens",),
        succeeded=_all_retired,
        progress="applying",
    ),
)

WORKER_OPS = frozenset({REGISTER.name, HEARTBEAT.name, RELEASE.name})
OPERATOR_OPS = frozenset({SNAPSHOT.name, PLAN.name, APPLY.name, STATUS.name})
FLEET_OPERATIONS = (REGISTER, HEARTBEAT, RELEASE, STATUS, SNAPSHOT, PLAN, APPLY)
