"""allocate_next_work: the request checked for the caller's role, then, in the writer, routed
on fresh rows and reserved in the same transaction."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from actors.control.assign import assign_in
from actors.control.context import ControlContext
from actors.control.inbox import AssignTerms, ItemFacts, RepoScope
from actors.control.steps import ensure_session, put_item
from actors.replies import WriteAck
from supervisor.operations.declared import AllocateRequest
from supervisor.policy.canonical import canon
from supervisor.policy.control.allocation import (
    OUTCOME_ASSIGNED,
    OUTCOME_NO_SAFE,
    OUTCOME_PREVIEW,
    OUTCOME_ROLE_INELIGIBLE,
    OUTCOME_WAIT,
    Candidate,
    route,
)
from supervisor.policy.control.candidates import candidates_from_mappings
from supervisor.policy.control.decisions import split_due
from supervisor.policy.control.permissions import Profile
from supervisor.policy.control.plane import (
    TERMINAL_STATES,
    ControlPlaneRefusal,
    check_repository,
    check_role,
    check_session_id,
    pid_arg,
    ttl_arg,
    work_ref,
)
from supervisor.policy.control.render import (
    ASSIGN_OUTCOME_ASSIGNED,
    ASSIGN_OUTCOME_WAIT,
    allocation_view,
)
from supervisor.policy.refusal import refused
from supervisor.store.base import ControlTx

__all__ = ["AllocateWork"]


@dataclass(frozen=True, slots=True, kw_only=True)
class AllocateWork(RepoScope):
    """Route the candidates and, with ``apply``, reserve the pick in the same transaction,
    so the item chosen is still free when its lease is written: no other grant can land in
    between."""

    session_id: str
    role: str
    candidates: tuple[Candidate, ...]
    apply: bool
    ttl_seconds: float | None = None
    owner_pid: int | None = None
    profile: str | None = None

    @classmethod
    def check(cls, r: AllocateRequest, profile: Profile | None) -> AllocateWork | dict[str, Any]:
        """The next item for the caller's role: a preview, or with ``apply`` a leased
        assignment; an ineligible role is refused before anything else is checked.

        The role is the caller's profile role; asking for another is ``role_ineligible``, so
        an author profile can never be handed a merge.
        """
        assert profile is not None  # grant() refuses a missing profile
        try:
            wanted = check_role(r.role if r.role is not None else profile.role_kind)
        except ControlPlaneRefusal as exc:
            return _ineligible(exc.detail, r.role)
        if wanted != profile.role_kind:
            reason = (
                f"profile {profile.name!r} has role {profile.role_kind!r}; it cannot take "
                f"{wanted!r} work"
            )
            return _ineligible(reason, r.role)
        apply = bool(r.apply)
        try:
            sid = check_session_id(r.session_id)
            remote, org, repo = check_repository(r.remote, r.org, r.repo)
            parsed = candidates_from_mappings(list(r.candidates or ()))
            pid, ttl = pid_arg(r.owner_pid), ttl_arg(r.lease_ttl_seconds)
        except ControlPlaneRefusal as exc:
            # Its refusals say whether the caller asked for a lease (``apply``).
            return refused(exc.code, exc.detail, apply=apply)
        return cls(
            session_id=sid,
            role=wanted,
            remote=remote,
            org=org,
            repo=repo,
            candidates=parsed,
            apply=apply,
            ttl_seconds=ttl,
            owner_pid=pid,
            profile=profile.name,
        )

    async def write(self, ctx: ControlContext, control: ControlTx) -> WriteAck:
        return await _allocate(ctx, control, self)


def _ineligible(reason: str, role: object) -> dict[str, Any]:
    return refused(
        OUTCOME_ROLE_INELIGIBLE,
        reason,
        outcome=OUTCOME_ROLE_INELIGIBLE,
        role=role,
        selected=None,
        skipped=[],
        assignment=None,
    )


_DRY_RUN = "dry run: nothing was reserved; call again with apply=true to take the item"


async def _allocate(ctx: ControlContext, control: ControlTx, m: AllocateWork) -> WriteAck:
    now, stamp = ctx.now()
    ttl = ctx.ttl(m.ttl_seconds)
    refs = {c.key: work_ref(m.remote, m.org, m.repo, c.kind, c.number) for c in m.candidates}
    by_item_key = {ref.key: key for key, ref in refs.items()}
    stored = {
        str(row["work_item_key"]): row
        for row in await control.work_items([ref.key for ref in refs.values()])
    }
    candidates = tuple(_with_stored_state(c, stored.get(refs[c.key].key)) for c in m.candidates)
    live, _ = split_due(await control.item_leases(list(by_item_key)), stamp)
    holders = {
        by_item_key[str(lease["work_item_key"])]: canon(lease["session_id"]) for lease in live
    }
    lock = await control.active_terminal_lock(**m.where())
    terminal_pr = int(lock["terminal_pr"]) if lock is not None else None
    routing = route(
        candidates,
        role=m.role,
        session_id=m.session_id,
        terminal_pr=terminal_pr,
        holders=holders,
    )

    def answer(outcome: str, reasons: list[str], **extra: Any) -> WriteAck:
        data = allocation_view(
            outcome=outcome,
            apply=m.apply,
            role=m.role,
            session_id=m.session_id,
            remote=m.remote,
            org=m.org,
            repo=m.repo,
            selected=extra.pop("selected", routing.selected),
            skipped=routing.skipped,
            reasons=reasons,
            terminal_pr=terminal_pr,
            **extra,
        )
        return WriteAck(ok=True, code=outcome, detail="; ".join(reasons), data=data)

    if routing.kind == "none":
        return answer(routing.outcome, list(routing.reasons))
    if routing.kind == "wait":
        return answer(
            OUTCOME_WAIT, list(routing.reasons), owner_session_id=routing.owner_session_id
        )
    if not m.apply:
        return answer(OUTCOME_PREVIEW, [*routing.reasons, _DRY_RUN])
    selected = routing.selected
    assert selected is not None
    terms = AssignTerms(
        session_id=m.session_id,
        role=m.role,
        ref=refs[selected.key],
        expected_head_sha=selected.head_sha,
        phase="allocated",
        owner_pid=m.owner_pid,
    )
    session = await ensure_session(control, terms, profile=m.profile, stamp=stamp)
    # The caller's inventory is what Gitea says now: the item's head follows it.
    facts = ItemFacts(
        ref=terms.ref,
        current_head_sha=selected.head_sha,
        title=selected.title or None,
        priority=selected.priority,
    )
    put = await put_item(control, facts, stamp=stamp)
    if not put.ok:
        return answer(OUTCOME_NO_SAFE, [put.detail], selected=None)
    assigned = await assign_in(ctx, control, terms, ttl=ttl, session=session, now=now, stamp=stamp)
    outcome = {
        ASSIGN_OUTCOME_ASSIGNED: OUTCOME_ASSIGNED,
        ASSIGN_OUTCOME_WAIT: OUTCOME_WAIT,
    }.get(str(assigned["outcome"]), OUTCOME_NO_SAFE)
    return answer(
        outcome,
        [*routing.reasons, str(assigned["reason"])],
        assignment=assigned,
        owner_session_id=assigned.get("owner_session_id"),
    )


def _with_stored_state(candidate: Candidate, row: dict[str, Any] | None) -> Candidate:
    """A terminal state already recorded wins over an inventory that still says open."""
    state = canon(row.get("state")) if row is not None else ""
    if state in TERMINAL_STATES and candidate.state not in TERMINAL_STATES:
        return replace(candidate, state=state)
    return candidate
