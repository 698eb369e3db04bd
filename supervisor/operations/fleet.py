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
    Arg(name="worker_identity", shape=TEXT, required=True),
    Arg(name="pid", shape=INT, required=True),
    Arg(name="generation_id", shape=TEXT, required=True),
    Arg(name="fencing_epoch", shape=INT, required=True),
)

# Workers act for their own process, proved by peer credentials: no profile, no task.
REGISTER = Operation(
    name="register",
    call="register",
    tasks={},
    args=(Arg(name="pid", shape=INT), Arg(name="claims", shape=OBJECT)),
)
HEARTBEAT = Operation(name="heartbeat", call="heartbeat", tasks={}, args=_FENCED)
RELEASE = Operation(name="release", call="release", tasks={}, args=_FENCED)

STATUS = Operation(
    name="status",
    call="status_report",
    tasks={"status": ANY_READ},
    command=Command(group="", name="status", help="daemon, liveness and lease summary"),
)
SNAPSHOT = Operation(
    name="snapshot",
    call="snapshot",
    tasks={"snapshot": OPERATOR_READ},
    args=(
        Arg(name="canonical_repository", shape=TEXT),
        Arg(name="expected_manifest", shape=OBJECTS),
        Arg(name="expected_live_revision", shape=TEXT),
        Arg(name="include_history", shape=BOOL, default=False),
    ),
    alias="gitea_snapshot_instance_fleet",
    command=Command(group="", name="snapshot", help="classified fleet snapshot"),
)
PLAN = Operation(
    name="plan",
    call="plan",
    tasks={"plan": OPERATOR_READ},
    args=(
        Arg(name="canonical_repository", shape=TEXT),
        Arg(name="full", shape=BOOL, default=False),
        Arg(name="reason", shape=TEXT),
        Arg(name="namespace", shape=TEXT),
        Arg(name="instance", shape=TEXT),
        Arg(name="limit", shape=INT),
        Arg(name="cursor", shape=TEXT),
        Arg(name="examples", shape=INT),
    ),
    alias="gitea_plan_stale_worker_retirement",
    command=Command(group="", name="plan", help="dry-run retirement plan"),
)
APPLY = Operation(
    name="apply",
    call="apply",
    tasks={"apply": OPERATOR_RETIRE},
    args=(
        Arg(name="registry_fingerprint", shape=TEXT),
        Arg(name="scope_fingerprint", shape=TEXT),
        Arg(name="candidate_fingerprint", shape=TEXT, required=True),
        Arg(name="worker_identities", shape=TEXTS),
        Arg(name="canonical_repository", shape=TEXT),
    ),
    alias="gitea_apply_stale_worker_retirement",
    command=Command(
        group="", name="apply", help="retire the rows a plan approved (compare-and-swap)"
    ),
)

WORKER_OPS = frozenset({REGISTER.name, HEARTBEAT.name, RELEASE.name})
OPERATOR_OPS = frozenset({SNAPSHOT.name, PLAN.name, APPLY.name, STATUS.name})
FLEET_OPERATIONS = (REGISTER, HEARTBEAT, RELEASE, SNAPSHOT, PLAN, APPLY, STATUS)
