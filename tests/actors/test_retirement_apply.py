"""Compare-and-swap apply via the actors: every outcome, per-target reasons, gates, post_apply."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from actors.liveness.actor import LivenessActor
from actors.retirement.apply_tx import ApplySettings
from actors.writer.actor import WriterSettings
from actors.writer.beats import NOT_ACTIVE
from supervisor.daemon.app import AppSettings
from supervisor.errors import StoreError
from supervisor.policy.fleet.findings import CLASS_LEGACY_INCOMPLETE
from supervisor.policy.retirement.reasons import (
    OUTCOME_ALREADY_RETIRED,
    OUTCOME_APPLIED,
    OUTCOME_CANDIDATE_SUBSET,
    OUTCOME_CANDIDATES_MOVED,
    OUTCOME_MASS_GUARD,
    OUTCOME_NOTHING_REQUESTED,
    OUTCOME_REFUSED,
    OUTCOME_REGISTRY_MOVED,
    OUTCOME_SCOPE_MOVED,
    OUTCOME_TRANSACTION_FAILED,
    REASON_ELIGIBLE,
    REASON_LIVENESS_REPROBE,
    REASON_PROTECTED_OWNER,
    REASON_ROW_CHANGED,
    REASON_ROW_MISSING,
    REASON_WORKER_LIVE,
)
from supervisor.store.stamps import format_stamp
from supervisor.system.probes import ProcessEvidence
from tests.actors.harness import READER, RETIRER, START, Harness, default_settings, harness
from tests.actors.helpers_retirement import (
    PAST_TTL,
    ExplodingReprobe,
    Mode,
    SplitProbes,
    TxProxy,
    apply_plan,
    enroll,
    ensure_swept,
    instance_id,
    lease,
    plan,
    rows_by_identity,
    stale_fleet,
    status_of,
    wrap_store_writes,
)

pytestmark = pytest.mark.anyio

MODES: tuple[Mode, ...] = ("strict", "scoped")


def _ids(workers: list[dict[str, Any]]) -> list[str]:
    return sorted(str(w["worker_identity"]) for w in workers)


def _assert_nothing_retired(result: Mapping[str, Any]) -> None:
    assert result["retired_count"] == 0
    # A refusal before the transaction carries no ``retired`` list at all.
    assert result.get("retired", []) == []
    assert result["mutation_performed"] is False


async def _all_active(h: Harness) -> bool:
    return all(r["status"] == "active" for r in await h.store.read_registrations())


# --- applied ---------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
async def test_applied_retires_the_planned_rows_and_keeps_their_history(
    tmp_path: Path, mode: Mode
) -> None:
    async with harness(tmp_path) as h:
        gone, running = await stale_fleet(h, 2, live=1)
        planned = await plan(h)
        before = await rows_by_identity(h)

        result = await apply_plan(h, planned, mode=mode)

        assert result["outcome"] == OUTCOME_APPLIED
        assert result["success"] is True
        assert result["mutation_performed"] is True
        assert result["retired_count"] == 2
        assert sorted(r["worker_identity"] for r in result["retired"]) == _ids(gone)
        after = await rows_by_identity(h)
        assert set(after) == set(before), "nothing may be deleted"
        stamp = format_stamp(h.clock.now())
        for identity in _ids(gone):
            row = after[identity]
            assert row["status"] == "retired"
            assert row["retired_at"] == stamp
            assert row["retired_by"] == RETIRER.name
            assert row["retirement_reason"] == REASON_ELIGIBLE
            retirement = {"status", "retired_at", "retired_by", "retirement_reason"}
            assert {k: v for k, v in row.items() if k not in retirement} == {
                k: v for k, v in before[identity].items() if k not in retirement
            }
        assert (
            after[str(running[0]["worker_identity"])] == before[str(running[0]["worker_identity"])]
        )


# --- moved tokens ----------------------------------------------------------------------


async def test_strict_apply_refuses_when_an_unrelated_worker_registers(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        gone, _ = await stale_fleet(h, 1)
        planned = await plan(h)
        await enroll(h, namespace="merger")

        result = await apply_plan(h, planned)

        assert result["outcome"] == OUTCOME_REGISTRY_MOVED
        _assert_nothing_retired(result)
        assert result["current_token"] != planned["registry_fingerprint"]
        assert await status_of(h, str(gone[0]["worker_identity"])) == "active"


async def test_scoped_apply_refuses_when_a_row_joins_the_candidates_scope(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        gone, _ = await stale_fleet(h, 1)
        planned = await plan(h)
        # A new process takes over the candidate's session: the decision scope grew.
        await enroll(h, namespace="merger", session_id=str(gone[0]["session_id"]))

        result = await apply_plan(h, planned, mode="scoped")

        assert result["outcome"] == OUTCOME_SCOPE_MOVED
        assert result["compared_token"] == "scope_fingerprint"
        _assert_nothing_retired(result)
        assert await status_of(h, str(gone[0]["worker_identity"])) == "active"


async def test_scoped_apply_ignores_a_registration_outside_the_scope(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        gone, _ = await stale_fleet(h, 1)
        planned = await plan(h)
        await enroll(h, namespace="merger")

        result = await apply_plan(h, planned, mode="scoped")

        assert result["outcome"] == OUTCOME_APPLIED
        assert [r["worker_identity"] for r in result["retired"]] == _ids(gone)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("change", ["revived", "unprobeable", "pid_reused"])
async def test_candidate_set_moves_when_a_candidates_process_evidence_changes(
    tmp_path: Path, mode: Mode, change: str
) -> None:
    async with harness(tmp_path) as h:
        gone, _ = await stale_fleet(h, 2)
        planned = await plan(h)
        pid = int(gone[1]["pid"])
        if change == "revived":
            h.probes.revive(pid, str(gone[1]["process_start_time"]))
        elif change == "unprobeable":
            h.probes.forget(pid)
        else:
            h.probes.revive(pid, "ticks-a-new-process")

        result = await apply_plan(h, planned, mode=mode)

        assert result["outcome"] == OUTCOME_CANDIDATES_MOVED
        _assert_nothing_retired(result)
        assert result["current_candidate_fingerprint"] != planned["candidate_fingerprint"]
        assert await _all_active(h)


@pytest.mark.parametrize("mode", MODES)
async def test_a_lease_taken_after_plan_moves_the_candidate_set_and_protects_its_owner(
    tmp_path: Path, mode: Mode
) -> None:
    async with harness(tmp_path) as h:
        gone, _ = await stale_fleet(h, 2)
        planned = await plan(h)
        owner = gone[0]
        ack = await h.handle.upsert_lease(lease("l-late", session_id=str(owner["session_id"])))
        assert ack.ok

        result = await apply_plan(h, planned, mode=mode)

        assert result["outcome"] == OUTCOME_CANDIDATES_MOVED
        _assert_nothing_retired(result)
        assert await _all_active(h)
        replanned = await plan(h)
        kept = {p["worker_identity"]: p["reason_code"] for p in replanned["preserved"]}
        assert kept == {owner["worker_identity"]: REASON_PROTECTED_OWNER}


@pytest.mark.parametrize("mode", MODES)
async def test_replaying_an_applied_plan_is_already_retired_and_idempotent(
    tmp_path: Path, mode: Mode
) -> None:
    async with harness(tmp_path) as h:
        gone, _ = await stale_fleet(h, 2)
        planned = await plan(h)
        first = await apply_plan(h, planned, mode=mode)
        assert first["retired_count"] == 2
        rows_after_first = await h.store.read_registrations()

        second = await apply_plan(h, planned, mode=mode)

        assert second["outcome"] == OUTCOME_ALREADY_RETIRED
        assert second["idempotent"] is True
        assert second["success"] is True
        _assert_nothing_retired(second)
        assert await h.store.read_registrations() == rows_after_first
        assert {await status_of(h, i) for i in _ids(gone)} == {"retired"}


async def test_an_empty_target_list_is_nothing_requested(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        await stale_fleet(h, 1)
        planned = await plan(h)

        result = await apply_plan(h, planned, identities=[])

        assert result["outcome"] == OUTCOME_NOTHING_REQUESTED
        assert result["requested_count"] == 0
        _assert_nothing_retired(result)
        assert await _all_active(h)


def _chunked(write_chunk: int) -> AppSettings:
    """Default settings, but apply writes ``write_chunk`` targets per batch."""
    return AppSettings(
        liveness=default_settings().liveness,
        retirement=default_settings().retirement,
        writer=WriterSettings(apply=ApplySettings(write_chunk=write_chunk)),
    )


async def test_a_failing_transaction_rolls_back_every_retirement(tmp_path: Path) -> None:
    probes = ExplodingReprobe(host_id="host-a", boot_id="boot-1", explode_on=2)
    # One target per batch, so the first target is written before the second re-probe.
    async with harness(tmp_path, probes=probes, settings=_chunked(1)) as h:
        gone, _ = await stale_fleet(h, 2)
        planned = await plan(h)
        rows_before = await h.store.read_registrations()
        probes.armed = True

        result = await apply_plan(h, planned)

        # The first target's guarded UPDATE had run before the second re-probe blew up.
        assert len(probes.reprobes) == 2
        assert result["outcome"] == OUTCOME_TRANSACTION_FAILED
        assert result["success"] is False
        _assert_nothing_retired(result)
        assert "synthetic probe failure" in result["reasons"][0]
        assert {p["worker_identity"] for p in result["preserved"]} == set(_ids(gone))
        assert await h.store.read_registrations() == rows_before
        # The writer survived and the next apply succeeds.
        probes.armed = False
        again = await apply_plan(h, planned)
        assert again["outcome"] == OUTCOME_APPLIED
        assert again["retired_count"] == 2


class _LeaseAfterFirstBatch(TxProxy):
    """Takes a lease inside the transaction once the first batch has been written."""

    def __init__(self, tx: Any) -> None:
        super().__init__(tx)
        self.batches = 0

    async def retire_guarded_many(
        self,
        expected: Sequence[Mapping[str, Any]],
        *,
        retired_at: str,
        retired_by: str,
        reason: str,
    ) -> list[bool]:
        matched = await self._tx.retire_guarded_many(
            expected, retired_at=retired_at, retired_by=retired_by, reason=reason
        )
        self.batches += 1
        if self.batches == 1:
            await self._tx.upsert_lease(lease("l-mid-apply", owner_pid=1))
        return matched


async def test_a_lease_fence_moving_between_batches_rolls_everything_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with harness(tmp_path, settings=_chunked(2)) as h:
        await stale_fleet(h, 5)
        planned = await plan(h)
        rows_before = await h.store.read_registrations()
        wrap_store_writes(monkeypatch, h, _LeaseAfterFirstBatch)

        result = await apply_plan(h, planned)

        assert result["outcome"] == OUTCOME_TRANSACTION_FAILED
        assert "LeaseFenceMoved" in result["reasons"][0]
        _assert_nothing_retired(result)
        assert await h.store.read_registrations() == rows_before


@pytest.mark.parametrize("write_chunk", [1, 2, 3, 128])
async def test_batched_writes_report_every_target_in_order(
    tmp_path: Path, write_chunk: int
) -> None:
    probes = SplitProbes(host_id="host-a", boot_id="boot-1")
    async with harness(tmp_path, probes=probes, settings=_chunked(write_chunk)) as h:
        gone, _ = await stale_fleet(h, 5)
        planned = await plan(h)
        targets = list(planned["candidate_worker_identities"])
        by_id = {str(w["worker_identity"]): w for w in gone}
        back = [by_id[targets[1]], by_id[targets[3]]]
        for worker in back:
            probes.reprobe[int(worker["pid"])] = ProcessEvidence(
                pid=int(worker["pid"]), alive=True, start_time="ticks-newcomer"
            )

        result = await apply_plan(h, planned)

        assert result["outcome"] == OUTCOME_APPLIED
        assert [r["worker_identity"] for r in result["retired"]] == [
            targets[0],
            targets[2],
            targets[4],
        ]
        assert [(p["worker_identity"], p["reason_code"]) for p in result["preserved"]] == [
            (targets[1], REASON_LIVENESS_REPROBE),
            (targets[3], REASON_LIVENESS_REPROBE),
        ]
        statuses = {i: await status_of(h, i) for i in targets}
        assert statuses == {
            i: ("active" if i in (targets[1], targets[3]) else "retired") for i in targets
        }


async def test_mass_retirement_guard_refuses_with_its_numbers(tmp_path: Path) -> None:
    guarded = AppSettings(
        liveness=default_settings().liveness,
        retirement=default_settings().retirement,
        writer=WriterSettings(apply=ApplySettings(mass_guard_share=0.5, mass_guard_floor=2)),
    )
    async with harness(tmp_path, settings=guarded) as h:
        await stale_fleet(h, 3, live=1)
        planned = await plan(h)
        assert planned["candidate_count"] == 3

        result = await apply_plan(h, planned)

        assert result["outcome"] == OUTCOME_MASS_GUARD
        assert result["success"] is False
        _assert_nothing_retired(result)
        assert result["mass_guard"] == {
            "would_retire": 3,
            "host_active_rows": 4,
            "max_share": 0.5,
            "floor": 2,
            "settings": {"retirement.mass_guard_share": 0.5, "retirement.mass_guard_floor": 2},
        }
        (reason,) = result["reasons"]
        # The operator is told which knobs refused and what they are set to.
        assert "retirement.mass_guard_share = 0.5 (50%)" in reason
        assert "retirement.mass_guard_floor = 2 rows" in reason
        assert await _all_active(h)
        # Slicing the plan into requests the guard would let through is refused too.
        subset = await apply_plan(h, planned, identities=planned["candidate_worker_identities"][:2])
        assert subset["outcome"] == OUTCOME_CANDIDATE_SUBSET
        assert subset["omitted_candidates"] == planned["candidate_worker_identities"][2:]
        _assert_nothing_retired(subset)
        assert await _all_active(h)


async def test_default_guard_lets_a_small_fleet_be_cleaned_up(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        await stale_fleet(h, 5)
        planned = await plan(h)

        result = await apply_plan(h, planned)

        assert result["outcome"] == OUTCOME_APPLIED
        assert result["retired_count"] == 5


# --- per-target reasons ----------------------------------------------------------------


async def test_an_unknown_identity_is_reported_missing_not_invented(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        gone, _ = await stale_fleet(h, 1)
        planned = await plan(h)

        result = await apply_plan(
            h, planned, identities=[*planned["candidate_worker_identities"], "wkr-ghost"]
        )

        assert result["outcome"] == OUTCOME_APPLIED
        assert result["requested_count"] == 2
        assert [r["worker_identity"] for r in result["retired"]] == _ids(gone)
        assert [(p["worker_identity"], p["reason_code"]) for p in result["preserved"]] == [
            ("wkr-ghost", REASON_ROW_MISSING)
        ]
        assert "wkr-ghost" not in await rows_by_identity(h)


async def test_a_live_target_appended_to_the_list_keeps_its_fresh_reason(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        gone, running = await stale_fleet(h, 1, live=1)
        planned = await plan(h)
        live_id = str(running[0]["worker_identity"])

        result = await apply_plan(
            h, planned, identities=[*planned["candidate_worker_identities"], live_id]
        )

        assert result["outcome"] == OUTCOME_APPLIED
        assert [r["worker_identity"] for r in result["retired"]] == _ids(gone)
        (kept,) = result["preserved"]
        assert kept["worker_identity"] == live_id
        assert kept["reason_code"] == REASON_WORKER_LIVE
        assert kept["evidence"]["live"] is True
        assert await status_of(h, live_id) == "active"


class _BeatFirst(TxProxy):
    """Moves the rows' heartbeats inside the transaction just before the guarded UPDATE."""

    async def retire_guarded(
        self, expected: Mapping[str, Any], *, retired_at: str, retired_by: str, reason: str
    ) -> bool:
        later = format_stamp(START + timedelta(days=1))
        await self._tx.touch_heartbeats([(str(expected["worker_identity"]), later)])
        return await self._tx.retire_guarded(
            expected, retired_at=retired_at, retired_by=retired_by, reason=reason
        )

    async def retire_guarded_many(
        self,
        expected: Sequence[Mapping[str, Any]],
        *,
        retired_at: str,
        retired_by: str,
        reason: str,
    ) -> list[bool]:
        later = format_stamp(START + timedelta(days=1))
        await self._tx.touch_heartbeats([(str(row["worker_identity"]), later) for row in expected])
        return await self._tx.retire_guarded_many(
            expected, retired_at=retired_at, retired_by=retired_by, reason=reason
        )


async def test_a_guarded_update_that_matches_nothing_is_row_changed_since_plan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with harness(tmp_path) as h:
        gone, _ = await stale_fleet(h, 1)
        planned = await plan(h)
        wrap_store_writes(monkeypatch, h, _BeatFirst)

        result = await apply_plan(h, planned)

        assert result["outcome"] == OUTCOME_APPLIED
        _assert_nothing_retired(result)
        assert [(p["worker_identity"], p["reason_code"]) for p in result["preserved"]] == [
            (gone[0]["worker_identity"], REASON_ROW_CHANGED)
        ]
        assert await status_of(h, str(gone[0]["worker_identity"])) == "active"


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("how", ["revived", "reused"])
async def test_a_pid_back_at_the_reprobe_is_refused(tmp_path: Path, mode: Mode, how: str) -> None:
    probes = SplitProbes(host_id="host-a", boot_id="boot-1")
    async with harness(tmp_path, probes=probes) as h:
        gone, _ = await stale_fleet(h, 2)
        planned = await plan(h)
        back = gone[1]
        start = str(back["process_start_time"]) if how == "revived" else "ticks-newcomer"
        probes.reprobe[int(back["pid"])] = ProcessEvidence(
            pid=int(back["pid"]), alive=True, start_time=start
        )

        result = await apply_plan(h, planned, mode=mode)

        assert result["outcome"] == OUTCOME_APPLIED
        assert [r["worker_identity"] for r in result["retired"]] == [gone[0]["worker_identity"]]
        (kept,) = result["preserved"]
        assert kept["worker_identity"] == back["worker_identity"]
        assert kept["reason_code"] == REASON_LIVENESS_REPROBE
        if how == "reused":
            assert "ticks-newcomer" in kept["detail"]
        assert await status_of(h, str(back["worker_identity"])) == "active"
        assert int(back["pid"]) in probes.probed


async def test_an_unprobeable_pid_at_the_reprobe_is_refused(tmp_path: Path) -> None:
    probes = SplitProbes(host_id="host-a", boot_id="boot-1")
    async with harness(tmp_path, probes=probes) as h:
        gone, _ = await stale_fleet(h, 1)
        planned = await plan(h)
        pid = int(gone[0]["pid"])
        probes.reprobe[pid] = ProcessEvidence(pid=pid, alive=None, start_time=None)

        result = await apply_plan(h, planned)

        _assert_nothing_retired(result)
        assert [p["reason_code"] for p in result["preserved"]] == [REASON_LIVENESS_REPROBE]


# --- narrowing and widening ------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
async def test_apply_of_a_subset_of_the_plan_is_refused_as_a_subset(
    tmp_path: Path, mode: Mode
) -> None:
    async with harness(tmp_path) as h:
        await stale_fleet(h, 3)
        planned = await plan(h)
        chosen = planned["candidate_worker_identities"][:1]

        result = await apply_plan(h, planned, mode=mode, identities=chosen)

        assert result["outcome"] == OUTCOME_CANDIDATE_SUBSET
        assert result["omitted_candidates"] == planned["candidate_worker_identities"][1:]
        (reason,) = result["reasons"]
        assert "leaves out 2 of the plan's 3 candidates" in reason
        assert [(p["worker_identity"], p["reason_code"]) for p in result["preserved"]] == [
            (chosen[0], OUTCOME_CANDIDATE_SUBSET)
        ]
        _assert_nothing_retired(result)
        assert await _all_active(h)


async def test_strict_subset_is_refused_when_a_protection_appears_after_plan(
    tmp_path: Path,
) -> None:
    async with harness(tmp_path) as h:
        gone, _ = await stale_fleet(h, 3)
        planned = await plan(h)
        chosen = [str(gone[0]["worker_identity"])]
        # The protection lands on a candidate the caller did not even ask for.
        await h.handle.upsert_lease(lease("l-other", session_id=str(gone[2]["session_id"])))

        result = await apply_plan(h, planned, identities=chosen)

        assert result["outcome"] == OUTCOME_CANDIDATES_MOVED
        _assert_nothing_retired(result)
        assert await _all_active(h)


@pytest.mark.parametrize(
    ("change", "outcome"),
    [("superset", OUTCOME_SCOPE_MOVED), ("swapped", OUTCOME_CANDIDATE_SUBSET)],
)
async def test_scoped_apply_of_a_different_set_than_planned_retires_nothing(
    tmp_path: Path, change: str, outcome: str
) -> None:
    async with harness(tmp_path) as h:
        _, running = await stale_fleet(h, 2, live=1)
        planned = await plan(h)
        candidates = list(planned["candidate_worker_identities"])
        chosen = {
            # A wider request moves the scope token; one that drops a candidate is a subset.
            "superset": [*candidates, str(running[0]["worker_identity"])],
            "swapped": [candidates[0], str(running[0]["worker_identity"])],
        }[change]

        result = await apply_plan(h, planned, mode="scoped", identities=chosen)

        assert result["outcome"] == outcome
        _assert_nothing_retired(result)
        assert await _all_active(h)


async def test_live_heartbeats_between_plan_and_apply(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        gone, running = await stale_fleet(h, 2, live=2)
        planned = await plan(h)
        await h.clock.advance(3)
        for worker in running:
            assert (await h.beat(worker)).ok

        strict = await apply_plan(h, planned)
        assert strict["outcome"] == OUTCOME_REGISTRY_MOVED
        _assert_nothing_retired(strict)
        assert await _all_active(h)

        scoped = await apply_plan(h, planned, mode="scoped")
        assert scoped["outcome"] == OUTCOME_APPLIED
        assert sorted(r["worker_identity"] for r in scoped["retired"]) == _ids(gone)
        for worker in running:
            assert await status_of(h, str(worker["worker_identity"])) == "active"


# --- structured result and the fleet afterwards ----------------------------------------


async def test_structured_fields_of_a_blocked_and_an_applied_result(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        gone, _ = await stale_fleet(h, 1)
        planned = await plan(h)
        pid = int(gone[0]["pid"])
        start = str(gone[0]["process_start_time"])
        h.probes.revive(pid, start)

        blocked = await apply_plan(h, planned)
        assert blocked["outcome"] == OUTCOME_CANDIDATES_MOVED
        _assert_nothing_retired(blocked)
        assert blocked["requested_count"] == 1
        assert blocked["compared_token"] == "registry_fingerprint"
        assert blocked["expected_registry_fingerprint"] == planned["registry_fingerprint"]
        assert blocked["expected_candidate_fingerprint"] == planned["candidate_fingerprint"]
        assert blocked["acting_identity"] == RETIRER.name
        assert blocked["reasons"]

        h.probes.kill(pid)
        applied = await apply_plan(h, planned, mode="scoped")
        assert applied["outcome"] == OUTCOME_APPLIED
        assert applied["compared_token"] == "scope_fingerprint"
        assert applied["expected_scope_fingerprint"] == planned["scope_fingerprint"]
        assert "expected_registry_fingerprint" not in applied
        assert applied["acting_identity"] == RETIRER.name
        assert applied["profile"] == RETIRER.name
        assert applied["role_kind"] == RETIRER.role_kind
        (retired,) = applied["retired"]
        assert retired["reason_code"] == REASON_ELIGIBLE
        assert retired["retired_by"] == RETIRER.name
        assert retired["evidence"]["worker_identity"] == gone[0]["worker_identity"]
        assert retired["evidence"]["pid_alive"] is False
        assert applied["retired_at"] == retired["retired_at"]


async def test_post_apply_never_claims_safety_while_a_legacy_live_worker_remains(
    tmp_path: Path,
) -> None:
    async with harness(tmp_path) as h:
        await ensure_swept(h)
        dead = await enroll(h)
        legacy = await enroll(h, namespace="reviewer", instance="legacy-pid-1")
        h.probes.kill(int(dead["pid"]))
        await h.clock.advance(PAST_TTL)
        assert (await h.beat(legacy)).ok
        planned = await plan(h)
        assert planned["candidate_worker_identities"] == [dead["worker_identity"]]

        result = await apply_plan(h, planned)

        assert result["retired_count"] == 1
        post = result["post_apply"]
        assert post["available"] is True
        assert post["stale_worker_count"] == 0
        assert post["live_worker_count"] == 1
        assert post["historical_worker_count"] == 1
        assert post["live_fleet_safe"] is False
        blockers = {b["classification"] for b in post["remaining_blockers"]}
        assert CLASS_LEGACY_INCOMPLETE in blockers
        legacy_blockers = [
            b for b in post["remaining_blockers"] if b["classification"] == CLASS_LEGACY_INCOMPLETE
        ]
        assert legacy["worker_identity"] in legacy_blockers[0]["worker_identities"]
        assert post["retired_still_counted_live"] == []
        assert post["retired_still_counted_stale"] == []
        assert post["registry_fingerprint"] != planned["registry_fingerprint"]


async def test_a_retired_row_is_historical_and_its_heartbeat_is_refused(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        gone, running = await stale_fleet(h, 1, live=1)
        before = await h.handle.snapshot(READER)
        assert before["stale_worker_count"] == 1
        assert before["historical_worker_count"] == 0
        planned = await plan(h)
        assert (await apply_plan(h, planned))["retired_count"] == 1

        after = await h.handle.snapshot(READER)

        assert after["stale_worker_count"] == 0
        assert after["historical_worker_count"] == 1
        assert after["live_worker_count"] == 1
        row_before = await h.row(str(gone[0]["worker_identity"]))
        refused = await h.beat(gone[0])
        assert refused.ok is False
        assert refused.code == NOT_ACTIVE
        assert await h.row(str(gone[0]["worker_identity"])) == row_before
        assert (await h.beat(running[0])).ok


# --- gates before the transaction ------------------------------------------------------


@pytest.mark.parametrize("missing", ["host", "boot"])
async def test_apply_refuses_when_the_supervisor_cannot_vouch_for_its_host_or_boot(
    tmp_path: Path, missing: str
) -> None:
    async with harness(tmp_path) as h:
        await stale_fleet(h, 1)
        planned = await plan(h)
        if missing == "host":
            h.probes.set_host_id(None)
        else:
            h.probes.set_boot_id(None)

        result = await apply_plan(h, planned)

        assert result["outcome"] == OUTCOME_REFUSED
        assert result["success"] is False
        _assert_nothing_retired(result)
        assert "host or boot identity is unknown" in result["reasons"][0]
        assert result["fencing_context"][f"{missing}_id"] is None
        assert await _all_active(h)


async def test_apply_refuses_until_a_liveness_sweep_has_completed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def never_completes(self: LivenessActor, tg: object = None) -> None:
        raise StoreError("sweep cannot read the registry")

    # Patched before start-up: the actor's sweeps fail from the first one on.
    monkeypatch.setattr(LivenessActor, "sweep", never_completes)
    async with harness(tmp_path) as h:
        worker = await enroll(h)
        h.probes.kill(int(worker["pid"]))
        await h.clock.advance(PAST_TTL)
        assert (await h.handle.liveness_status()).sweeps_completed == 0
        planned = await plan(h)
        assert planned["candidate_worker_identities"] == [worker["worker_identity"]]

        result = await apply_plan(h, planned)

        assert result["outcome"] == OUTCOME_REFUSED
        _assert_nothing_retired(result)
        assert "no liveness sweep has completed" in result["reasons"][0]
        assert await status_of(h, str(worker["worker_identity"])) == "active"


async def test_apply_refuses_when_leases_cannot_be_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with harness(tmp_path) as h:
        await stale_fleet(h, 1)
        planned = await plan(h)

        async def unreadable(*, status: str | None = None) -> list[dict[str, Any]]:
            raise StoreError("lease table is unreadable")

        monkeypatch.setattr(h.store, "read_leases", unreadable)

        result = await apply_plan(h, planned)
        assert result["outcome"] == OUTCOME_REFUSED
        _assert_nothing_retired(result)
        assert "lease owners are unknown" in result["reasons"][0]
        assert await _all_active(h)
        # Planning on an unknown owner set is refused as well.
        refused_plan = await h.handle.plan(READER)
        assert refused_plan["success"] is False


async def test_apply_refuses_when_the_daemon_cohort_is_contested(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        gone, _ = await stale_fleet(h, 1)
        planned = await plan(h)
        template = await h.row(str(gone[0]["worker_identity"]))
        contested = []
        for n, namespace in enumerate(("merger", "controller")):
            pid = h.spawn()
            row = dict(template)
            row.update(
                worker_identity=f"wkr-contested-{n}",
                client_instance_id=instance_id(f"contested-{n}"),
                namespace=namespace,
                session_id=f"sess-contested-{n}",
                generation_id="gen-shared",
                pid=pid,
                process_identity=f"host-a:{pid}:ticks-{pid}",
                process_start_time=f"ticks-{pid}",
            )
            contested.append(row)
        async with h.store.write() as tx:
            for row in contested:
                await tx.insert_registration(row)

        result = await apply_plan(h, planned)

        assert result["outcome"] == OUTCOME_REFUSED
        _assert_nothing_retired(result)
        assert result["blocker_kind"] == "generation_contested"
        assert result["cohort"]["contested_generations"] == ["gen-shared"]
        assert result["cohort"]["blocked_worker_identities"] == [
            "wkr-contested-0",
            "wkr-contested-1",
        ]
        assert await _all_active(h)


@pytest.mark.parametrize("given", ["both", "neither"])
async def test_apply_needs_exactly_one_registry_token(tmp_path: Path, given: str) -> None:
    async with harness(tmp_path) as h:
        await stale_fleet(h, 1)
        planned = await plan(h)
        token = str(planned["registry_fingerprint"]) if given == "both" else None
        scope = str(planned["scope_fingerprint"]) if given == "both" else None

        result = await h.handle.apply(
            RETIRER,
            registry_fingerprint=token,
            scope_fingerprint=scope,
            candidate_fingerprint=str(planned["candidate_fingerprint"]),
            worker_identities=planned["candidate_worker_identities"],
        )

        assert result["outcome"] == OUTCOME_REFUSED
        _assert_nothing_retired(result)
        assert "exactly one" in result["reasons"][0]
        assert await _all_active(h)
