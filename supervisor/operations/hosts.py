"""Host lease operations of a shared registry: this host's lease, and a silent host's rows."""

from __future__ import annotations

from supervisor.operations.fleet import APPLY
from supervisor.operations.spec import TEXT, TEXTS, Arg, Command, Flag, Operation

__all__ = ["HOST_OPERATIONS"]

_HOST = Arg(name="host_id", shape=TEXT, required=True, cli=Flag(flag="host_id", metavar="HOST"))

# The keeper authorizes plan and apply with the fleet's retire rule ("apply"): retiring
# a silent host's rows retires rows. Status needs only an authenticated profile.
HOST_STATUS = Operation(
    name="host_status",
    call="status",
    tasks={},
    command=Command(group="hosts", name="status", help="this host's lease"),
)
HOST_PLAN = Operation(
    name="host_plan",
    call="plan_retirement",
    tasks=APPLY.tasks,
    args=(_HOST,),
    command=Command(
        group="hosts",
        name="plan",
        help="dry-run: which rows of a silent HOST may be retired (host_lease_expired)",
    ),
)
HOST_APPLY = Operation(
    name="host_apply",
    call="apply_retirement",
    tasks=APPLY.tasks,
    args=(
        _HOST,
        Arg(name="host_token", shape=TEXT, required=True, cli=Flag(flag="--host-token")),
        Arg(
            name="candidate_fingerprint",
            shape=TEXT,
            required=True,
            cli=Flag(flag="--candidate-fingerprint"),
        ),
        Arg(
            name="worker_identities",
            shape=TEXTS,
            required=True,
            cli=Flag(flag="--workers", help="comma-separated identities", kind="split"),
        ),
    ),
    command=Command(
        group="hosts", name="apply", help="retire the rows a host plan approved (compare-and-swap)"
    ),
)

HOST_OPERATIONS = (HOST_STATUS, HOST_PLAN, HOST_APPLY)
