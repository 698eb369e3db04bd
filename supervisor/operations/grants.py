"""The one place grants are decided: ``grant`` at entry, ``regrant`` just before a mutation."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, Protocol

from supervisor.operations.registry import OPERATIONS, decide
from supervisor.policy.control.permissions import Decision, Profile
from supervisor.policy.refusal import refused
from supervisor.policy.render import decision_dict
from supervisor.wire import PERMISSION_DENIED

__all__ = [
    "Denial",
    "ProfileLookup",
    "grant",
    "regrant",
    "regrant_later",
]


class ProfileLookup(Protocol):
    """Re-reads a profile's grants from their source of truth on every call."""

    def get(self, name: str) -> Profile | None: ...


@dataclass(frozen=True, slots=True)
class Denial:
    """A refused grant: the op refused (the audit's action), its task and what was missing."""

    op: str
    decision: Decision

    @property
    def task(self) -> str:
        return self.decision.task

    @property
    def reason(self) -> str:
        """The refusal's one line, the same on every surface: ``<task> refused: <why>``."""
        return f"{self.task} refused: {self.decision.reason}"

    def refusal(self, **extra: Any) -> dict[str, Any]:
        """The structured refusal every answer of a denied call carries (plus ``extra``)."""
        return refused(
            PERMISSION_DENIED,
            self.reason,
            permission=decision_dict(self.decision),
            denied=True,
            **extra,
        )


def _task(op: str, task: str | None) -> str:
    if task is not None:
        return task
    # Most ops declare one task; an op that declares two names the one it asks about.
    (only,) = OPERATIONS[op].tasks
    return only


def grant(profile: Profile | None, op: str, *, task: str | None = None) -> Denial | None:
    """None when ``profile`` may run ``op`` (its declared task, or ``task`` of it), else the
    denial. Every surface asks this at entry: the socket, both MCP surfaces, the CLI through
    the socket, the page, ``status`` and the supervisor's own automatic rounds."""
    decision = decide(profile, _task(op, task))
    return None if decision.allowed else Denial(op, decision)


def regrant(
    profiles: ProfileLookup, profile_name: str | None, op: str, *, task: str | None = None
) -> str | None:
    """Why the grant of ``op`` (its ``task``, as for ``grant``), resolved again now by the
    profile's name from its source of truth, no longer allows it; None when it still does.
    Run immediately before a mutation (inside the writer's transaction for registry and
    control-plane rows, before the first signal for a reap), so a grant revoked after entry
    (between plan and apply, or while the write waited for the writer) refuses it."""
    current = profiles.get(profile_name) if profile_name else None
    denial = grant(current, op, task=task)
    return None if denial is None else denial.decision.reason


def _rechecked(
    profiles: ProfileLookup, profile_name: str | None, op: str, task: str | None
) -> str | None:
    denied = regrant(profiles, profile_name, op, task=task)
    return None if denied is None else f"grant re-checked immediately before mutation: {denied}"


def regrant_later(
    profiles: ProfileLookup, profile_name: str | None, op: str, *, task: str | None = None
) -> Callable[[], str | None]:
    """``regrant`` of these arguments, to be run by the writer just before the mutation: the
    refusal's one line (the same for a retirement, a host or a control-plane write), or
    None when the grant still holds."""
    return partial(_rechecked, profiles, profile_name, op, task)
