"""The control-plane operations: sessions, work items, leases, the allocator and the gate."""

from __future__ import annotations

from supervisor.operations.rules import ANY_LEASE, ANY_READ, OPERATOR_LEASE, REVIEW_LEASE
from supervisor.operations.spec import (
    BOOL,
    INT,
    INT_OR_NULL,
    NUMBER,
    OBJECTS,
    TEXT,
    TEXTS,
    Arg,
    Command,
    Flag,
    Operation,
    Tool,
)

__all__ = ["CONTROL_OPERATIONS"]

_LOST_LEASE = (
    "no answer came back, so whether the lease changed is unknown; asking again is "
    "safe (a session asking for what it holds gets its own lease back)"
)

_REPO = (
    Arg(
        name="remote",
        shape=TEXT,
        required=True,
        cli=Flag(flag="--remote", help="Gitea remote name"),
    ),
    Arg(name="org", shape=TEXT, required=True, cli=Flag(flag="--org")),
    Arg(name="repo", shape=TEXT, required=True, cli=Flag(flag="--repo")),
)
_ITEM = (
    *_REPO,
    Arg(name="kind", shape=TEXT, required=True, cli=Flag(flag="--kind", help="issue or pr")),
    Arg(name="number", shape=INT, required=True, cli=Flag(flag="--number", type=int)),
)
_SESSION = Arg(name="session_id", shape=TEXT, required=True, cli=Flag(flag="--session"))
_LEASE = (
    _SESSION,
    Arg(name="lease_id", shape=TEXT, required=True, cli=Flag(flag="--lease", help="lease id")),
)
_TTL = Arg(
    name="lease_ttl_seconds", shape=NUMBER, cli=Flag(flag="--ttl", type=float, help="lease seconds")
)
_OWNER = Arg(name="owner_pid", shape=INT, cli=Flag(flag="--owner-pid", type=int))
_WHERE_DOCS = (
    ("remote", "Gitea remote name."),
    ("org", "Repository owner."),
    ("repo", "Repository name."),
)

SESSION_UPSERT = Operation(
    name="session_upsert",
    call="upsert_session",
    tasks={"session_upsert": ANY_LEASE},
    args=(
        Arg(name="session_id", shape=TEXT, required=True),
        Arg(name="role", shape=TEXT),
        Arg(name="namespace", shape=TEXT),
        Arg(name="worker_identity", shape=TEXT),
        Arg(name="pid", shape=INT),
        Arg(name="status", shape=TEXT),
    ),
)

WORK_ITEM_UPSERT = Operation(
    name="work_item_upsert",
    call="upsert_work_item",
    tasks={"work_item_upsert": ANY_LEASE},
    args=(
        *_ITEM,
        Arg(name="state", shape=TEXT, cli=Flag(flag="--state", help="open, closed or merged")),
        Arg(name="current_head_sha", shape=TEXT, cli=Flag(flag="--head", help="current head sha")),
        Arg(name="title", shape=TEXT, cli=Flag(flag="--title")),
        Arg(name="priority", shape=INT, cli=Flag(flag="--priority", type=int)),
    ),
    command=Command(
        group="work",
        name="item",
        help="record an item's state or head (e.g. merged, or a new push)",
    ),
)

ASSIGN = Operation(
    name="assign",
    call="assign_and_lease",
    # Assigning a named item directly bypasses routing, so only the operator roles may.
    tasks={"lease_assign": OPERATOR_LEASE},
    args=(
        *_ITEM,
        _SESSION,
        Arg(name="role", shape=TEXT, required=True, cli=Flag(flag="--role")),
        Arg(
            name="expected_head_sha",
            shape=TEXT,
            cli=Flag(flag="--head", help="expected head sha (required for a pr)"),
        ),
        Arg(
            name="allowed_actions",
            shape=TEXTS,
            cli=Flag(
                flag="--allow",
                help="comma-separated allowed actions (default: role's)",
                kind="list",
            ),
        ),
        Arg(
            name="forbidden_actions",
            shape=TEXTS,
            cli=Flag(
                flag="--forbid",
                help="comma-separated forbidden actions (default: role's)",
                kind="list",
            ),
        ),
        Arg(name="phase", shape=TEXT),
        _TTL,
        _OWNER,
    ),
    command=Command(
        group="work", name="assign", help="lease one named item to a session (operator roles)"
    ),
)

ALLOCATE = Operation(
    name="allocate",
    call="allocate_next_work",
    # Any role may ask the allocator for its own work; a preview only looks.
    tasks={"allocate_preview": ANY_READ, "allocate_apply": ANY_LEASE},
    args=(
        *_REPO,
        _SESSION,
        Arg(
            name="candidates",
            shape=OBJECTS,
            required=True,
            cli=Flag(
                flag="--candidates",
                help="JSON file with a list of candidates, or - for stdin",
                kind="json",
                what="candidates",
            ),
        ),
        Arg(name="role", shape=TEXT, cli=Flag(flag="--role", help="default: the profile's role")),
        Arg(
            name="apply",
            shape=BOOL,
            default=False,
            cli=Flag(flag="--apply", help="reserve (default: preview)", kind="true"),
        ),
        _TTL,
        _OWNER,
    ),
    tool=Tool(
        name="gitea_allocate_next_work",
        function="allocate_tool",
        summary="""\
Ask the controller-owned allocator for your next issue or pull request.

Do not pick work yourself: call this with apply=false to preview, then
apply=true to take the item. With apply the supervisor routes the
candidates and leases the pick in one transaction, so two sessions never
hold the same item. Outcomes: assigned_work (with lease_proof: lease id,
expiry, expected head, allowed and forbidden actions), wait (another
session holds it; owner_session_id names it), blocked_by_terminal_path,
no_safe_work, role_ineligible, preview. Skipped candidates come with reasons.""",
        params=(
            ("session_id", "Your session id (the one your worker registered with)."),
            *_WHERE_DOCS,
            (
                "candidates",
                """\
Open issues and pull requests, each an object with kind
("issue" or "pr"), number, and optionally state, labels, title,
priority, head_sha, created_at and the routing signals
request_changes_current_head, approval_on_current_head,
approval_stale, approval_contaminated, mergeable, blocked,
dependency_unmet, dependency_reason. Monitoring incidents are refused.""",
            ),
            ("apply", "false previews; true reserves the selected item."),
            ("role", "Your role; defaults to your profile's role (another is refused)."),
            ("lease_ttl_seconds", "Lease length; renew it with the heartbeat tool."),
            ("owner_pid", "Your worker's pid, so retirement protects the lease owner."),
        ),
        read_only=False,
        mutating=None,
        lost=_LOST_LEASE,
    ),
    command=Command(
        group="work", name="allocate", help="route candidates to your role; --apply takes the pick"
    ),
)

ASSIGNMENT_CHECK = Operation(
    name="assignment_check",
    call="require_valid_assignment",
    tasks={"assignment_check": ANY_READ},
    args=(
        *_ITEM,
        _SESSION,
        Arg(name="action", shape=TEXT, required=True, cli=Flag(flag="--action")),
    ),
    tool=Tool(
        name="gitea_require_valid_assignment",
        function="check_tool",
        summary="""\
The mutation gate: may this session perform this action on this item now?

success is true only with a live lease, an action the assignment allows (and
does not forbid), an item that is not merged or closed, and a head that has
not moved since the assignment pinned it. Check before every mutation.""",
        params=(
            ("session_id", "Your session id."),
            *_WHERE_DOCS,
            ("kind", '"issue" or "pr".'),
            ("number", "The issue or pull request number."),
            ("action", "The action about to be taken (implement, push, review, merge, ...)."),
        ),
        read_only=True,
        mutating=False,
        lost=_LOST_LEASE,
    ),
    command=Command(
        group="work",
        name="check",
        help="the mutation gate: exit 0 only if the action is covered now",
    ),
)

LEASE_HEARTBEAT = Operation(
    name="lease_heartbeat",
    call="heartbeat_lease",
    tasks={"lease_heartbeat": ANY_LEASE},
    args=(
        *_LEASE,
        Arg(
            name="lease_ttl_seconds",
            shape=NUMBER,
            cli=Flag(flag="--ttl", type=float, help="new lease seconds"),
        ),
    ),
    tool=Tool(
        name="gitea_heartbeat_work_lease",
        function="heartbeat_tool",
        summary="Keep a work lease alive; an expired or foreign lease is refused.",
        params=(
            ("session_id", "The session that holds the lease."),
            ("lease_id", "The lease_id from gitea_allocate_next_work."),
            ("lease_ttl_seconds", "New lease length (default: the length it was granted with)."),
        ),
        read_only=False,
        mutating=True,
        lost=_LOST_LEASE,
    ),
    command=Command(group="work", name="heartbeat", help="renew a lease"),
)

LEASE_RELEASE = Operation(
    name="lease_release",
    call="release_lease",
    tasks={"lease_release": ANY_LEASE},
    args=_LEASE,
    tool=Tool(
        name="gitea_release_work_lease",
        function="release_tool",
        summary=(
            "Give a work lease back when the work is done or abandoned (releasing twice is fine)."
        ),
        params=(
            ("session_id", "The session that holds the lease."),
            ("lease_id", "The lease to release."),
        ),
        read_only=False,
        mutating=True,
        lost=_LOST_LEASE,
    ),
    command=Command(group="work", name="release", help="give a lease back"),
)

_LOCK = Command(
    group="work",
    name="lock",
    help="show, set or clear the repository's terminal-review lock",
    order=("--remote", "--org", "--repo", "--set", "--clear", "--decision", "--review-id"),
)

TERMINAL_LOCK_SET = Operation(
    name="terminal_lock_set",
    call="set_terminal_lock",
    tasks={"terminal_lock_set": REVIEW_LEASE},
    args=(
        *_REPO,
        # Must be present: null clears the lock, so a missing value must not.
        Arg(
            name="terminal_pr",
            shape=INT_OR_NULL,
            required=True,
            cli=Flag(flag="--set", type=int, metavar="PR", help="lock on this PR", group="change"),
        ),
        Arg(name="review_id", shape=TEXT, cli=Flag(flag="--review-id")),
        Arg(name="decision", shape=TEXT, cli=Flag(flag="--decision")),
    ),
    command=_LOCK,
    when=("--set", "--clear"),
    extra_flags=(Flag(flag="--clear", kind="true", group="change"),),
)

TERMINAL_LOCK_GET = Operation(
    name="terminal_lock_get",
    call="get_terminal_lock",
    tasks={"terminal_lock_read": ANY_READ},
    args=_REPO,
    command=_LOCK,
)

#: In the order their MCP tools and CLI commands are listed.
CONTROL_OPERATIONS = (
    SESSION_UPSERT,
    ALLOCATE,
    ASSIGN,
    LEASE_HEARTBEAT,
    LEASE_RELEASE,
    ASSIGNMENT_CHECK,
    WORK_ITEM_UPSERT,
    TERMINAL_LOCK_SET,
    TERMINAL_LOCK_GET,
)
