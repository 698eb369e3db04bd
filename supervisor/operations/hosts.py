"""Host lease operations of a shared registry: this host's lease, and a silent host's rows."""

from __future__ import annotations

from supervisor.operations.fleet import APPLY, PLAN
from supervisor.operations.spec import TEXT, TEXTS, Arg, Command, Flag, Operation

__all__ = ["HOST_OPERATIONS"]

_HOST = Arg(
    "host_id",
    TEXT,
    required=True,
    cli=Flag("host_id", "the host id, as status and snapshot show it", metavar="HOST"),
)

# A host plan needs the fleet plan's grant ("plan": it reads rows) and a host apply the
# fleet's retire rule ("apply": retiring a silent host's rows retires rows). Status needs
# only an authenticated profile.
HOST_STATUS = Operation(
    "host_status", "status", {}, command=Command("hosts", "status", "this host's lease")
)
HOST_PLAN = Operation(
    "host_plan",
    "plan_retirement",
    PLAN.tasks,
    args=(_HOST,),
    command=Command(
        "hosts", "plan", "dry-run: which rows of a silent HOST may be retired (host_lease_expired)"
    ),
)
HOST_APPLY = Operation(
    "host_apply",
    "apply_retirement",
    APPLY.tasks,
    args=(
        _HOST,
        Arg(
            "host_token",
            TEXT,
            required=True,
            cli=Flag("--host-token", "the host token the plan printed"),
        ),
        Arg(
            "candidate_fingerprint",
            TEXT,
            required=True,
            cli=Flag("--candidate-fingerprint", "the candidate fingerprint the plan printed"),
        ),
        Arg(
            "worker_identities",
            TEXTS,
            required=True,
            cli=Flag.comma("--workers", "identities", kind="split"),
        ),
    ),
    command=Command("hosts", "apply", "retire the rows a host plan approved (compare-and-swap)"),
)

HOST_OPERATIONS = (HOST_STATUS, HOST_PLAN, HOST_APPLY)
