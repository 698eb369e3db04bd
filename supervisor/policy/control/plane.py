"""Control-plane vocabulary: work kinds and states, work references, role actions, lease TTLs."""

from __future__ import annotations

import math
import re
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass

from supervisor.policy.identity.worker_env import NAMESPACES

__all__ = [
    "DEFAULT_LEASE_TTL_SECONDS",
    "MAX_LEASE_TTL_SECONDS",
    "ROLES",
    "ROLE_ACTIONS",
    "STATE_CLOSED",
    "STATE_MERGED",
    "STATE_OPEN",
    "TERMINAL_STATES",
    "WORK_KINDS",
    "WORK_STATES",
    "ControlPlaneRefusal",
    "WorkRef",
    "actions_arg",
    "check_actions",
    "check_head_sha",
    "check_kind",
    "check_name",
    "check_repository",
    "check_role",
    "check_session_id",
    "check_state",
    "check_ttl",
    "optional_text",
    "pid_arg",
    "role_actions",
    "ttl_arg",
    "work_ref",
]

#: The only assignable kinds. A monitoring incident becomes work only after
#: someone files it as an ordinary issue; it is never a work item of its own.
WORK_KINDS: frozenset[str] = frozenset({"issue", "pr"})

STATE_OPEN = "open"
STATE_CLOSED = "closed"
STATE_MERGED = "merged"
WORK_STATES: tuple[str, ...] = (STATE_OPEN, STATE_CLOSED, STATE_MERGED)
#: Nothing may be assigned on, or mutated for, an item in one of these states.
TERMINAL_STATES: frozenset[str] = frozenset({STATE_CLOSED, STATE_MERGED})

ROLES: tuple[str, ...] = NAMESPACES

DEFAULT_LEASE_TTL_SECONDS = 900.0
#: A lease is a promise that someone is working now; a day is already generous.
MAX_LEASE_TTL_SECONDS = 86_400.0

# Gitea owner and repository names (and our remote names) use these characters
# only. Refusing the rest keeps the work-item key unambiguous: no part can
# contain the separators the key is built with.
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}\Z")
_ACTION = re.compile(r"[a-z][a-z0-9_]{0,63}\Z")
_TOKEN = re.compile(r"[\x21-\x7e]{1,200}\Z")
_SHA = re.compile(r"[0-9A-Za-z._-]{1,128}\Z")
#: The longest free-text argument (a phase, a title, a namespace).
_MAX_TEXT = 200

#: Per role: what an assignment lets the holder do, and what it explicitly never does.
ROLE_ACTIONS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "author": (
        ("implement", "comment", "push", "create_pr"),
        ("approve", "merge", "request_changes"),
    ),
    "reviewer": (
        ("review", "comment", "approve", "request_changes"),
        ("merge", "push", "create_pr"),
    ),
    "merger": (
        ("merge", "comment"),
        ("approve", "request_changes", "push", "create_pr"),
    ),
    "reconciler": (
        ("diagnose", "comment", "cleanup"),
        ("approve", "merge", "push", "create_pr"),
    ),
    "controller": (
        ("diagnose", "comment", "allocate"),
        ("approve", "merge", "push", "create_pr"),
    ),
}


class ControlPlaneRefusal(ValueError):
    """A request the control plane will not act on; ``code`` is machine-readable."""

    def __init__(self, code: str, detail: str) -> None:
        super().__init__(detail)
        self.code = code
        self.detail = detail


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkRef:
    """One issue or pull request of one repository on one Gitea remote."""

    remote: str
    org: str
    repo: str
    kind: str
    number: int

    @property
    def key(self) -> str:
        """The stored key: ``pr:remote/org/repo#12``; unambiguous because names are checked."""
        return f"{self.kind}:{self.remote}/{self.org}/{self.repo}#{self.number}"

    @property
    def label(self) -> str:
        return f"{self.kind}#{self.number}"


def check_kind(kind: object) -> str:
    """``issue`` or ``pr`` (case and surrounding space ignored); anything else is refused."""
    text = kind.strip().lower() if isinstance(kind, str) else ""
    if text not in WORK_KINDS:
        raise ControlPlaneRefusal(
            "invalid_work_kind",
            f"work kind {str(kind)[:64]!r} is not assignable; only {sorted(WORK_KINDS)} are "
            "(a monitoring incident must first be filed as an issue)",
        )
    return text


def _one_of(value: object, allowed: Collection[str], code: str, what: str, shown: object) -> str:
    """``value`` folded to lower case when it is one of ``allowed``; refused (``code``) if not."""
    text = value.strip().lower() if isinstance(value, str) else ""
    if text not in allowed:
        raise ControlPlaneRefusal(code, f"{what} {str(value)[:64]!r} is not one of {shown}")
    return text


def check_state(state: object) -> str:
    return _one_of(state, WORK_STATES, "invalid_work_state", "work state", WORK_STATES)


def _name(value: object, what: str) -> str:
    if not isinstance(value, str) or not _NAME.match(value):
        raise ControlPlaneRefusal(
            "invalid_work_ref",
            f"{what} {str(value)[:64]!r} must be 1-128 letters, digits, '.', '_' or '-'",
        )
    return value


def check_name(value: object, what: str) -> str:
    """A Gitea owner, repository or remote name under the work-reference rules."""
    return _name(value, what)


def _number(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value < 2**31:
        raise ControlPlaneRefusal("invalid_work_ref", f"number {value!r} must be a positive int")
    return value


def work_ref(remote: object, org: object, repo: object, kind: object, number: object) -> WorkRef:
    """A validated reference; the kind is checked first so an incident is named as such."""
    checked_kind = check_kind(kind)
    return WorkRef(
        remote=_name(remote, "remote"),
        org=_name(org, "org"),
        repo=_name(repo, "repo"),
        kind=checked_kind,
        number=_number(number),
    )


def check_repository(remote: object, org: object, repo: object) -> tuple[str, str, str]:
    """A (remote, org, repo) triple with the same name rules as a work reference."""
    return _name(remote, "remote"), _name(org, "org"), _name(repo, "repo")


def check_session_id(value: object) -> str:
    if not isinstance(value, str) or not _TOKEN.match(value):
        raise ControlPlaneRefusal(
            "invalid_session", "session_id must be 1-200 printable characters without spaces"
        )
    return value


def check_role(value: object) -> str:
    return _one_of(value, ROLES, "role_ineligible", "role", list(ROLES))


def check_head_sha(value: object) -> str | None:
    """A commit id as given (None and blank mean "no pin")."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if not isinstance(value, str) or not _SHA.match(value.strip()):
        raise ControlPlaneRefusal("invalid_head_sha", f"head sha {str(value)[:64]!r} is malformed")
    return value.strip()


def check_actions(actions: Iterable[object], what: str) -> tuple[str, ...]:
    """Lower-case action names, de-duplicated in order."""
    seen: dict[str, None] = {}
    for action in actions:
        if not isinstance(action, str) or not _ACTION.match(action):
            raise ControlPlaneRefusal(
                "invalid_action", f"{what} entry {str(action)[:64]!r} is not an action name"
            )
        seen[action] = None
    return tuple(seen)


def role_actions(role: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The default (allowed, forbidden) actions of a role's assignment."""
    return ROLE_ACTIONS[check_role(role)]


def check_ttl(value: object, *, default: float, maximum: float) -> float:
    """A lease TTL in seconds: positive, finite, at most ``maximum``; None means ``default``."""
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ControlPlaneRefusal("invalid_ttl", "lease_ttl_seconds must be a number")
    # Compared before float(): a 400-digit integer would overflow the conversion.
    in_range = 0 < value <= maximum
    if not in_range or not math.isfinite(float(value)):
        raise ControlPlaneRefusal(
            "invalid_ttl", f"lease_ttl_seconds must be > 0 and <= {maximum:g}, got {value!r:.40}"
        )
    return float(value)


# The arguments a control op may leave out: None stays None (the writer's default).


def optional_text(value: object, what: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not 0 < len(value.strip()) <= _MAX_TEXT:
        raise ControlPlaneRefusal("invalid_argument", f"{what} must be 1-{_MAX_TEXT} characters")
    return value.strip()


def pid_arg(value: object) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value < 2**31:
        raise ControlPlaneRefusal("invalid_argument", "pid must be a positive integer")
    return value


def ttl_arg(value: object) -> float | None:
    """None (the writer's default) or a TTL within the hard bound; the writer applies its own."""
    if value is None:
        return None
    return check_ttl(value, default=0.0, maximum=MAX_LEASE_TTL_SECONDS)


def actions_arg(value: Sequence[object] | None, what: str) -> tuple[str, ...] | None:
    return None if value is None else check_actions(value, what)
