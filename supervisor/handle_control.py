"""Control-plane calls of the handle: validate, authorize, send one writer message, answer."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from anyio.streams.memory import MemoryObjectSendStream

from actors.mailbox import Reply, ask
from actors.messages import (
    AllocateWork,
    AssignAndLease,
    CheckAssignment,
    GetTerminalLock,
    HeartbeatLease,
    ReleaseLease,
    SetTerminalLock,
    UpsertSession,
    UpsertWorkItem,
    WriteAck,
    WriterInbox,
)
from supervisor.policy.allocation import OUTCOME_ROLE_INELIGIBLE, candidates_from_mappings
from supervisor.policy.control_plane import (
    MAX_LEASE_TTL_SECONDS,
    ControlPlaneRefusal,
    check_actions,
    check_head_sha,
    check_repository,
    check_role,
    check_session_id,
    check_state,
    check_ttl,
    work_ref,
)
from supervisor.policy.permissions import Profile, decide
from supervisor.policy.reasons import OUTCOME_REFUSED
from supervisor.policy.render import decision_dict

__all__ = ["ControlPlaneCalls", "control_answer"]

_MAX_TEXT = 200


def _refused(reason: str, **extra: Any) -> dict[str, Any]:
    return {
        "success": False,
        "outcome": OUTCOME_REFUSED,
        "mutation_performed": False,
        "reasons": [reason],
        **extra,
    }


def control_answer(ack: WriteAck) -> dict[str, Any]:
    """The writer's ack as the dict every surface returns (success, outcome, reasons)."""
    data = dict(ack.data)
    if ack.ok:
        data.setdefault("success", True)
        if ack.code != "ok":
            data.setdefault("code", ack.code)
        return data
    data["success"] = False
    data.setdefault("outcome", OUTCOME_REFUSED)
    data.setdefault("code", ack.code)
    data.setdefault("reasons", [ack.detail] if ack.detail else [])
    data.setdefault("mutation_performed", False)
    return data


def _optional_text(value: object, what: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not 0 < len(value.strip()) <= _MAX_TEXT:
        raise ControlPlaneRefusal("invalid_argument", f"{what} must be 1-{_MAX_TEXT} characters")
    return value.strip()


def _pid(value: object) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value < 2**31:
        raise ControlPlaneRefusal("invalid_argument", "pid must be a positive integer")
    return value


def _ttl(value: object) -> float | None:
    """None (the writer's default) or a TTL within the hard bound; the writer applies its own."""
    if value is None:
        return None
    return check_ttl(value, default=0.0, maximum=MAX_LEASE_TTL_SECONDS)


def _actions(value: Sequence[object] | None, what: str) -> tuple[str, ...] | None:
    return None if value is None else check_actions(value, what)


class ControlPlaneCalls:
    """Mixed into SupervisorHandle. Each call checks its input with the policy's validators
    and the caller's grant with ``permissions.decide``, then sends one message to the
    writer; nothing is sent for a refused call."""

    _writer: MemoryObjectSendStream[WriterInbox]

    async def _send(self, build: Callable[[Reply[WriteAck]], WriterInbox]) -> dict[str, Any]:
        ack: WriteAck = await ask(self._writer, build, actor="registry_writer")
        return control_answer(ack)

    @staticmethod
    def _deny(profile: Profile | None, task: str) -> dict[str, Any] | None:
        decision = decide(profile, task)
        if decision.allowed:
            return None
        return _refused(
            f"{task} refused: {decision.reason}", permission=decision_dict(decision), denied=True
        )

    async def upsert_session(
        self,
        profile: Profile | None,
        *,
        session_id: str,
        role: str | None = None,
        namespace: str | None = None,
        worker_identity: str | None = None,
        pid: int | None = None,
        status: str = "active",
    ) -> Mapping[str, Any]:
        if (denied := self._deny(profile, "session_upsert")) is not None:
            return denied
        try:
            sid = check_session_id(session_id)
            checked_role = check_role(role) if role is not None else None
            checked_pid = _pid(pid)
            ns = _optional_text(namespace, "namespace")
            worker = _optional_text(worker_identity, "worker_identity")
            if status not in ("active", "ended"):
                raise ControlPlaneRefusal("invalid_argument", "status must be active or ended")
        except ControlPlaneRefusal as exc:
            return _refused(exc.detail, code=exc.code)
        return await self._send(
            lambda reply: UpsertSession(
                session_id=sid,
                role=checked_role,
                profile=profile.name if profile else None,
                namespace=ns,
                worker_identity=worker,
                pid=checked_pid,
                status=status,
                reply=reply,
            )
        )

    async def upsert_work_item(
        self,
        profile: Profile | None,
        *,
        remote: str,
        org: str,
        repo: str,
        kind: str,
        number: int,
        state: str | None = None,
        current_head_sha: str | None = None,
        title: str | None = None,
        priority: int | None = None,
    ) -> Mapping[str, Any]:
        if (denied := self._deny(profile, "work_item_upsert")) is not None:
            return denied
        try:
            ref = work_ref(remote, org, repo, kind, number)
            checked_state = check_state(state) if state is not None else None
            head = check_head_sha(current_head_sha)
            checked_title = _optional_text(title, "title")
            if priority is not None and (
                isinstance(priority, bool) or not isinstance(priority, int) or abs(priority) > 2**30
            ):
                raise ControlPlaneRefusal("invalid_argument", "priority must be an integer")
        except ControlPlaneRefusal as exc:
            return _refused(exc.detail, code=exc.code)
        return await self._send(
            lambda reply: UpsertWorkItem(
                ref=ref,
                state=checked_state,
                current_head_sha=head,
                title=checked_title,
                priority=priority,
                reply=reply,
            )
        )

    async def assign_and_lease(
        self,
        profile: Profile | None,
        *,
        session_id: str,
        role: str,
        remote: str,
        org: str,
        repo: str,
        kind: str,
        number: int,
        expected_head_sha: str | None = None,
        allowed_actions: Sequence[str] | None = None,
        forbidden_actions: Sequence[str] | None = None,
        phase: str = "assigned",
        lease_ttl_seconds: float | None = None,
        owner_pid: int | None = None,
    ) -> Mapping[str, Any]:
        if (denied := self._deny(profile, "lease_assign")) is not None:
            return denied
        try:
            # The kind first, so an incident is refused as such before anything else.
            ref = work_ref(remote, org, repo, kind, number)
            sid, checked_role = check_session_id(session_id), check_role(role)
            head = check_head_sha(expected_head_sha)
            allowed = _actions(allowed_actions, "allowed_actions")
            forbidden = _actions(forbidden_actions, "forbidden_actions")
            checked_phase = _optional_text(phase, "phase") or "assigned"
            pid, ttl = _pid(owner_pid), _ttl(lease_ttl_seconds)
        except ControlPlaneRefusal as exc:
            return _refused(exc.detail, code=exc.code)
        return await self._send(
            lambda reply: AssignAndLease(
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
        )

    async def require_valid_assignment(
        self,
        profile: Profile | None,
        *,
        session_id: str,
        remote: str,
        org: str,
        repo: str,
        kind: str,
        number: int,
        action: str,
    ) -> Mapping[str, Any]:
        """The mutation gate: ``success`` only for a live lease covering ``action`` now."""
        if (denied := self._deny(profile, "assignment_check")) is not None:
            return denied
        try:
            ref = work_ref(remote, org, repo, kind, number)
            sid = check_session_id(session_id)
            [checked_action] = check_actions([action], "action")
        except ControlPlaneRefusal as exc:
            return _refused(exc.detail, code=exc.code, allowed=False)
        return await self._send(
            lambda reply: CheckAssignment(
                session_id=sid, ref=ref, action=checked_action, reply=reply
            )
        )

    async def heartbeat_lease(
        self,
        profile: Profile | None,
        *,
        session_id: str,
        lease_id: str,
        lease_ttl_seconds: float | None = None,
    ) -> Mapping[str, Any]:
        if (denied := self._deny(profile, "lease_heartbeat")) is not None:
            return denied
        try:
            sid, lid = check_session_id(session_id), check_session_id(lease_id)
            ttl = _ttl(lease_ttl_seconds)
        except ControlPlaneRefusal as exc:
            return _refused(exc.detail, code=exc.code)
        return await self._send(
            lambda reply: HeartbeatLease(session_id=sid, lease_id=lid, ttl_seconds=ttl, reply=reply)
        )

    async def release_lease(
        self, profile: Profile | None, *, session_id: str, lease_id: str
    ) -> Mapping[str, Any]:
        if (denied := self._deny(profile, "lease_release")) is not None:
            return denied
        try:
            sid, lid = check_session_id(session_id), check_session_id(lease_id)
        except ControlPlaneRefusal as exc:
            return _refused(exc.detail, code=exc.code)
        return await self._send(
            lambda reply: ReleaseLease(session_id=sid, lease_id=lid, reply=reply)
        )

    async def set_terminal_lock(
        self,
        profile: Profile | None,
        *,
        remote: str,
        org: str,
        repo: str,
        terminal_pr: int | None,
        review_id: str | None = None,
        decision: str | None = None,
    ) -> Mapping[str, Any]:
        """Make ``terminal_pr`` the repository's terminal-review lock; None clears it."""
        if (denied := self._deny(profile, "terminal_lock_set")) is not None:
            return denied
        try:
            where = check_repository(remote, org, repo)
            if terminal_pr is not None:
                work_ref(*where, "pr", terminal_pr)
            review = _optional_text(review_id, "review_id")
            verdict = _optional_text(decision, "decision")
        except ControlPlaneRefusal as exc:
            return _refused(exc.detail, code=exc.code)
        return await self._send(
            lambda reply: SetTerminalLock(
                remote=where[0],
                org=where[1],
                repo=where[2],
                terminal_pr=terminal_pr,
                review_id=review,
                decision=verdict,
                set_by=profile.name if profile else None,
                reply=reply,
            )
        )

    async def get_terminal_lock(
        self, profile: Profile | None, *, remote: str, org: str, repo: str
    ) -> Mapping[str, Any]:
        if (denied := self._deny(profile, "terminal_lock_read")) is not None:
            return denied
        try:
            where = check_repository(remote, org, repo)
        except ControlPlaneRefusal as exc:
            return _refused(exc.detail, code=exc.code)
        return await self._send(
            lambda reply: GetTerminalLock(remote=where[0], org=where[1], repo=where[2], reply=reply)
        )

    async def allocate_next_work(
        self,
        profile: Profile | None,
        *,
        session_id: str,
        remote: str,
        org: str,
        repo: str,
        candidates: Sequence[Mapping[str, Any]],
        role: str | None = None,
        apply: bool = False,
        lease_ttl_seconds: float | None = None,
        owner_pid: int | None = None,
    ) -> Mapping[str, Any]:
        """The next item for the caller's role: a preview, or with ``apply`` a leased assignment.

        The role is the caller's profile role; asking for another is ``role_ineligible``,
        so an author profile can never be handed a merge.
        """
        task = "allocate_apply" if apply else "allocate_preview"
        if (denied := self._deny(profile, task)) is not None:
            return denied
        assert profile is not None  # decide() refuses a missing profile
        try:
            wanted = check_role(role if role is not None else profile.role_kind)
        except ControlPlaneRefusal as exc:
            return _ineligible(exc.detail, role)
        if wanted != profile.role_kind:
            return _ineligible(
                f"profile {profile.name!r} has role {profile.role_kind!r}; it cannot take "
                f"{wanted!r} work",
                role,
            )
        try:
            sid = check_session_id(session_id)
            where = check_repository(remote, org, repo)
            parsed = candidates_from_mappings(list(candidates))
            pid = _pid(owner_pid)
            ttl = _ttl(lease_ttl_seconds)
        except ControlPlaneRefusal as exc:
            return _refused(exc.detail, code=exc.code, apply=apply)
        return await self._send(
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
            )
        )


def _ineligible(reason: str, role: object) -> dict[str, Any]:
    return {
        "success": False,
        "outcome": OUTCOME_ROLE_INELIGIBLE,
        "mutation_performed": False,
        "role": role,
        "reasons": [reason],
        "selected": None,
        "skipped": [],
        "assignment": None,
    }
