"""Liveness actor: sweeps on the clock, chunking, pid reuse, exit watches, ProbeNow."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import replace
from pathlib import Path

import anyio
import pytest

from actors.liveness.actor import LivenessSettings
from actors.liveness.inbox import LivenessStatusQuery, ProbeNow, Watch
from actors.mailbox import ask
from actors.mailbox import let_others_run as _let_others_run
from actors.replies import LivenessStatus, LivenessVerdict
from supervisor.clock import FakeClock, MonotonicWall
from supervisor.policy.evidence import PidEvidence
from supervisor.store.sqlite.open import open_sqlite_store
from supervisor.system.probes import ProcessEvidence
from tests.actors.harness import START, default_settings
from tests.actors.helpers_actors import LivenessRig, registration_row, running_liveness, until
from tests.actors.helpers_app import SettledHarness, harness, settle
from tests.actors.helpers_store import RecordingStore
from tests.fakes import ScriptedProbes

pytestmark = pytest.mark.anyio

SWEEP = 5.0


class CountingProbes(ScriptedProbes):
    """Records the size of every probe_many call, i.e. every sweep chunk."""

    def __init__(self) -> None:
        super().__init__(host_id="host-a", boot_id="boot-1")
        self.chunks: list[int] = []

    def probe_many(self, pids: Sequence[int]) -> list[ProcessEvidence]:
        self.chunks.append(len(pids))
        return super().probe_many(pids)


async def verdicts(h: SettledHarness) -> dict[str, LivenessVerdict]:
    status = await h.handle.liveness_status()
    return {v.worker_identity: v for v in status.verdicts}


async def test_sweeps_run_on_the_clock_and_only_on_the_clock(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        first = (await h.handle.liveness_status()).sweeps_completed
        assert first == 1  # the start-up sweep
        await h.advance(SWEEP - 0.001)
        assert (await h.handle.liveness_status()).sweeps_completed == 1
        await h.advance(0.001)
        assert (await h.handle.liveness_status()).sweeps_completed == 2
        # One period per advance: FakeClock's settle cannot see aiosqlite's thread, so one
        # advance across several periods would outrun a sweep that is still reading.
        for _ in range(4):
            await h.advance(SWEEP)
        assert (await h.handle.liveness_status()).sweeps_completed == 6


async def test_registered_live_process_is_judged_alive_by_the_next_sweep(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        reg = await h.register()
        identity = str(reg["worker_identity"])
        assert identity not in await verdicts(h)  # nothing is known before a sweep
        await h.advance(SWEEP)
        verdict = (await verdicts(h))[identity]
        assert verdict.state == "alive"
        assert verdict.source == "sweep"
        assert verdict.pid == int(reg["pid"])
        assert verdict.evidence == PidEvidence(alive=True, start_time=reg["process_start_time"])
        assert verdict.observed_at == h.clock.monotonic()


async def test_pid_reuse_makes_the_registered_incarnation_dead(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        reg = await h.register()
        identity, pid = str(reg["worker_identity"]), int(reg["pid"])
        await h.advance(SWEEP)
        assert (await verdicts(h))[identity].state == "alive"
        h.probes.revive(pid, "ticks-999999")  # same pid number, another process
        await h.advance(SWEEP)
        verdict = (await verdicts(h))[identity]
        assert verdict.state == "dead"
        # The evidence shows why: something is alive under that pid, but not ours.
        assert verdict.evidence == PidEvidence(alive=True, start_time="ticks-999999")
        assert reg["process_start_time"] != "ticks-999999"


async def test_killed_pid_is_dead_and_unprobeable_pid_is_unknown(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        killed = await h.register()
        hidden = await h.register(namespace="reviewer")
        await h.advance(SWEEP)
        h.probes.kill(int(killed["pid"]))
        h.probes.forget(int(hidden["pid"]))  # e.g. permission denied: cannot tell
        await h.advance(SWEEP)
        found = await verdicts(h)
        dead = found[str(killed["worker_identity"])]
        assert (dead.state, dead.source) == ("dead", "sweep")
        assert dead.evidence == PidEvidence(alive=False, start_time=None)
        unknown = found[str(hidden["worker_identity"])]
        assert (unknown.state, unknown.source) == ("unknown", "sweep")
        assert unknown.evidence.alive is None


async def test_row_of_another_host_is_unknown_and_never_probed_here(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        foreign = registration_row(pid=31337, host_id="host-b")
        h.probes.set(31337, alive=False)  # a local pid with that number says nothing
        async with h.store.write() as tx:
            await tx.insert_registration(foreign)
        await h.advance(SWEEP)
        verdict = (await verdicts(h))[foreign["worker_identity"]]
        assert (verdict.state, verdict.source) == ("unknown", "foreign_host")
        assert verdict.evidence.alive is None
        assert 31337 not in h.probes.probed


async def test_a_sweep_judges_every_row_in_bounded_chunks(tmp_path: Path) -> None:
    probes = CountingProbes()
    settings = replace(
        default_settings(),
        liveness=LivenessSettings(sweep_interval_seconds=SWEEP, sweep_chunk=3, use_pidfd=False),
    )
    async with harness(tmp_path, settings=settings, probes=probes) as h:
        namespaces = ("author", "reviewer", "merger", "controller", "reconciler")
        regs = [await h.register(namespace=namespaces[i % 5]) for i in range(8)]
        probes.chunks.clear()
        await h.advance(SWEEP)
        assert probes.chunks == [3, 3, 2]
        found = await verdicts(h)
        assert set(found) == {str(r["worker_identity"]) for r in regs}
        assert {v.state for v in found.values()} == {"alive"}
        status = await h.handle.liveness_status()
        assert status.sweeps_completed == 2
        # The status is built a chunk at a time too, yet is one complete, sorted snapshot.
        assert [v.worker_identity for v in status.verdicts] == sorted(found)


async def test_verdicts_are_kept_only_for_active_rows(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        reg = await h.register()
        identity = str(reg["worker_identity"])
        await h.advance(SWEEP)
        assert identity in await verdicts(h)
        ack = await h.handle.release(
            identity,
            pid=int(reg["pid"]),
            generation_id=str(reg["generation_id"]),
            fencing_epoch=int(reg["fencing_epoch"]),
        )
        assert ack.ok
        await h.advance(SWEEP)
        assert identity not in await verdicts(h)


# --- a liveness actor on its own inbox ------------------------------------------------------------


@asynccontextmanager
async def db_with(tmp_path: Path, *rows: Mapping[str, object]) -> AsyncIterator[RecordingStore]:
    """The database with ``rows`` in it, behind a proxy that lets tests wait for quiescence."""
    store = await open_sqlite_store(tmp_path / "registry.sqlite3")
    try:
        async with store.write() as tx:
            for row in rows:
                await tx.insert_registration(row)
        yield RecordingStore(store)
    finally:
        await store.close()


async def status_of(rig: LivenessRig) -> LivenessStatus:
    status: LivenessStatus = await ask(
        rig.inbox, lambda reply: LivenessStatusQuery(reply=reply), actor="liveness"
    )
    return status


async def test_probe_now_answers_from_the_os_not_from_the_last_sweep(tmp_path: Path) -> None:
    row = registration_row(pid=700)
    probes = ScriptedProbes(host_id="host-a", boot_id="boot-1")
    probes.set(700, alive=True, start_time=row["process_start_time"])
    probes.set(702, alive=True, start_time="ticks-702")
    fake = FakeClock(wall=START)
    async with (
        db_with(tmp_path, row) as store,
        running_liveness(store, clock=MonotonicWall(fake), probes=probes) as rig,
    ):
        await settle(fake, store)
        assert [v.state for v in (await status_of(rig)).verdicts] == ["alive"]
        probes.kill(700)
        probes.probed.clear()
        evidence: Mapping[int, PidEvidence] = await ask(
            rig.inbox, lambda reply: ProbeNow(pids=(700, 701, 702, 700), reply=reply), actor="x"
        )
        assert dict(evidence) == {
            700: PidEvidence(alive=False, start_time=None),
            701: PidEvidence(alive=None, start_time=None),
            702: PidEvidence(alive=True, start_time="ticks-702"),
        }
        assert sorted(probes.probed) == [700, 701, 702]  # each pid asked once, just now
        # The standing verdict waits for the next sweep; ProbeNow did not go through it.
        assert [v.state for v in (await status_of(rig)).verdicts] == ["alive"]
        await fake.advance(SWEEP)
        await settle(fake, store)
        assert [v.state for v in (await status_of(rig)).verdicts] == ["dead"]


class PipeExits:
    """Stands in for pidfds: each watch gets a pipe's read end; writing to it is the exit."""

    def __init__(self) -> None:
        self.opened: list[tuple[int, str | None]] = []
        self._writers: dict[int, int] = {}
        self.refuse: set[int] = set()

    def __call__(self, pid: int, start_time: str | None) -> int | None:
        self.opened.append((pid, start_time))
        if pid in self.refuse:
            return None
        read_end, write_end = os.pipe()
        self._writers[pid] = write_end
        return read_end

    def exit(self, pid: int) -> None:
        os.write(self._writers[pid], b"x")

    def reader_closed(self, pid: int) -> bool:
        try:
            os.write(self._writers[pid], b"x")
        except BrokenPipeError:
            return True
        return False

    def close(self) -> None:
        for fd in self._writers.values():
            os.close(fd)


@contextmanager
def pipe_exits() -> Iterator[PipeExits]:
    exits = PipeExits()
    try:
        yield exits
    finally:
        exits.close()


async def test_exit_watch_reports_death_without_a_sweep_and_it_is_final(tmp_path: Path) -> None:
    row = registration_row(pid=800)
    start = row["process_start_time"]
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
            # The start-up sweep found it alive and started watching this incarnation.
            assert exits.opened == [(800, start)]
            assert (await status_of(rig)).watched_pids == 1
            sweeps = (await status_of(rig)).sweeps_completed
            exits.exit(800)

            async def exited() -> bool:
                return any(
                    v.source == "pidfd" and v.state == "dead"
                    for v in (await status_of(rig)).verdicts
                )

            await until(exited)
            status = await status_of(rig)
            assert status.sweeps_completed == sweeps  # no sweep was involved
            assert status.watched_pids == 0
            (verdict,) = status.verdicts
            assert (verdict.worker_identity, verdict.state) == (row["worker_identity"], "dead")
            assert verdict.evidence == PidEvidence(alive=False, start_time=start)
            assert exits.reader_closed(800)
            # A later sweep still sees the pid (a zombie, say): the observed exit stands.
            await fake.advance(SWEEP)
            await settle(fake, store)
            (verdict,) = (await status_of(rig)).verdicts
            assert (verdict.state, verdict.source) == ("dead", "pidfd")


async def test_watch_message_starts_a_watch_and_leaving_active_cancels_it(tmp_path: Path) -> None:
    row = registration_row(pid=900)
    start = row["process_start_time"]
    probes = ScriptedProbes(host_id="host-a", boot_id="boot-1")
    probes.set(900, alive=True, start_time=start)
    probes.set(901, alive=True, start_time="ticks-901")
    fake = FakeClock(wall=START)
    settings = LivenessSettings(sweep_interval_seconds=SWEEP, use_pidfd=True)
    with pipe_exits() as exits:
        exits.refuse.add(901)
        async with (
            db_with(tmp_path) as store,
            running_liveness(
                store, clock=MonotonicWall(fake), probes=probes, settings=settings, pidfd_open=exits
            ) as rig,
        ):
            await settle(fake, store)
            async with store.write() as tx:
                await tx.insert_registration(row)
            await rig.inbox.send(
                Watch(worker_identity=row["worker_identity"], pid=900, start_time=start)
            )
            # A pid that cannot be opened (gone, or not that incarnation) is not watched.
            await rig.inbox.send(Watch(worker_identity="wkr-other", pid=901, start_time="t"))
            assert (await status_of(rig)).watched_pids == 1
            assert exits.opened == [(900, start), (901, "t")]
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
            status = await status_of(rig)
            assert status.watched_pids == 0
            assert status.verdicts == ()
            assert exits.reader_closed(900)


async def test_a_watched_row_is_vouched_for_by_its_pidfd_and_not_probed_by_sweeps(
    tmp_path: Path,
) -> None:
    row = registration_row(pid=900)
    start = row["process_start_time"]
    probes = ScriptedProbes(host_id="host-a", boot_id="boot-1")
    probes.set(900, alive=True, start_time=start)
    fake = FakeClock(wall=START)
    settings = LivenessSettings(sweep_interval_seconds=SWEEP, use_pidfd=True)
    with pipe_exits() as exits:
        async with (
            db_with(tmp_path) as store,
            running_liveness(
                store, clock=MonotonicWall(fake), probes=probes, settings=settings, pidfd_open=exits
            ) as rig,
        ):
            await settle(fake, store)
            async with store.write() as tx:
                await tx.insert_registration(row)
            await rig.inbox.send(
                Watch(worker_identity=row["worker_identity"], pid=900, start_time=start)
            )
            status = await status_of(rig)
            (verdict,) = status.verdicts
            assert (verdict.state, verdict.source) == ("alive", "pidfd")
            probes.probed.clear()
            swept = status.sweeps_completed
            await fake.advance(SWEEP)
            await settle(fake, store)
            status = await status_of(rig)
            assert status.sweeps_completed > swept
            assert 900 not in probes.probed
            assert [v.source for v in status.verdicts] == ["pidfd"]


async def test_between_sweep_chunks_whatever_fell_due_runs_first() -> None:
    # The reason for two checkpoints between chunks: after one, the sweep's own
    # continuation is ahead of callbacks that fell due meanwhile, so the next chunk
    # would run before them and two chunks would stall the loop as one.
    loop = asyncio.get_running_loop()
    order: list[str] = []
    loop.call_later(0, order.append, "due")
    await anyio.lowlevel.checkpoint()
    order.append("after one checkpoint")
    loop.call_later(0, order.append, "due")
    await _let_others_run()
    order.append("after _let_others_run")
    assert order == ["after one checkpoint", "due", "due", "after _let_others_run"]
