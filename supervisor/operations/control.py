"""The control-plane operations: sessions, work items, leases, the allocator and the gate."""

from __future__ import annotations

from supervisor.operations.rules import ANY_LEASE, ANY_READ, OPERATOR_LEASE, REVIEW_LEASE
from supervisor.operations.spec import (
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
    Arg("remote", TEXT, required=True, cli=Flag("--remote", "Gitea remote name")),
    Arg("org", TEXT, required=True, cli=Flag("--org", "repository owner (organization or user)")),
    Arg("repo", TEXT, required=True, cli=Flag("--repo", "repository name")),
)
_ITEM = (
    *_REPO,
    Arg("kind", TEXT, required=True, cli=Flag("--kind", "issue or pr")),
    Arg(
        "number", INT, required=True, cli=Flag("--number", "issue or pull request number", type=int)
    ),
)
_SESSION = Arg(
    "session_id",
    TEXT,
    required=True,
    cli=Flag("--session", "the session id the worker registered with"),
)
_LEASE = (_SESSION, Arg("lease_id", TEXT, required=True, cli=Flag("--lease", "lease id")))
_TTL = Arg("lease_ttl_seconds", NUMBER, cli=Flag("--ttl", type=float, help="lease seconds"))
_OWNER = Arg(
    "owner_pid",
    INT,
    cli=Flag(
        "--owner-pid", "pid of the process that holds the lease (default: the caller)", type=int
    ),
)
_WHERE_DOCS = (
    ("remote", "Gitea remote name."),
    ("org", "Repository owner."),
    ("repo", "Repository name."),
)

SESSION_UPSERT = Operation.gated(
    "session_upsert",
    ANY_LEASE,
    call="upsert_session",
    args=(
        Arg("session_id", TEXT, required=True),
        Arg("role", TEXT),
        Arg("namespace", TEXT),
        Arg("worker_identity", TEXT),
        Arg("pid", INT),
        Arg("status", TEXT),
    ),
)

WORK_ITEM_UPSERT = Operation.gated(
    "work_item_upsert",
    ANY_LEASE,
    call="upsert_work_item",
    args=(
        *_ITEM,
        Arg("state", TEXT, cli=Flag("--state", "open, closed or merged")),
        Arg("current_head_sha", TEXT, cli=Flag("--head", "current head sha")),
        Arg("title", TEXT, cli=Flag("--title", "the item's title")),
        Arg("priority", INT, cli=Flag("--priority", "routing priority (higher first)", type=int)),
    ),
    command=Command("work", "item", "record an item's state or head (e.g. merged, or a new push)"),
)

ASSIGN = Operation(
    name="assign",
    call="assign_and_lease",
    # Assigning a named item directly bypasses routing, so only the operator roles may.
    tasks={"lease_assign": OPERATOR_LEASE},
    args=(
        *_ITEM,
        _SESSION,
        Arg("role", TEXT, required=True, cli=Flag("--role", "the role the session works in")),
        Arg("expected_head_sha", TEXT, cli=Flag("--head", "expected head sha (required for a pr)")),
        Arg(
            "allowed_actions",
            TEXTS,
            cli=Flag.comma("--allow", "allowed actions (default: role's)"),
        ),
        Arg(
            "forbidden_actions",
            TEXTS,
            cli=Flag.comma("--forbid", "forbidden actions (default: role's)"),
        ),
        Arg("phase", TEXT),
        _TTL,
        _OWNER,
    ),
    command=Command("work", "assign", "lease one named item to a session (operator roles)"),
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
            "candidates",
            OBJECTS,
            required=True,
            cli=Flag(
                "--candidates",
                "JSON file with a list of candidates, or - for stdin",
                kind="json",
                what="candidates",
            ),
        ),
        Arg("role", TEXT, cli=Flag("--role", "default: the profile's role")),
        Arg.switch("apply", "--apply", "reserve (default: preview)"),
        _TTL,
        _OWNER,
    ),
    tool=Tool(
        "gitea_allocate_next_work",
        "allocate_tool",
        """\
Ask the controller-owned allocator for your next issue or pull request.

Do not pick work yourself: call this with apply=false to preview, then
apply=true to take the item. With apply the supervisor routes the
candidates and leases the pick in one transaction, so two sessions never
hold the same item. Outcomes: assigned_work (with lease_proof: lease id,
expiry, expected head, allowed and forbidden actions), wait (another
session holds it; owner_session_id names it), blocked_by_terminal_path,
no_safe_work, role_ineligible, preview. Skipped candidates come with reasons.""",
        (
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
        _LOST_LEASE,
        mutates_with="apply",
    ),
    command=Command("work", "allocate", "route candidates to your role; --apply takes the pick"),
)

ASSIGNMENT_CHECK = Operation.gated(
    "assignment_check",
    ANY_READ,
    call="require_valid_assignment",
    args=(*_ITEM, _SESSION, Arg("action", TEXT, required=True, cli=Flag("--action"))),
    tool=Tool(
        "gitea_require_valid_assignment",
        "check_tool",
        """\
The mutation gate: may this session perform this action on this item now?

success is true only with a live lease, an action the assignment allows (and
does not forbid), an item that is not merged or closed, and a head that has
not moved since the assignment pinned it. Check before every mutation.""",
        (
            ("session_id", "Your session id."),
            *_WHERE_DOCS,
            ("kind", '"issue" or "pr".'),
            ("number", "The issue or pull request number."),
            ("action", "The action about to be taken (implement, push, review, merge, ...)."),
        ),
        _LOST_LEASE,
        read_only=True,
    ),
    command=Command("work", "check", "the mutation gate: exit 0 only if the action is covered now"),
)

LEASE_HEARTBEAT = Operation.gated(
    "lease_heartbeat",
    ANY_LEASE,
    call="heartbeat_lease",
    args=(
        *_LEASE,
        Arg("lease_ttl_seconds", NUMBER, cli=Flag("--ttl", type=float, help="new lease seconds")),
    ),
    tool=Tool(
        "gitea_heartbeat_work_lease",
        "heartbeat_tool",
        "Keep a work lease alive; an expired or foreign lease is refused.",
        (
            ("session_id", "The session that holds the lease."),
            ("lease_id", "The lease_id from gitea_allocate_next_work."),
            ("lease_ttl_seconds", "New lease length (default: the length it was granted with)."),
        ),
        _LOST_LEASE,
    ),
    command=Command("work", "heartbeat", "renew a lease"),
)

LEASE_RELEASE = Operation.gated(
    "lease_release",
    ANY_LEASE,
    call="release_lease",
    args=_LEASE,
    tool=Tool(
        "gitea_release_work_lease",
        "release_tool",
        ("Give a work lease back when the work is done or abandoned (releasing twice is fine)."),
        (
            ("session_id", "The session that holds the lease."),
            ("lease_id", "The lease to release."),
        ),
        _LOST_LEASE,
    ),
    command=Command("work", "release", "give a lease back"),
)

_LOCK = Command(
    "work",
    "lock",
    "show, set or clear the repository's terminal-review lock",
    order=("--remote", "--org", "--repo", "--set", "--clear", "--decision", "--review-id"),
)

TERMINAL_LOCK_SET = Operation.gated(
    "terminal_lock_set",
    REVIEW_LEASE,
    call="set_terminal_lock",
    args=(
        *_REPO,
        # Must be present: null clears the lock, so a missing value must not.
        Arg(
            "terminal_pr",
            INT_OR_NULL,
            required=True,
            cli=Flag("--set", type=int, metavar="PR", help="lock on this PR", group="change"),
        ),
        Arg("review_id", TEXT, cli=Flag("--review-id", "the review that decided the lock")),
        Arg("decision", TEXT, cli=Flag("--decision", "the review's decision, as recorded")),
    ),
    command=_LOCK,
    when=("--set", "--clear"),
    extra_flags=(Flag("--clear", "remove the lock", kind="true", group="change"),),
)

TERMINAL_LOCK_GET = Operation(
    "terminal_lock_get",
    "get_terminal_lock",
    {"terminal_lock_read": ANY_READ},
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
