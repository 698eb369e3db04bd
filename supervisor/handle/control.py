"""Control-plane calls of the handle: validate, authorize, send one writer message, answer."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Unpack

from actors.writer.control.inbox import (
    AllocateWork,
    AssignAndLease,
    CheckAssignment,
    GetTerminalLock,
    HeartbeatLease,
    ReleaseLease,
    SetTerminalLock,
    UpsertSession,
    UpsertWorkItem,
)
from supervisor.handle.checks import (
    RepositoryArgs,
    WorkItemArgs,
    WriterMessage,
    actions_arg,
    ineligible,
    optional_text,
    pid_arg,
    ttl_arg,
    writer_call,
)
from supervisor.handle.links import HealthLinkCalls
from supervisor.policy.control.candidates import candidates_from_mappings
from supervisor.policy.control.permissions import Profile
from supervisor.policy.control.plane import (
    ControlPlaneRefusal,
    check_actions,
    check_head_sha,
    check_repository,
    check_role,
    check_session_id,
    check_state,
    work_ref,
)
from supervisor.policy.refusal import refused

__all__ = ["ControlPlaneCalls"]


class ControlPlaneCalls(HealthLinkCalls):
    """Mixed into SupervisorHandle. Each call is written as its argument check: it validates
    its input with the policy's validators and returns the message for the writer, and
    ``writer_call`` makes it the async call that checks the caller's grant first and then
    sends that message; nothing is sent for a refused call. Namespace health and incident
    link calls come from ``HealthLinkCalls``."""

    @writer_call("session_upsert")
    def upsert_session(
        self,
        profile: Profile | None,
        *,
        session_id: str,
        role: str | None = None,
        namespace: str | None = None,
        worker_identity: str | None = None,
        pid: int | None = None,
        status: str = "active",
    ) -> WriterMessage:
        sid = check_session_id(session_id)
        checked_role = check_role(role) if role is not None else None
        checked_pid = pid_arg(pid)
        ns = optional_text(namespace, "namespace")
        worker = optional_text(worker_identity, "worker_identity")
        if status not in ("active", "ended"):
            raise ControlPlaneRefusal("invalid_argument", "status must be active or ended")
        return lambda reply: UpsertSession(
            session_id=sid,
            role=checked_role,
            profile=profile.name if profile else None,
            namespace=ns,
            worker_identity=worker,
            pid=checked_pid,
            status=status,
            reply=reply,
        )

    @writer_call("work_item_upsert")
    def upsert_work_item(
        self,
        profile: Profile | None,
        *,
        state: str | None = None,
        current_head_sha: str | None = None,
        title: str | None = None,
        priority: int | None = None,
        **item: Unpack[WorkItemArgs],
    ) -> WriterMessage:
        ref = work_ref(**item)
        checked_state = check_state(state) if state is not None else None
        head = check_head_sha(current_head_sha)
        checked_title = optional_text(title, "title")
        if priority is not None and (
            isinstance(priority, bool) or not isinstance(priority, int) or abs(priority) > 2**30
        ):
            raise ControlPlaneRefusal("invalid_argument", "priority must be an integer")
        return lambda reply: UpsertWorkItem(
            ref=ref,
            state=checked_state,
            current_head_sha=head,
            title=checked_title,
            priority=priority,
            reply=reply,
        )

    @writer_call("assign")
    def assign_and_lease(
        self,
        profile: Profile | None,
        *,
        session_id: str,
        role: str,
        expected_head_sha: str | None = None,
        allowed_actions: Sequence[str] | None = None,
        forbidden_actions: Sequence[str] | None = None,
        phase: str = "assigned",
        lease_ttl_seconds: float | None = None,
        owner_pid: int | None = None,
        **item: Unpack[WorkItemArgs],
    ) -> WriterMessage:
        # The kind first, so an incident is refused as such before anything else.
        ref = work_ref(**item)
        sid, checked_role = check_session_id(session_id), check_role(role)
        head = check_head_sha(expected_head_sha)
        allowed = actions_arg(allowed_actions, "allowed_actions")
        forbidden = actions_arg(forbidden_actions, "forbidden_actions")
        checked_phase = optional_text(phase, "phase") or "assigned"
        pid, ttl = pid_arg(owner_pid), ttl_arg(lease_ttl_seconds)
        return lambda reply: AssignAndLease(
            session_id=sid,
            role=checked_role,
            ref=ref,
            expected_head_sha=head,
            allowed_actions=allowed,
            forbidden_actions=forbidden,
            phase=checked_phase,
            ttl_seconds=ttl,
            owner_pid=pid,
            profile=profile.name if profile else None,
            reply=reply,
        )

    @writer_call("assignment_check", allowed=False)
    def require_valid_assignment(
        self,
        profile: Profile | None,
        *,
        session_id: str,
        action: str,
        **item: Unpack[WorkItemArgs],
    ) -> WriterMessage:
        """The mutation gate: ``success`` only for a live lease covering ``action`` now."""
        ref = work_ref(**item)
        sid = check_session_id(session_id)
        [checked_action] = check_actions([action], "action")
        return lambda reply: CheckAssignment(
            session_id=sid, ref=ref, action=checked_action, reply=reply
        )

    @writer_call("lease_heartbeat")
    def heartbeat_lease(
        self,
        profile: Profile | None,
        *,
        session_id: str,
        lease_id: str,
        lease_ttl_seconds: float | None = None,
    ) -> WriterMessage:
        sid, lid = check_session_id(session_id), check_session_id(lease_id)
        ttl = ttl_arg(lease_ttl_seconds)
        return lambda reply: HeartbeatLease(
            session_id=sid, lease_id=lid, ttl_seconds=ttl, reply=reply
        )

    @writer_call("lease_release")
    def release_lease(
        self, profile: Profile | None, *, session_id: str, lease_id: str
    ) -> WriterMessage:
        sid, lid = check_session_id(session_id), check_session_id(lease_id)
        return lambda reply: ReleaseLease(session_id=sid, lease_id=lid, reply=reply)

    @writer_call("terminal_lock_set")
    def set_terminal_lock(
        self,
        profile: Profile | None,
        *,
        terminal_pr: int | None,
        review_id: str | None = None,
        decision: str | None = None,
        **repository: Unpack[RepositoryArgs],
    ) -> WriterMessage:
        """Make ``terminal_pr`` the repository's terminal-review lock; None clears it."""
        where = check_repository(**repository)
        if terminal_pr is not None:
            work_ref(*where, "pr", terminal_pr)
        review = optional_text(review_id, "review_id")
        verdict = optional_text(decision, "decision")
        return lambda reply: SetTerminalLock(
            remote=where[0],
            org=where[1],
            repo=where[2],
            terminal_pr=terminal_pr,
            review_id=review,
            decision=verdict,
            set_by=profile.name if profile else None,
            reply=reply,
        )

    @writer_call("terminal_lock_get")
    def get_terminal_lock(
        self, profile: Profile | None, **repository: Unpack[RepositoryArgs]
    ) -> WriterMessage:
        where = check_repository(**repository)
        return lambda reply: GetTerminalLock(
            remote=where[0], org=where[1], repo=where[2], reply=reply
        )

    async def allocate_next_work(
        self,
        profile: Profile | None,
        *,
        session_id: str,
        candidates: Sequence[Mapping[str, Any]],
        role: str | None = None,
        apply: bool = False,
        lease_ttl_seconds: float | None = None,
        owner_pid: int | None = None,
        **repository: Unpack[RepositoryArgs],
    ) -> Mapping[str, Any]:
        """The next item for the caller's role: a preview, or with ``apply`` a leased assignment.

        The role is the caller's profile role; asking for another is ``role_ineligible``,
        so an author profile can never be handed a merge.
        """
        task = "allocate_apply" if apply else "allocate_preview"
        if (denied := await self.deny(profile, "allocate", task=task)) is not None:
            return denied
        assert profile is not None  # grant() refuses a missing profile
        try:
            wanted = check_role(role if role is not None else profile.role_kind)
        except ControlPlaneRefusal as exc:
            return await self._refuse(profile, "allocate", ineligible(exc.detail, role))
        if wanted != profile.role_kind:
            reason = (
                f"profile {profile.name!r} has role {profile.role_kind!r}; it cannot take "
                f"{wanted!r} work"
            )
            return await self._refuse(profile, "allocate", ineligible(reason, role))
        try:
            sid = check_session_id(session_id)
            where = check_repository(**repository)
            parsed = candidates_from_mappings(list(candidates))
            pid = pid_arg(owner_pid)
            ttl = ttl_arg(lease_ttl_seconds)
        except ControlPlaneRefusal as exc:
            refusal = refused(exc.code, exc.detail, apply=apply)
            return await self._refuse(profile, "allocate", refusal)
        return await self._send(
            profile,
            "allocate",
            lambda reply: AllocateWork(
                session_id=sid,
                role=wanted,
                remote=where[0],
                org=where[1],
                repo=where[2],
                candidates=parsed,
                apply=apply,
                ttl_seconds=ttl,
                owner_pid=pid,
                profile=profile.name,
                reply=reply,
            ),
        )
