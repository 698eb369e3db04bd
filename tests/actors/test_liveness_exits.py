"""Liveness actor: an exit a pidfd observed overrules a probe that finds that incarnation only."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from actors.liveness.actor import LivenessSettings
from actors.liveness.inbox import ProbeNow
from actors.mailbox import ask
from supervisor.clock import FakeClock, MonotonicWall
from supervisor.policy.evidence import PidEvidence
from supervisor.policy.incarnation import start_of
from tests.actors.harness import START
from tests.actors.helpers_actors import LivenessRig, registration_row, running_liveness, until
from tests.actors.helpers_app import settle
from tests.actors.helpers_store import RecordingStore
from tests.actors.test_liveness import db_with, pipe_exits, status_of
from tests.fakes import ScriptedProbes

pytestmark = pytest.mark.anyio

SWEEP = 5.0


async def probe_now(rig: LivenessRig, *pids: int) -> dict[int, PidEvidence]:
    evidence: Mapping[int, PidEvidence] = await ask(
        rig.inbox, lambda reply: ProbeNow(pids=pids, reply=reply), actor="liveness"
    )
    return dict(evidence)


@dataclass
class Exited:
    rig: LivenessRig
    probes: ScriptedProbes
    store: RecordingStore
    clock: FakeClock
    row: dict[str, Any]


@asynccontextmanager
async def exit_observed(tmp_path: Path, start: str) -> AsyncIterator[Exited]:
    """A row registered with ``start``, its process watched through a (pipe) pidfd and
    seen to exit; the probe still finds a live process with that start at its pid."""
    row = registration_row(pid=800, start_time=start)
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
            # Before any exit, ProbeNow is the OS's answer: the start, as a stat read has it.
            assert await probe_now(rig, 800) == {
                800: PidEvidence(alive=True, start_time=start_of(start))
            }
            exits.exit(800)

            async def exited() -> bool:
                return any(v.state == "dead" for v in (await status_of(rig)).verdicts)

            await until(exited)
            (verdict,) = (await status_of(rig)).verdicts
            # The verdict names the incarnation whose exit was observed.
            assert verdict.evidence == PidEvidence(alive=False, start_time=start)
            yield Exited(rig=rig, probes=probes, store=store, clock=fake, row=row)


async def test_probe_now_honours_the_observed_exit_of_that_incarnation_only(
    tmp_path: Path,
) -> None:
    # Registered with its pidfd inode, as the heartbeat actor records it on pidfs kernels;
    # the probe reads the start alone, as a stat read does.
    start = "ticks-800@ino-41"
    async with exit_observed(tmp_path, start) as seen:
        rig, probes = seen.rig, seen.probes
        # The OS probe still finds that incarnation (a stat read racing the exit, a
        # platform whose probe cannot see zombies): identified, it is the one that
        # exited, and the observed exit wins.
        assert await probe_now(rig, 800) == {800: PidEvidence(alive=False, start_time=start)}
        # Another process that got the pid within the same clock tick has that start
        # but another inode: alive, named by its own token...
        probes.revive(800, "ticks-800@ino-42")
        assert await probe_now(rig, 800) == {
            800: PidEvidence(alive=True, start_time="ticks-800@ino-42")
        }
        # ...and so is another process under the same pid number...
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
        async with seen.store.write() as tx:
            assert await tx.set_status(
                seen.row["worker_identity"],
                expected_status="active",
                new_status="released",
                stamp_column=None,
                stamp=None,
            )
        await seen.clock.advance(SWEEP)
        await settle(seen.clock, seen.store)
        assert (await status_of(rig)).verdicts == ()
        assert await probe_now(rig, 800) == {800: PidEvidence(alive=True, start_time="ticks-800")}


async def test_an_exit_no_token_tells_apart_from_a_live_process_is_unknown(
    tmp_path: Path,
) -> None:
    """Without inodes (an older kernel or row), equal starts are ambiguous: the exited
    process, or another that got its pid within one clock tick. Neither dead (it may be
    that other, live process) nor alive (it may be the one that exited): cannot tell."""
    async with exit_observed(tmp_path, "ticks-800") as seen:
        rig, probes = seen.rig, seen.probes
        assert await probe_now(rig, 800) == {800: PidEvidence(alive=None, start_time=None)}
        probes.revive(800, "ticks-reused")
        assert await probe_now(rig, 800) == {
            800: PidEvidence(alive=True, start_time="ticks-reused")
        }
        probes.kill(800)
        assert await probe_now(rig, 800) == {800: PidEvidence(alive=False, start_time=None)}
