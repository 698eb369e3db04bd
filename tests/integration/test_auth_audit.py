"""A wrong or missing token at the real daemon's socket is refused, logged and audited."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
from contextlib import closing
from typing import Any

import pytest

from supervisor.client import AsyncClient, RemoteError
from supervisor.settings.profile_edits import create_token
from tests.integration.daemon import running_daemon, wait_ready

pytestmark = [pytest.mark.anyio, pytest.mark.integration]


async def _refused(client: AsyncClient, op: str) -> RemoteError:
    with pytest.raises(RemoteError) as refused:
        await client.request(op, {})
    return refused.value


async def test_a_wrong_token_leaves_an_audit_row_and_a_warning() -> None:
    with running_daemon() as daemon:
        await wait_ready(daemon)
        wrong = AsyncClient(daemon.socket, token="not-a-token", timeout=30.0)
        missing = AsyncClient(daemon.socket, token=None, timeout=30.0)
        try:
            plan = await _refused(wrong, "plan")
            # (status would be answered: the socket's owner needs no token for it)
            status = await _refused(missing, "snapshot")
        finally:
            await wrong.aclose()
            await missing.aclose()
        # Committed before the refusal was sent: readable while the daemon still runs.
        with closing(
            sqlite3.connect(f"file:{daemon.workdir / 'registry.sqlite3'}?mode=ro", uri=True)
        ) as db:
            rows = db.execute(
                "SELECT actor, role, action, outcome, detail FROM audit_events "
                "WHERE outcome = 'unauthenticated' ORDER BY event_id"
            ).fetchall()
        # Stopped here, so its whole log is written and still on disk.
        daemon.process.send_signal(signal.SIGTERM)
        assert daemon.process.wait(timeout=30) == 0
        log = (daemon.workdir / "daemon.log").read_text()

    assert (plan.remote_code, status.remote_code) == ("unauthenticated", "unauthenticated")
    assert [(actor, role, action) for actor, role, action, _, _ in rows] == [
        (None, None, "plan"),
        (None, None, "snapshot"),
    ]
    details = [json.loads(detail) for *_, detail in rows]
    assert [d["reasons"] for d in details] == [
        ["the token proves no profile"],
        ["this operation needs a profile token (token)"],
    ]
    assert {d["surface"] for d in details} == {"socket"}
    assert {d["peer_pid"] for d in details} == {os.getpid()}
    assert "not-a-token" not in log + json.dumps(details)

    # Every line the daemon wrote is JSON, the SDK's and uvicorn's included.
    lines: list[dict[str, Any]] = [json.loads(line) for line in log.splitlines()]
    warnings = [line for line in lines if line["event"] == "unauthenticated_request"]
    assert [(w["level"], w["action"]) for w in warnings] == [
        ("warning", "plan"),
        ("warning", "snapshot"),
    ]


def _audit_rows(daemon: Any, outcome: str) -> list[tuple[Any, ...]]:
    """The committed audit rows of ``outcome``, read beside the running daemon."""
    with closing(
        sqlite3.connect(f"file:{daemon.workdir / 'registry.sqlite3'}?mode=ro", uri=True)
    ) as db:
        return db.execute(
            "SELECT actor, role, action, outcome, detail FROM audit_events "
            "WHERE outcome = ? ORDER BY event_id",
            (outcome,),
        ).fetchall()


async def test_a_denial_and_unreadable_profiles_each_leave_an_audit_row() -> None:
    assign = {
        "remote": "r",
        "org": "o",
        "repo": "x",
        "kind": "issue",
        "number": 1,
        "session_id": "s-1",
        "role": "author",
    }
    with running_daemon() as daemon:
        await wait_ready(daemon)
        # An author may not assign work (an operator role's op): a control-plane denial.
        author = AsyncClient(
            daemon.socket, token=create_token(daemon.profiles, "prgs-author"), timeout=30.0
        )
        try:
            denied = await author.request("assign", assign)
        finally:
            await author.aclose()
        # Read as soon as the answer is in: the row was committed before it was sent.
        denials = _audit_rows(daemon, "refused")

        daemon.profiles.write_text("[profiles.broken\n", encoding="utf-8")
        reader = AsyncClient(daemon.socket, token=daemon.token, timeout=30.0)
        try:
            unreadable = await _refused(reader, "plan")
        finally:
            await reader.aclose()
        unreadables = _audit_rows(daemon, "profiles_unreadable")
        daemon.process.send_signal(signal.SIGTERM)
        assert daemon.process.wait(timeout=30) == 0
        log = [
            json.loads(line) for line in (daemon.workdir / "daemon.log").read_text().splitlines()
        ]

    assert (denied["success"], denied["code"], denied["denied"]) == (
        False,
        "permission_denied",
        True,
    )
    [(actor, role, action, outcome, detail)] = denials
    assert (actor, role, action, outcome) == ("prgs-author", "author", "assign", "refused")
    assert json.loads(detail)["code"] == "permission_denied"
    assert json.loads(detail)["reasons"] == denied["reasons"]

    assert unreadable.remote_code == "profiles_unreadable"
    [(actor, role, action, outcome, detail)] = unreadables
    assert (actor, role, action, outcome) == (None, None, "plan", "profiles_unreadable")
    reasons = json.loads(detail)["reasons"]
    assert len(reasons) == 1
    assert reasons[0].startswith("no token can be proved right now")
    assert json.loads(detail)["surface"] == "socket"
    assert daemon.token not in detail
    assert [e["action"] for e in log if e["event"] == "profiles_unreadable_request"] == ["plan"]
