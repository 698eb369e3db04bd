"""Liveness actor: an exit a pidfd observed overrules a probe that still finds that incarnation."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pytest

from actors.liveness.actor import LivenessSettings
from actors.liveness.inbox import ProbeNow
from actors.mailbox import ask
from supervisor.clock import FakeClock, MonotonicWall
from supervisor.policy.evidence import PidEvidence
from tests.actors.harness import START
from tests.actors.helpers_actors import LivenessRig, registration_row, running_liveness, until
from tests.actors.helpers_app import settle
from tests.actors.test_liveness import db_with, pipe_exits, status_of
from tests.fakes import ScriptedProbes

pytestmark = pytest.mark.anyio

SWEEP = 5.0


async def probe_now(rig: LivenessRig, *pids: int) -> dict[int, PidEvidence]:
    evidence: Mapping[int, PidEvidence] = await ask(
        rig.inbox, lambda reply: ProbeNow(pids=pids, reply=reply), actor="liveness"
    )
    return dict(evidence)


async def test_probe_now_honours_the_observed_exit_of_that_incarnation_only(
    tmp_path: Path,
) -> None:
    row = registration_row(pid=800)
    start = str(row["process_start_time"])
    probes = ScriptedProbes(host_id="host-a", boot_id="boot-1")
    probes.set(800, alive=True, start_time=start)
    fake = FakeClock(wall=START)
    settings = LivenessSettings(sweep_interval_seconds=SWEEP, use_pidfd=True)
    with pipe_exits() as exits:
        async with (
            db_with(tmp_path, row) as store,
            running_liveness(
                store, clock=MonotonicWall(fake), probes=probes, settings=settings, pidfd_open=exits
            ) as rig,
        ):
            await settle(fake, store)
            assert exits.opened == [(800, start)]
            # Before any exit, ProbeNow is the OS's answer.
            assert await probe_now(rig, 800) == {800: PidEvidence(alive=True, start_time=start)}
            exits.exit(800)

            async def exited() -> bool:
                return any(v.state == "dead" for v in (await status_of(rig)).verdicts)

            await until(exited)
            (verdict,) = (await status_of(rig)).verdicts
            # The verdict names the incarnation whose exit was observed.
            assert verdict.evidence == PidEvidence(alive=False, start_time=start)

            # The OS probe still finds that incarnation (a stat read racing the exit, a
            # platform whose probe cannot see zombies): the observed exit wins.
            assert await probe_now(rig, 800) == {800: PidEvidence(alive=False, start_time=start)}
            # Another process under the same pid number is not overruled...
            probes.revive(800, "ticks-reused")
            assert await probe_now(rig, 800) == {
                800: PidEvidence(alive=True, start_time="ticks-reused")
            }
            # ...and neither is a probe that cannot say which incarnation it saw.
            probes.set(800, alive=True, start_time=None)
            assert await probe_now(rig, 800) == {800: PidEvidence(alive=True, start_time=None)}
            probes.forget(800)
            assert await probe_now(rig, 800) == {800: PidEvidence(alive=None, start_time=None)}

            # Once the row is no longer active, the observation is dropped with its verdict.
            probes.set(800, alive=True, start_time=start)
            async with store.write() as tx:
                assert await tx.set_status(
                    row["worker_identity"],
                    expected_status="active",
                    new_status="released",
                    stamp_column=None,
                    stamp=None,
                )
            await fake.advance(SWEEP)
            await settle(fake, store)
            assert (await status_of(rig)).verdicts == ()
            assert await probe_now(rig, 800) == {800: PidEvidence(alive=True, start_time=start)}
