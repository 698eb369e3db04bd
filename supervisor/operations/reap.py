"""The reap of orphaned MCP server trees: a plan with a token, and an apply against it."""

from __future__ import annotations

from dataclasses import replace

from supervisor.operations.fleet import APPLY, PLAN
from supervisor.operations.spec import TEXT, TEXTS, Arg, Command, Flag, Operation, Tool

__all__ = ["REAP_OPERATIONS"]

# Looking needs what a retirement plan needs; reaping needs what a retirement apply needs
# (the retire grant): both destroy what a client left behind, on the supervisor's word.
REAP_PLAN = Operation(
    "reap_plan",
    "reap_plan",
    PLAN.tasks,
    args=(
        Arg(
            "include",
            TEXTS,
            cli=Flag.comma("--include", "kept servers to plan too: superseded"),
        ),
    ),
    tool=Tool(
        "fleet_plan_server_reap",
        "reap_plan_tool",
        """\
Read-only: which MCP server trees on this host are orphaned, with a token to reap them.

A server is a target only when its owner client is gone (by pid and start
time) or closed its end of the server's stdio; a server whose owner cannot
be judged is kept, and so is every server launched through exec. Each
target lists its evidence, its processes and the memory it holds; live
clients' duplicate servers are listed apart and never reaped. With
include=["superseded"], also the older copies a live client replaced and
has not used since the newer copy started (superseded_by_newer_instance).
Signals nothing. Needs gitea.read and a controller or reconciler role.""",
        (
            (
                "include",
                """\
Kept servers to plan too: ["superseded"] for the older
copies a live client replaced (only on your word).""",
            ),
        ),
        "",
        read_only=True,
    ),
    command=Command("reap", "plan", "dry run: orphaned MCP server trees and a plan token"),
)
REAP_APPLY = Operation(
    "reap_apply",
    "reap_apply",
    APPLY.tasks,
    args=(
        Arg("plan_token", TEXT, required=True, cli=Flag("--plan-token", "the plan's plan_token")),
        replace(
            APPLY.arg("override_mass_guard"),
            cli=Flag(
                "--override-mass-guard",
                "reap even past the mass guard, this once (audited)",
                kind="true",
            ),
        ),
    ),
    tool=Tool(
        "fleet_apply_server_reap",
        "reap_apply_tool",
        """\
Reap the orphaned MCP server trees of a plan, under compare-and-swap.

Give the plan's plan_token. The supervisor takes the census again and
reaps nothing if the plan moved (plan_changed). Otherwise each target's
processes get SIGTERM, then SIGKILL after the grace, each only if it is
still the process the plan named (checked through a pidfd just before the
signal: a reused pid is never signalled). One audit event per target.
Needs gitea.worker_registry.retire and a controller or reconciler role.""",
        (
            ("plan_token", "The plan's plan_token."),
            (
                "override_mass_guard",
                """\
Reap even when the mass guard refuses (most of the
host's servers at once), for this call only; audited.""",
            ),
        ),
        # It may have signalled processes.
        "no answer came back, so whether anything was reaped is unknown; plan again to "
        "see the host as it is now",
        destructive=True,
        refused_extra=(("reaped_count", 0),),
    ),
    command=Command("reap", "apply", "reap the server trees a plan listed (compare-and-swap)"),
)

REAP_OPERATIONS = (REAP_PLAN, REAP_APPLY)
