"""The handle's keyword call of every control op: its request, built from the keyword
arguments, handed to the one generic ``call`` (generated; do not edit)."""

# Written by ``python -m tools.gen_declared`` from supervisor/operations/control.py;
# tests/unit/test_declared_current.py fails when this is not what it writes.

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from supervisor.handle.declared.base import Calls
from supervisor.operations.requests import request
from supervisor.policy.control.permissions import Profile

__all__ = ["ControlCalls"]


class ControlCalls(Calls):
    """The control ops."""

    async def upsert_session(
        self,
        profile: Profile | None,
        session_id: str,
        *,
        role: str | None = None,
        namespace: str | None = None,
        worker_identity: str | None = None,
        pid: int | None = None,
        status: str | None = None,
    ) -> Mapping[str, Any]:
        """``session_upsert``, as declared in ``supervisor.operations``."""
        answer: Mapping[str, Any] = await self.call(
            profile,
            request(
                "session_upsert",
                session_id=session_id,
                role=role,
                namespace=namespace,
                worker_identity=worker_identity,
                pid=pid,
                status=status,
            ),
        )
        return answer

    async def allocate_next_work(
        self,
        profile: Profile | None,
        remote: str,
        *,
        org: str,
        repo: str,
        session_id: str,
        candidates: Sequence[Any],
        role: str | None = None,
        apply: bool = False,
        lease_ttl_seconds: float | None = None,
        owner_pid: int | None = None,
    ) -> Mapping[str, Any]:
        """``allocate``, as declared in ``supervisor.operations``."""
        answer: Mapping[str, Any] = await self.call(
            profile,
            request(
                "allocate",
                remote=remote,
                org=org,
                repo=repo,
                session_id=session_id,
                candidates=candidates,
                role=role,
                apply=apply,
                lease_ttl_seconds=lease_ttl_seconds,
                owner_pid=owner_pid,
            ),
        )
        return answer

    async def assign_and_lease(
        self,
        profile: Profile | None,
        remote: str,
        *,
        org: str,
        repo: str,
        kind: str,
        number: int,
        session_id: str,
        role: str,
        expected_head_sha: str | None = None,
        allowed_actions: Sequence[str] | None = None,
        forbidden_actions: Sequence[str] | None = None,
        phase: str | None = None,
        lease_ttl_seconds: float | None = None,
        owner_pid: int | None = None,
    ) -> Mapping[str, Any]:
        """``assign``, as declared in ``supervisor.operations``."""
        answer: Mapping[str, Any] = await self.call(
            profile,
            request(
                "assign",
                remote=remote,
                org=org,
                repo=repo,
                kind=kind,
                number=number,
                session_id=session_id,
                role=role,
                expected_head_sha=expected_head_sha,
                allowed_actions=allowed_actions,
                forbidden_actions=forbidden_actions,
                phase=phase,
                lease_ttl_seconds=lease_ttl_seconds,
                owner_pid=owner_pid,
            ),
        )
        return answer

    async def heartbeat_lease(
        self,
        profile: Profile | None,
        session_id: str,
        *,
        lease_id: str,
        lease_ttl_seconds: float | None = None,
    ) -> Mapping[str, Any]:
        """``lease_heartbeat``, as declared in ``supervisor.operations``."""
        answer: Mapping[str, Any] = await self.call(
            profile,
            request(
                "lease_heartbeat",
                session_id=session_id,
                lease_id=lease_id,
                lease_ttl_seconds=lease_ttl_seconds,
            ),
        )
        return answer

    async def release_lease(
        self,
        profile: Profile | None,
        session_id: str,
        *,
        lease_id: str,
    ) -> Mapping[str, Any]:
        """``lease_release``, as declared in ``supervisor.operations``."""
        answer: Mapping[str, Any] = await self.call(
            profile,
            request(
                "lease_release",
                session_id=session_id,
                lease_id=lease_id,
            ),
        )
        return answer

    async def require_valid_assignment(
        self,
        profile: Profile | None,
        remote: str,
        *,
        org: str,
        repo: str,
        kind: str,
        number: int,
        session_id: str,
        action: str,
    ) -> Mapping[str, Any]:
        """``assignment_check``, as declared in ``supervisor.operations``."""
        answer: Mapping[str, Any] = await self.call(
            profile,
            request(
                "assignment_check",
                remote=remote,
                org=org,
                repo=repo,
                kind=kind,
                number=number,
                session_id=session_id,
                action=action,
            ),
        )
        return answer

    async def upsert_work_item(
        self,
        profile: Profile | None,
        remote: str,
        *,
        org: str,
        repo: str,
        kind: str,
        number: int,
        state: str | None = None,
        current_head_sha: str | None = None,
        title: str | None = None,
        priority: int | None = None,
    ) -> Mapping[str, Any]:
        """``work_item_upsert``, as declared in ``supervisor.operations``."""
        answer: Mapping[str, Any] = await self.call(
            profile,
            request(
                "work_item_upsert",
                remote=remote,
                org=org,
                repo=repo,
                kind=kind,
                number=number,
                state=state,
                current_head_sha=current_head_sha,
                title=title,
                priority=priority,
            ),
        )
        return answer

    async def set_terminal_lock(
        self,
        profile: Profile | None,
        remote: str,
        *,
        org: str,
        repo: str,
        terminal_pr: int | None,
        review_id: str | None = None,
        decision: str | None = None,
    ) -> Mapping[str, Any]:
        """``terminal_lock_set``, as declared in ``supervisor.operations``."""
        answer: Mapping[str, Any] = await self.call(
            profile,
            request(
                "terminal_lock_set",
                remote=remote,
                org=org,
                repo=repo,
                terminal_pr=terminal_pr,
                review_id=review_id,
                decision=decision,
            ),
        )
        return answer

    async def get_terminal_lock(
        self,
        profile: Profile | None,
        remote: str,
        *,
        org: str,
        repo: str,
    ) -> Mapping[str, Any]:
        """``terminal_lock_get``, as declared in ``supervisor.operations``."""
        answer: Mapping[str, Any] = await self.call(
            profile,
            request(
                "terminal_lock_get",
                remote=remote,
                org=org,
                repo=repo,
            ),
        )
        return answer
