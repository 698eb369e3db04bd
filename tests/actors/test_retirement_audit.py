"""The audit trail: an apply's row commits with its retirements; failed audit writes surface."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from supervisor.errors import StoreError
from supervisor.policy.retirement.reasons import OUTCOME_APPLIED, OUTCOME_REFUSED
from supervisor.store.base import WriteTx
from tests.actors.harness import READER, RETIRER, Harness, harness
from tests.actors.helpers_retirement import (
    PAST_TTL,
    TxProxy,
    apply_plan,
    enroll,
    ensure_swept,
    plan,
    status_of,
    wrap_store_writes,
)

pytestmark = pytest.mark.anyio


async def _stale_candidate(h: Harness) -> str:
    await ensure_swept(h)
    worker = await enroll(h)
    h.probes.kill(int(worker["pid"]))
    await h.clock.advance(PAST_TTL)
    return str(worker["worker_identity"])


class _Spy:
    """What each transaction did, and audit writes that fail on demand."""

    def __init__(self) -> None:
        self.transactions: list[list[str]] = []
        #: How many audit writes from now on raise (-1: every one).
        self.failing_audits = 0


class _SpyTx(TxProxy):
    def __init__(self, tx: WriteTx, spy: _Spy, *, retire_error: Exception | None) -> None:
        super().__init__(tx)
        self._spy = spy
        self._calls: list[str] = []
        self._retire_error = retire_error
        spy.transactions.append(self._calls)

    async def append_audit(self, event: Mapping[str, Any]) -> None:
        if self._spy.failing_audits:
            self._spy.failing_audits -= 1
            raise StoreError("audit insert failed (injected)")
        self._calls.append(f"audit:{event['action']}:{event['outcome']}")
        await self._tx.append_audit(event)

    async def retire_guarded_many(self, expected: Any, **kwargs: Any) -> list[bool]:
        self._calls.append("retire")
        if self._retire_error is not None:
            raise self._retire_error
        result: list[bool] = await self._tx.retire_guarded_many(expected, **kwargs)
        return result


def _spy_on(
    monkeypatch: pytest.MonkeyPatch, h: Harness, *, retire_error: Exception | None = None
) -> _Spy:
    spy = _Spy()
    wrap_store_writes(monkeypatch, h, lambda tx: _SpyTx(tx, spy, retire_error=retire_error))
    return spy


async def _apply_events(h: Harness) -> list[dict[str, Any]]:
    return [dict(e) for e in await h.store.read_audit() if e["action"] == "apply"]


async def test_the_apply_audit_row_commits_in_the_retiring_transaction(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with harness(tmp_path) as h:
        candidate = await _stale_candidate(h)
        planned = await plan(h, RETIRER)
        spy = _spy_on(monkeypatch, h)
        applied = await apply_plan(h, planned)
        assert applied["outcome"] == OUTCOME_APPLIED
        [retiring] = [calls for calls in spy.transactions if "retire" in calls]
        assert retiring == ["retire", f"audit:apply:{OUTCOME_APPLIED}"]
        [event] = await _apply_events(h)
        assert event["detail"]["retired"] == [candidate]


async def test_a_failed_retirement_leaves_a_failure_and_no_retirement_in_the_trail(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with harness(tmp_path) as h:
        candidate = await _stale_candidate(h)
        planned = await plan(h, RETIRER)
        _spy_on(monkeypatch, h, retire_error=StoreError("disk full (injected)"))
        failed = await apply_plan(h, planned)
        assert failed["outcome"] == "transaction_failed"
        assert await status_of(h, candidate) == "active"
        [event] = await _apply_events(h)
        assert event["outcome"] == "transaction_failed"
        assert event["detail"]["retired"] == []


async def test_an_audit_write_that_fails_rolls_the_apply_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with harness(tmp_path) as h:
        candidate = await _stale_candidate(h)
        planned = await plan(h, RETIRER)
        spy = _spy_on(monkeypatch, h)
        spy.failing_audits = -1
        failed = await apply_plan(h, planned)
        assert failed["outcome"] == "transaction_failed"
        assert failed["mutation_performed"] is False
        assert failed["retired_count"] == 0
        assert "audit insert failed" in " ".join(failed["reasons"])
        # The failure could not be recorded either, and the answer says so.
        assert failed["audit_recorded"] is False
        assert await status_of(h, candidate) == "active"
        assert await _apply_events(h) == []


async def test_a_plan_whose_audit_cannot_be_written_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with harness(tmp_path) as h:
        await _stale_candidate(h)
        spy = _spy_on(monkeypatch, h)
        spy.failing_audits = -1
        refused = await h.handle.plan(RETIRER)
    assert refused["success"] is False
    assert refused["outcome"] == OUTCOME_REFUSED
    assert refused["audit_recorded"] is False
    assert "audit trail" in refused["reasons"][0]
    assert "candidate_fingerprint" not in refused


async def test_a_denial_whose_audit_cannot_be_written_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with harness(tmp_path) as h:
        await _stale_candidate(h)
        planned = await plan(h, RETIRER)
        spy = _spy_on(monkeypatch, h)
        spy.failing_audits = -1
        denied = await apply_plan(h, planned, profile=READER)
    assert denied["outcome"] == OUTCOME_REFUSED
    assert denied["audit_recorded"] is False
    assert any("could not be written to the audit trail" in r for r in denied["reasons"])


async def test_an_audit_write_that_fails_once_is_retried(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with harness(tmp_path) as h:
        await _stale_candidate(h)
        spy = _spy_on(monkeypatch, h)
        spy.failing_audits = 1
        planned = await plan(h, RETIRER)
        events = [e for e in await h.store.read_audit() if e["action"] == "plan"]
    assert "audit_recorded" not in planned
    assert [e["detail"]["registry_fingerprint"] for e in events] == [
        planned["registry_fingerprint"]
    ]
