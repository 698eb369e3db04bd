"""Pure steps of a reap apply: the token compare, the mass guard, each target's last check."""

from __future__ import annotations

from dataclasses import dataclass

from supervisor.policy.incarnation import same_incarnation
from supervisor.policy.servers.census import ProcessRef
from supervisor.policy.servers.reap_plan import ReapPlan

__all__ = [
    "CODE_CENSUS_UNAVAILABLE",
    "CODE_MASS_GUARD",
    "CODE_PLAN_CHANGED",
    "CODE_REAP_INCOMPLETE",
    "OUTCOME_APPLIED",
    "OUTCOME_NOTHING_TO_REAP",
    "REAP_FLOOR_KEY",
    "REAP_SHARE_KEY",
    "TARGET_EXITED",
    "TARGET_PID_REUSED",
    "TARGET_REAPED",
    "TARGET_SURVIVED",
    "ReapGuard",
    "before_signal",
    "check_reap_guard",
    "plan_changed_reasons",
]

#: The apply's answer: it ran (``success`` says whether every target is gone) ...
OUTCOME_APPLIED = "applied"
#: ... or the current plan has no target, and nothing was signalled.
OUTCOME_NOTHING_TO_REAP = "nothing_to_reap"
#: Refusals, each with nothing signalled.
CODE_PLAN_CHANGED = "plan_changed"
CODE_MASS_GUARD = "mass_reap_guard"
CODE_CENSUS_UNAVAILABLE = "census_unavailable"
#: The apply ran but a target's tree still runs after SIGKILL (its answer is not a success).
CODE_REAP_INCOMPLETE = "reap_incomplete"

#: Per target: its tree is gone after the signals.
TARGET_REAPED = "reaped"
#: Its leader exited on its own before any signal: nothing was sent.
TARGET_EXITED = "exited_before_signal"
#: Its pid holds another process now: refused, nothing was sent to it.
TARGET_PID_REUSED = "pid_reused"
#: Part of its tree still runs after SIGKILL (uninterruptible, or not ours to signal).
TARGET_SURVIVED = "survived"


#: The settings behind the reap's mass guard, as supervisor.toml names them.
REAP_SHARE_KEY = "reap.mass_guard_share"
REAP_FLOOR_KEY = "reap.mass_guard_floor"


def plan_changed_reasons(expected: str, fresh: ReapPlan) -> list[str] | None:
    """None when ``fresh`` carries the token ``expected``; else why apply reaps nothing."""
    if fresh.plan_token == expected:
        return None
    shown = ", ".join(f"pid {t.server.process.pid}" for t in fresh.targets[:10])
    more = len(fresh.targets) - 10
    now = f"{len(fresh.targets)} target(s)" + (f": {shown}" if shown else "")
    return [
        "the plan token moved between plan and apply (a target exited, its pid was taken, "
        "its tree changed, or another server became orphaned); reaping nothing",
        f"the current plan has {now}"
        + (f" and {more} more" if more > 0 else "")
        + f" (plan_token {fresh.plan_token}); plan again and review it",
    ]


@dataclass(frozen=True, slots=True, kw_only=True)
class ReapGuard:
    """Numbers behind a mass-reap refusal."""

    would_reap: int
    servers: int
    max_share: float
    floor: int

    @property
    def reason(self) -> str:
        share = self.max_share
        return (
            f"apply would reap {self.would_reap} of the {self.servers} MCP servers on this "
            f"host: more than {REAP_SHARE_KEY} = {share:g} ({share:.0%}) of them and more "
            f"than {REAP_FLOOR_KEY} = {self.floor}. If they really are orphaned, repeat this "
            "apply with override_mass_guard (the CLI's --override-mass-guard; audited), or "
            "raise the settings in supervisor.toml"
        )


def check_reap_guard(plan: ReapPlan, *, max_share: float, floor: int) -> ReapGuard | None:
    """Refuse when more than ``floor`` targets are also more than ``max_share`` of every
    server the census lists: when most servers look orphaned at once, the census is more
    likely wrong than the host (the retirement mass guard's reasoning)."""
    would, servers = len(plan.targets), plan.server_count
    if would <= floor or would <= max_share * servers:
        return None
    return ReapGuard(would_reap=would, servers=servers, max_share=max_share, floor=floor)


def before_signal(planned: ProcessRef, current: str | None) -> str | None:
    """The last check before a target's first signal, from its pid's incarnation read just
    now (None: no process has the pid). None lets the signals go (each still through a
    pidfd verified against its member's planned token); else the target's outcome."""
    if current is None:
        return TARGET_EXITED
    if not same_incarnation(current, planned.start):
        return TARGET_PID_REUSED
    return None
