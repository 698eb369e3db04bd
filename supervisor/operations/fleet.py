"""The worker ops and the operator's fleet ops (status, snapshot, plan, apply)."""

from __future__ import annotations

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
    Operation,
)

__all__ = ["FLEET_OPERATIONS", "OPERATOR_OPS", "WORKER_OPS"]

# These ops keep their own parsers in ``surfaces.protocol`` (every worker heartbeat takes
# a fast path there); their argument lists here name what the wire carries.
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

STATUS = Operation(
    "status",
    "status_report",
    {"status": ANY_READ},
    command=Command("", "status", "daemon, liveness and lease summary"),
)
SNAPSHOT = Operation(
    "snapshot",
    "snapshot",
    {"snapshot": OPERATOR_READ},
    args=(
        Arg("canonical_repository", TEXT),
        Arg("expected_manifest", OBJECTS),
        Arg("expected_live_revision", TEXT),
        Arg("include_history", BOOL, default=False),
    ),
    alias="gitea_snapshot_instance_fleet",
    command=Command("", "snapshot", "classified fleet snapshot"),
)
PLAN = Operation(
    "plan",
    "plan",
    {"plan": OPERATOR_READ},
    args=(
        Arg("canonical_repository", TEXT),
        Arg("full", BOOL, default=False),
        Arg("reason", TEXT),
        Arg("namespace", TEXT),
        Arg("instance", TEXT),
        Arg("limit", INT),
        Arg("cursor", TEXT),
        Arg("examples", INT),
    ),
    alias="gitea_plan_stale_worker_retirement",
    command=Command("", "plan", "dry-run retirement plan"),
)
APPLY = Operation(
    "apply",
    "apply",
    {"apply": OPERATOR_RETIRE},
    args=(
        Arg("registry_fingerprint", TEXT),
        Arg("scope_fingerprint", TEXT),
        Arg("candidate_fingerprint", TEXT, required=True),
        Arg("worker_identities", TEXTS),
        Arg("canonical_repository", TEXT),
    ),
    alias="gitea_apply_stale_worker_retirement",
    command=Command("", "apply", "retire the rows a plan approved (compare-and-swap)"),
)

WORKER_OPS = frozenset({REGISTER.name, HEARTBEAT.name, RELEASE.name})
OPERATOR_OPS = frozenset({SNAPSHOT.name, PLAN.name, APPLY.name, STATUS.name})
FLEET_OPERATIONS = (REGISTER, HEARTBEAT, RELEASE, SNAPSHOT, PLAN, APPLY, STATUS)
