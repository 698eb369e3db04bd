"""The worker ops and the operator's fleet ops (status, snapshot, plan, apply)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from supervisor.operations.rules import ANY_READ, OPERATOR_READ, OPERATOR_RETIRE
from supervisor.operations.spec import (
    BOOL,
    INT,
    OBJECT,
    OBJECTS,
    TEXT,
    TEXTS,
    Arg,
    Command,
    Flag,
    Operation,
)
from supervisor.wire import DEFAULT_PAGE

__all__ = ["FLEET_OPERATIONS", "OPERATOR_OPS", "WORKER_OPS"]

# Their wire arguments are checked by parsers of their own (``surfaces.socket.fleet_args``,
# named by op; every worker heartbeat takes a fast path there) and their MCP tools are
# written by hand (``surfaces.mcp.fleet_tools``): the argument lists here name what the
# wire carries, and the surfaces take names, order and CLI flags from them.
_FENCED = (
    Arg("worker_identity", TEXT, required=True),
    Arg("pid", INT, required=True),
    Arg("generation_id", TEXT, required=True),
    Arg("fencing_epoch", INT, required=True),
)

# Workers act for their own process, proved by peer credentials: no profile, no task.
REGISTER = Operation("register", "register", {}, args=(Arg("pid", INT), Arg("claims", OBJECT)))
HEARTBEAT = Operation("heartbeat", "heartbeat", {}, args=_FENCED)
RELEASE = Operation("release", "release", {}, args=_FENCED)

_REPOSITORY = Arg("canonical_repository", TEXT, cli=Flag("--canonical-repository"))


def _fleet_safe(result: Mapping[str, Any], request: Mapping[str, Any]) -> bool:
    del request
    return bool(result.get("success", True) and result.get("live_fleet_safe", False))


def _all_retired(result: Mapping[str, Any], request: Mapping[str, Any]) -> bool:
    # Applied, and every named row retired: a partial retirement is not a success.
    return result.get("outcome") == "applied" and result.get("retired_count") == len(
        request["worker_identities"]
    )


STATUS = Operation(
    "status",
    "status_report",
    {"status": ANY_READ},
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
SNAPSHOT = Operation(
    "snapshot",
    "snapshot",
    {"snapshot": OPERATOR_READ},
    args=(
        _REPOSITORY,
        Arg("expected_manifest", OBJECTS),
        Arg("expected_live_revision", TEXT),
        Arg(
            "include_history",
            BOOL,
            default=False,
            cli=Flag(
                "--history",
                "also list released, superseded and retired rows (reads all history)",
                kind="true",
            ),
        ),
    ),
    alias="gitea_snapshot_instance_fleet",
    command=Command("", "snapshot", "classified fleet snapshot", succeeded=_fleet_safe),
)
# By default a plan lists candidates in full and preserved rows only as counts per reason
# with a few examples; the listing flags ask for full preserved entries.
PLAN = Operation(
    "plan",
    "plan",
    {"plan": OPERATOR_READ},
    args=(
        _REPOSITORY,
        Arg(
            "full",
            BOOL,
            default=False,
            cli=Flag("--full", "every preserved entry (large)", kind="true"),
        ),
        Arg("reason", TEXT, cli=Flag("--reason", "list preserved entries with this reason code")),
        Arg("namespace", TEXT, cli=Flag("--namespace", "list preserved entries of this namespace")),
        Arg(
            "instance",
            TEXT,
            cli=Flag("--instance", "list preserved entries of this client_instance_id"),
        ),
        Arg(
            "limit",
            INT,
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
            cli=Flag("--examples", "examples per reason code (default 3)", type=int),
        ),
    ),
    alias="gitea_plan_stale_worker_retirement",
    command=Command("", "plan", "dry-run retirement plan"),
)
APPLY = Operation(
    "apply",
    "apply",
    {"apply": OPERATOR_RETIRE},
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
            cli=Flag("--workers", "comma-separated identities", kind="list", required=True),
        ),
        _REPOSITORY,
    ),
    alias="gitea_apply_stale_worker_retirement",
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
        ),
        required_groups=("tokens",),
        succeeded=_all_retired,
        progress="applying",
    ),
)

WORKER_OPS = frozenset({REGISTER.name, HEARTBEAT.name, RELEASE.name})
OPERATOR_OPS = frozenset({SNAPSHOT.name, PLAN.name, APPLY.name, STATUS.name})
FLEET_OPERATIONS = (REGISTER, HEARTBEAT, RELEASE, STATUS, SNAPSHOT, PLAN, APPLY)
