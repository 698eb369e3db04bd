"""Compact plans through the actors: summary by default, pages on request, same tokens as full."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from supervisor.policy.retirement.fingerprints import registry_fingerprint
from supervisor.policy.retirement.reasons import (
    OUTCOME_APPLIED,
    REASON_ALREADY_TERMINAL,
    REASON_ELIGIBLE,
    REASON_PID_ALIVE,
)
from supervisor.wire import PlanQuery
from tests.actors.harness import READER, Harness, harness
from tests.actors.helpers_retirement import PAST_TTL, apply_plan, enroll, ensure_swept, plan

pytestmark = pytest.mark.anyio

_TOKENS = ("registry_fingerprint", "candidate_fingerprint", "scope_fingerprint")


async def _fleet(h: Harness) -> dict[str, list[dict[str, Any]]]:
    """Two live, two stale (dead pids) and three released rows; one stale row shares its
    session with a released row, so the scope token must read history."""
    await ensure_swept(h)
    live = [await enroll(h, namespace=ns) for ns in ("author", "reviewer")]
    gone = [await enroll(h, namespace=ns) for ns in ("merger", "controller", "reconciler")]
    stale = [await enroll(h, namespace="author", session_id=str(gone[0]["session_id"]))]
    stale.append(await enroll(h, namespace="reviewer"))
    for row in gone:
        ack = await h.release(row)
        assert ack.ok, ack
    for row in stale:
        h.probes.kill(int(row["pid"]))
    await h.clock.advance(PAST_TTL)
    # The live ones beat again, so only the killed ones are stale.
    for row in live:
        await h.beat(row)
    return {"live": live, "stale": stale, "gone": gone}


def _summary(result: Mapping[str, Any]) -> dict[str, tuple[int, list[str]]]:
    return {
        g["reason_code"]: (g["count"], [e["worker_identity"] for e in g["examples"]])
        for g in result["preserved_summary"]
    }


async def test_the_default_plan_is_compact_and_agrees_with_the_full_plan(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        fleet = await _fleet(h)
        full = await plan(h)
        compact = await h.handle.plan(READER)

        for token in _TOKENS:
            assert compact[token] == full[token], token
        assert compact["candidate_worker_identities"] == full["candidate_worker_identities"]
        assert sorted(compact["candidate_worker_identities"]) == sorted(
            str(r["worker_identity"]) for r in fleet["stale"]
        )
        assert compact["candidates"] == full["candidates"]
        assert compact["preserved_count"] == full["preserved_count"] == 5
        assert "preserved" not in compact
        gone = sorted(str(r["worker_identity"]) for r in fleet["gone"])
        live = sorted(str(r["worker_identity"]) for r in fleet["live"])
        assert _summary(compact) == {
            REASON_ALREADY_TERMINAL: (3, gone),
            "worker_live": (2, live),
        }
        # The whole-registry token has its documented definition over every row.
        assert compact["registry_fingerprint"] == registry_fingerprint(
            await h.store.read_registrations()
        )
        # The apply the compact plan prints works unchanged.
        applied = await apply_plan(h, compact, mode="scoped")
        assert applied["outcome"] == OUTCOME_APPLIED, applied
        assert applied["retired_count"] == 2


async def test_pages_of_one_reason_add_up_to_the_full_listing(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        await _fleet(h)
        full = await plan(h)
        want = [e for e in full["preserved"] if e["reason_code"] == REASON_ALREADY_TERMINAL]
        got: list[Mapping[str, Any]] = []
        cursor: str | None = None
        for _ in range(5):
            page = await h.handle.plan(
                READER,
                query=PlanQuery(reason=REASON_ALREADY_TERMINAL, limit=1, cursor=cursor),
            )
            got.extend(page["preserved"])
            cursor = page["next_cursor"]
            if cursor is None:
                break
        assert cursor is None
        assert [e["worker_identity"] for e in got] == [e["worker_identity"] for e in want]
        assert [e["evidence"] for e in got] == [e["evidence"] for e in want]


async def test_namespace_and_instance_filters_list_matching_entries_only(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        fleet = await _fleet(h)
        # A live row (planned) and a released one (history, read page by page).
        for namespace, row in (("reviewer", fleet["live"][1]), ("merger", fleet["gone"][0])):
            listed = await h.handle.plan(READER, query=PlanQuery(namespace=namespace))
            assert [e["worker_identity"] for e in listed["preserved"]] == [row["worker_identity"]]
        target = fleet["gone"][1]
        by_instance = await h.handle.plan(
            READER, query=PlanQuery(instance=str(target["client_instance_id"]))
        )
        assert [e["worker_identity"] for e in by_instance["preserved"]] == [
            target["worker_identity"]
        ]
        alive = await h.handle.plan(READER, query=PlanQuery(reason=REASON_PID_ALIVE))
        assert alive["preserved"] == []
        assert alive["candidate_worker_identities"]  # candidates are always listed
        assert all(c["reason_code"] == REASON_ELIGIBLE for c in alive["candidates"])


async def test_a_snapshot_lists_history_only_when_asked(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        fleet = await _fleet(h)
        gone = sorted(str(r["worker_identity"]) for r in fleet["gone"])

        def listed(snap: Mapping[str, Any], key: str) -> list[str]:
            return sorted(str(w["worker_identity"]) for w in snap[key])

        counted = await h.handle.snapshot(READER)
        listing = await h.handle.snapshot(READER, include_history=True)

        # By default history is counted, not read row by row.
        assert counted["historical_worker_count"] == listing["historical_worker_count"] == 3
        assert counted["historical_workers"] == []
        assert listed(listing, "historical_workers") == gone
        assert {w["status"] for w in listing["historical_workers"]} == {"released"}
        # Both readings agree on everything that is not history.
        for key in ("live_workers", "stale_workers"):
            assert listed(counted, key) == listed(listing, key), key
        assert counted["registry_fingerprint"] == listing["registry_fingerprint"]
        assert counted["live_fleet_safe"] == listing["live_fleet_safe"]
