"""The daemon's kept fleet counts follow registrations, beats, exits, time and releases."""

from __future__ import annotations

from pathlib import Path

import pytest

from actors.replies import FleetCounts
from tests.actors.harness import READER
from tests.actors.helpers_app import SettledHarness, harness

pytestmark = pytest.mark.anyio

_LIVE = ("active", "live", "author")
_STALE = ("active", "stale", "author")
_HISTORICAL = ("historical", "historical", "")


async def _counts(h: SettledHarness) -> FleetCounts:
    counts = await h.handle.fleet_counts()
    # The kept counts agree with a snapshot's full classification of the same moment.
    snap = await h.handle.snapshot(READER)
    by_state: dict[str, int] = {}
    for worker in snap["workers"]:
        by_state[worker["ownership_state"]] = by_state.get(worker["ownership_state"], 0) + 1
    kept: dict[str, int] = {}
    for (status, ownership, _), count in counts.workers.items():
        if status == "active":
            kept[ownership] = kept.get(ownership, 0) + count
    assert kept == by_state
    return counts


async def test_counts_follow_every_change_without_a_recount(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        assert (await _counts(h)).workers == {}
        first = await h.register()
        second = await h.register()
        third = await h.register()
        await h.settle()
        assert (await _counts(h)).workers == {_LIVE: 3}

        # Time alone: the second's TTL passes without a beat, the others beat.
        ttl = float(first["heartbeat_ttl_seconds"])
        await h.advance(ttl / 2)
        await h.beat(first)
        await h.beat(third)
        await h.advance(ttl / 2 + 0.001)
        assert (await _counts(h)).workers == {_LIVE: 2, _STALE: 1}

        # A beat brings it back.
        await h.beat(second)
        await h.settle()
        assert (await _counts(h)).workers == {_LIVE: 3}

        # An exit: the next sweep calls the third dead, and it stops counting as live.
        h.probes.kill(int(third["pid"]))
        await h.advance(5.0)
        assert (await _counts(h)).workers == {_LIVE: 2, _STALE: 1}

        # A release leaves the active rows for history.
        result = await h.release(first)
        assert result.ok, result
        assert (await _counts(h)).workers == {_LIVE: 1, _STALE: 1, _HISTORICAL: 1}


async def test_status_reports_verdict_counts_kept_by_the_liveness_actor(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        alive = await h.register()
        gone = await h.register()
        h.probes.kill(int(gone["pid"]))
        await h.advance(5.0)
        counts = await h.handle.liveness_counts()
        status = await h.handle.liveness_status()
    assert counts.sweeps_completed == status.sweeps_completed >= 1
    states: dict[str, int] = {}
    for verdict in status.verdicts:
        states[verdict.state] = states.get(verdict.state, 0) + 1
    assert dict(counts.states) == states == {"alive": 1, "dead": 1}
    assert alive["worker_identity"] != gone["worker_identity"]
