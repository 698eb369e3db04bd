"""The mass-retirement guard on one machine: a floor that lets a crashed laptop clean up,
and a one-off override that needs the retire grant and is audited."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from actors.retirement.apply_tx import ApplySettings
from actors.writer.actor import WriterSettings
from supervisor.daemon.app import AppSettings
from supervisor.policy.retirement.reasons import OUTCOME_APPLIED, OUTCOME_MASS_GUARD
from tests.actors.harness import READER, RETIRER, Harness, default_settings, harness
from tests.actors.helpers_retirement import apply_plan, plan, stale_fleet, status_of

pytestmark = pytest.mark.anyio

#: Share 0.5 with floor 2: three dead of four active rows is refused.
GUARDED = AppSettings(
    liveness=default_settings().liveness,
    retirement=default_settings().retirement,
    writer=WriterSettings(apply=ApplySettings(mass_guard_share=0.5, mass_guard_floor=2)),
)


async def _apply_overriding(h: Harness, planned: Any, **profile: Any) -> Any:
    return await h.handle.apply(
        profile.get("profile", RETIRER),
        registry_fingerprint=str(planned["registry_fingerprint"]),
        candidate_fingerprint=str(planned["candidate_fingerprint"]),
        worker_identities=list(planned["candidate_worker_identities"]),
        override_mass_guard=True,
    )


async def test_the_default_floor_lets_a_laptop_whose_client_crashed_clean_up(
    tmp_path: Path,
) -> None:
    # The reported case: 11 of 16 rows stale on one machine (two client launches gone).
    async with harness(tmp_path) as h:
        gone, _ = await stale_fleet(h, 11, live=5)
        planned = await plan(h)
        assert planned["candidate_count"] == 11

        result = await apply_plan(h, planned)

        assert result["outcome"] == OUTCOME_APPLIED
        assert result["retired_count"] == len(gone)
        assert "mass_guard_overridden" not in result


async def test_an_override_retires_past_the_guard_once_and_is_audited(tmp_path: Path) -> None:
    async with harness(tmp_path, settings=GUARDED) as h:
        gone, _ = await stale_fleet(h, 3, live=1)
        planned = await plan(h)
        refused = await apply_plan(h, planned)
        assert refused["outcome"] == OUTCOME_MASS_GUARD
        assert "override_mass_guard" in refused["reasons"][0]

        result = await _apply_overriding(h, planned)

        assert result["outcome"] == OUTCOME_APPLIED
        assert result["retired_count"] == 3
        assert result["mass_guard_overridden"]["would_retire"] == 3
        assert result["mass_guard_overridden"]["host_active_rows"] == 4
        assert {await status_of(h, str(w["worker_identity"])) for w in gone} == {"retired"}
        applied = [e for e in await h.store.read_audit() if e["action"] == "apply"]
        assert applied[-1]["outcome"] == OUTCOME_APPLIED
        assert applied[-1]["detail"]["mass_guard_overridden"]["floor"] == 2
        # The refusal before it is on file too, with the guard's numbers.
        assert applied[-2]["outcome"] == OUTCOME_MASS_GUARD
        assert applied[-2]["detail"]["mass_guard"]["would_retire"] == 3


async def test_an_override_without_the_retire_grant_retires_nothing(tmp_path: Path) -> None:
    async with harness(tmp_path, settings=GUARDED) as h:
        gone, _ = await stale_fleet(h, 3, live=1)
        planned = await plan(h)

        result = await _apply_overriding(h, planned, profile=READER)

        assert result["success"] is False
        assert result["retired_count"] == 0
        assert {await status_of(h, str(w["worker_identity"])) for w in gone} == {"active"}


async def test_a_reloaded_floor_guards_every_apply_from_then_on(tmp_path: Path) -> None:
    async with harness(tmp_path, settings=GUARDED) as h:
        await stale_fleet(h, 3, live=1)
        planned = await plan(h)
        assert (await apply_plan(h, planned))["outcome"] == OUTCOME_MASS_GUARD

        await h.handle.set_mass_guard(share=0.5, floor=3)

        result = await apply_plan(h, planned)
        assert result["outcome"] == OUTCOME_APPLIED
        assert result["retired_count"] == 3
