"""Every control-plane refusal, not only a denial, is on the audit trail before it is answered."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.actors.harness import Harness
from tests.actors.helpers_app import harness
from tests.actors.helpers_control import AUTHOR_P, CONTROLLER_P, WHERE

pytestmark = pytest.mark.anyio


async def _audited(h: Harness, action: str) -> list[dict[str, Any]]:
    return [dict(e) for e in await h.store.read_audit() if e["action"] == action]


async def test_a_refusal_by_the_writer_is_audited_with_its_code(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        answer = await h.handle.heartbeat_lease(
            CONTROLLER_P, session_id="s-1", lease_id="lease-nobody-holds"
        )
        assert answer["success"] is False
        (row,) = await _audited(h, "lease_heartbeat")
    assert row["actor"] == CONTROLLER_P.name
    assert row["outcome"] == "refused"
    assert row["detail"]["code"] == answer["code"]
    assert row["detail"]["reasons"] == answer["reasons"]


async def test_a_refused_argument_is_audited_before_anything_is_sent(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        answer = await h.handle.upsert_session(CONTROLLER_P, session_id="s-1", status="paused")
        assert answer["code"] == "invalid_argument"
        (row,) = await _audited(h, "session_upsert")
    assert row["detail"]["code"] == "invalid_argument"


async def test_an_ineligible_role_is_audited(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        answer = await h.handle.allocate_next_work(
            AUTHOR_P, session_id="s-1", candidates=[], role="merger", **WHERE
        )
        assert answer["code"] == "role_ineligible"
        (row,) = await _audited(h, "allocate")
    assert row["actor"] == AUTHOR_P.name
    assert row["detail"]["code"] == "role_ineligible"


async def test_an_answer_that_is_not_a_refusal_leaves_no_refusal_row(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        answer = await h.handle.upsert_session(CONTROLLER_P, session_id="s-1")
        assert answer["success"] is True
        assert await _audited(h, "session_upsert") == []
