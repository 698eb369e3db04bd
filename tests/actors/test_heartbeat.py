"""Heartbeat actor: registration checks, fencing, refusals, coalescing, protocol time."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import anyio
import pytest

from actors.heartbeat.actor import HeartbeatSettings
from actors.heartbeat.inbox import Heartbeat, HeartbeatGroup, Register
from actors.replies import HeartbeatResult, RegisterResult
from supervisor.clock import FakeClock, MonotonicWall
from supervisor.policy.stamps import format_stamp
from supervisor.store.sqlite.open import open_sqlite_store
from tests.actors.harness import INSTANCE, READER, REPO, START
from tests.actors.helpers_actors import ReplyBox, reply_boxes, running_front
from tests.actors.helpers_app import SettledHarness, harness
from tests.actors.helpers_store import RecordingStore
from tests.fakes import ScriptedProbes

pytestmark = pytest.mark.anyio

HOUR = 3600.0


def at(seconds: float) -> str:
    """The stamp protocol time shows `seconds` after the harness started."""
    return format_stamp(START + timedelta(seconds=seconds))


async def worker_states(h: SettledHarness) -> dict[str, str]:
    snap = await h.handle.snapshot(READER)
    assert snap["success"] is True, snap
    out: dict[str, str] = {}
    for worker in snap["workers"]:
        state = "live" if worker["live"] else "stale" if worker["stale"] else "historical"
        out[str(worker["worker_identity"])] = state
    return out


async def beat_with(h: SettledHarness, reg: Mapping[str, Any], **change: Any) -> HeartbeatResult:
    fields: dict[str, Any] = {
        "pid": int(reg["pid"]),
        "generation_id": str(reg["generation_id"]),
        "fencing_epoch": int(reg["fencing_epoch"]),
    }
    fields.update(change)
    return await h.handle.heartbeat(str(reg["worker_identity"]), **fields)


def claims(pid: int, /, **extra: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "client_name": "codex",
        "client_instance_id": INSTANCE,
        "session_id": f"sess-{pid}",
        "namespace": "author",
        "role": "author",
        "profile": "prgs-author",
        "repository_binding": REPO,
    }
    base.update(extra)
    return base


# --- freshness in virtual time ----------------------------------------------------------------


async def test_each_beat_stamps_the_row_with_protocol_time(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        reg = await h.register(heartbeat_ttl_seconds=30.0)
        identity = str(reg["worker_identity"])
        assert reg["started_at"] == reg["last_heartbeat_at"] == at(0)
        assert reg["heartbeat_interval_seconds"] == 10.0
        elapsed = 0.0
        for step in (7.25, 0.5, 12.0, 29.999, 1.0):
            await h.advance(step)
            elapsed += step
            result = await h.beat(reg)
            assert (result.ok, result.code) == (True, "ok")
            assert result.last_heartbeat_at == at(elapsed)
            row = await h.row(identity)
            assert row["last_heartbeat_at"] == at(elapsed)
            assert row["started_at"] == at(0)
            assert (await worker_states(h))[identity] == "live"


async def test_each_row_goes_stale_at_exactly_its_own_ttl(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        short = str((await h.register(heartbeat_ttl_seconds=10.0))["worker_identity"])
        long = str(
            (await h.register(heartbeat_ttl_seconds=25.0, namespace="reviewer"))["worker_identity"]
        )
        await h.advance(9.999)
        assert await worker_states(h) == {short: "live", long: "live"}
        await h.advance(0.001)
        assert await worker_states(h) == {short: "stale", long: "live"}
        await h.advance(14.999)
        assert await worker_states(h) == {short: "stale", long: "live"}
        await h.advance(0.001)
        assert await worker_states(h) == {short: "stale", long: "stale"}


# --- wall-clock steps ----------------------------------------------------------------------------


async def test_forward_wall_step_does_not_make_a_fresh_worker_stale(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        reg = await h.register(heartbeat_ttl_seconds=30.0)
        identity = str(reg["worker_identity"])
        await h.advance(10)
        assert (await h.beat(reg)).ok
        wall_before = h.clock.now()
        h.clock.step_wall(+HOUR)
        assert h.clock.now() - wall_before == timedelta(hours=1)  # the OS clock did jump
        assert (await worker_states(h))[identity] == "live"
        await h.advance(5)
        result = await h.beat(reg)
        # Stamps keep following protocol time, not the stepped wall clock.
        assert result.last_heartbeat_at == at(15)
        assert (await h.row(identity))["last_heartbeat_at"] == at(15)
        await h.advance(29.999)
        assert (await worker_states(h))[identity] == "live"
        await h.advance(0.001)
        assert (await worker_states(h))[identity] == "stale"


async def test_backward_wall_step_does_not_revive_a_stale_worker(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        reg = await h.register(heartbeat_ttl_seconds=30.0)
        identity = str(reg["worker_identity"])
        await h.advance(31)
        assert (await worker_states(h))[identity] == "stale"
        wall_before = h.clock.now()
        h.clock.step_wall(-HOUR)
        assert wall_before - h.clock.now() == timedelta(hours=1)
        assert (await worker_states(h))[identity] == "stale"
        await h.advance(HOUR)
        assert (await worker_states(h))[identity] == "stale"


# --- refusals ----------------------------------------------------------------------------------


async def test_beat_to_retired_row_is_refused_and_does_not_revive_it(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        reg = await h.register()
        identity = str(reg["worker_identity"])
        row = await h.row(identity)
        async with h.store.write() as tx:
            assert await tx.retire_guarded(
                row, retired_at=at(0), retired_by="test", reason="retired by the test"
            )
        await h.advance(5)
        result = await h.beat(reg)
        assert (result.ok, result.code) == (False, "registration_not_active")
        assert "register again" in result.detail
        assert result.last_heartbeat_at is None
        released = await h.handle.release(
            identity,
            pid=int(reg["pid"]),
            generation_id=str(reg["generation_id"]),
            fencing_epoch=int(reg["fencing_epoch"]),
        )
        assert (released.ok, released.code) == (False, "registration_not_active")
        after = await h.row(identity)
        assert after["status"] == "retired"
        assert after["last_heartbeat_at"] == row["last_heartbeat_at"]
        assert after["released_at"] is None


async def test_release_marks_released_and_later_beats_are_refused(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        reg = await h.register()
        identity = str(reg["worker_identity"])
        await h.advance(12.5)
        fencing: dict[str, Any] = {
            "pid": int(reg["pid"]),
            "generation_id": str(reg["generation_id"]),
            "fencing_epoch": int(reg["fencing_epoch"]),
        }
        ack = await h.handle.release(identity, **fencing)
        assert (ack.ok, ack.code) == (True, "ok")
        assert ack.data["released_at"] == at(12.5)
        row = await h.row(identity)
        assert row["status"] == "released"
        assert row["released_at"] == at(12.5)
        await h.advance(1)
        result = await h.beat(reg)
        assert (result.ok, result.code) == (False, "registration_not_active")
        again = await h.handle.release(identity, **fencing)
        assert (again.ok, again.code) == (False, "registration_not_active")
        row = await h.row(identity)
        assert row["status"] == "released"
        assert row["last_heartbeat_at"] == at(0)
        assert row["released_at"] == at(12.5)


@pytest.mark.parametrize(
    "change",
    [{"pid": 99999}, {"generation_id": "gen-not-mine"}, {"fencing_epoch": 7}],
    ids=["pid", "generation", "epoch"],
)
async def test_beat_or_release_with_wrong_fencing_is_refused(
    tmp_path: Path, change: dict[str, Any]
) -> None:
    async with harness(tmp_path) as h:
        reg = await h.register()
        identity = str(reg["worker_identity"])
        await h.advance(5)
        result = await beat_with(h, reg, **change)
        assert (result.ok, result.code) == (False, "fencing_mismatch")
        fencing: dict[str, Any] = {
            "pid": int(reg["pid"]),
            "generation_id": str(reg["generation_id"]),
            "fencing_epoch": int(reg["fencing_epoch"]),
        }
        fencing.update(change)
        ack = await h.handle.release(identity, **fencing)
        assert (ack.ok, ack.code) == (False, "fencing_mismatch")
        row = await h.row(identity)
        assert row["status"] == "active"
        assert row["last_heartbeat_at"] == at(0)
        assert (await h.beat(reg)).ok  # the real owner is unaffected


async def test_unknown_identity_is_refused(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        result = await h.handle.heartbeat(
            "wkr-does-not-exist", pid=4242, generation_id="gen-x", fencing_epoch=1
        )
        assert (result.ok, result.code) == (False, "unknown_registration")
        ack = await h.handle.release(
            "wkr-does-not-exist", pid=4242, generation_id="gen-x", fencing_epoch=1
        )
        assert (ack.ok, ack.code) == (False, "unknown_registration")
        assert await h.store.read_registrations() == []


async def test_registration_of_a_process_the_probes_cannot_see_is_refused(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        unscripted = 5151
        dead = h.spawn()
        h.probes.kill(dead)
        no_start = 5252
        h.probes.set(no_start, alive=True, start_time=None)
        for pid in (unscripted, dead, no_start):
            result = await h.handle.register(pid, claims(pid))
            assert (result.ok, result.code) == (False, "process_unverifiable"), pid
            assert result.registration == {}
        assert await h.store.read_registrations() == []


@pytest.mark.parametrize(
    "bad",
    [
        {"worker_identity": "wkr-chosen-by-me"},
        {"pid": 1},
        {"no_such_field": "x"},
        {"namespace": "janitor"},
        {"session_id": 5},
        {"role": ["author"]},
        {"client_name": "x" * 513},
        {"heartbeat_ttl_seconds": 0.5},
        {"heartbeat_ttl_seconds": 3600.5},
        {"heartbeat_ttl_seconds": True},
        {"heartbeat_ttl_seconds": "30"},
        {"heartbeat_ttl_seconds": 10**400},
        {"heartbeat_ttl_seconds": float("nan")},
    ],
    ids=[
        "identity-claimed",
        "pid-claimed",
        "unknown-field",
        "bad-namespace",
        "non-string",
        "list",
        "too-long",
        "ttl-too-small",
        "ttl-too-large",
        "ttl-bool",
        "ttl-text",
        "ttl-overflows-float",
        "ttl-nan",
    ],
)
async def test_invalid_claims_are_refused(tmp_path: Path, bad: dict[str, Any]) -> None:
    async with harness(tmp_path) as h:
        pid = h.spawn()
        result = await h.handle.register(pid, claims(pid, **bad))
        assert (result.ok, result.code) == (False, "invalid_registration")
        assert result.detail
        assert await h.store.read_registrations() == []


async def test_ttl_bounds_are_inclusive(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        low = await h.register(heartbeat_ttl_seconds=1)
        high = await h.register(heartbeat_ttl_seconds=3600.0, namespace="reviewer")
        assert (await h.row(str(low["worker_identity"])))["heartbeat_ttl_seconds"] == 1.0
        assert (await h.row(str(high["worker_identity"])))["heartbeat_ttl_seconds"] == 3600.0


# --- supersession and fencing epochs ------------------------------------------------------------


async def test_same_process_registering_again_supersedes_its_old_row(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        pid = h.spawn()
        first = await h.register(pid)
        second = await h.register(pid)
        assert first["worker_identity"] != second["worker_identity"]
        assert first["generation_id"] != second["generation_id"]
        old = await h.row(str(first["worker_identity"]))
        new = await h.row(str(second["worker_identity"]))
        assert old["status"] == "superseded"
        assert new["status"] == "active"
        assert int(new["fencing_epoch"]) > int(old["fencing_epoch"])
        assert int(second["fencing_epoch"]) == int(new["fencing_epoch"])
        result = await h.beat(first)
        assert (result.ok, result.code) == (False, "registration_not_active")
        assert (await h.beat(second)).ok


async def test_registration_records_the_inode_and_supersedes_an_inode_less_row(
    tmp_path: Path,
) -> None:
    async with harness(tmp_path) as h:
        pid = h.spawn(start="ticks-4000")
        first = await h.register(pid)
        # The same process, now identified with its inode (a daemon upgraded under it).
        h.probes.set(pid, alive=True, start_time="ticks-4000@ino-77", cwd=REPO)
        second = await h.register(pid)
        # Registration records the token that names the process exactly.
        row = await h.row(str(second["worker_identity"]))
        assert row["process_start_time"] == "ticks-4000@ino-77"
        assert row["process_identity"] == f"host-a:{pid}:ticks-4000@ino-77"
        assert (await h.row(str(first["worker_identity"])))["status"] == "superseded"
        # Another process of the same start under the pid (reused within one clock tick)
        # is told apart by its inode: it supersedes nothing.
        h.probes.set(pid, alive=True, start_time="ticks-4000@ino-78", cwd=REPO)
        third = await h.register(pid)
        assert (await h.row(str(second["worker_identity"])))["status"] == "active"
        assert (await h.row(str(third["worker_identity"])))["status"] == "active"


async def test_a_new_process_in_the_same_slot_gets_a_higher_epoch(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        first = await h.register()
        second = await h.register()  # another pid, same instance and namespace
        third = await h.register()
        other_slot = await h.register(namespace="reviewer")
        assert [int(r["fencing_epoch"]) for r in (first, second, third)] == [1, 2, 3]
        assert int(other_slot["fencing_epoch"]) == 1
        # A different incarnation is not superseded: both rows stay as they are.
        for reg in (first, second, third):
            assert (await h.row(str(reg["worker_identity"])))["status"] == "active"


async def test_fencing_epoch_never_goes_backwards_in_a_slot(tmp_path: Path) -> None:
    """An epoch is a fencing token: a later registration must outrank every earlier one,
    including ones that have since been released or retired."""
    async with harness(tmp_path) as h:
        first = await h.register()
        second = await h.register()
        assert int(second["fencing_epoch"]) == 2
        for reg in (first, second):
            ack = await h.handle.release(
                str(reg["worker_identity"]),
                pid=int(reg["pid"]),
                generation_id=str(reg["generation_id"]),
                fencing_epoch=int(reg["fencing_epoch"]),
            )
            assert ack.ok
        third = await h.register()
        assert int(third["fencing_epoch"]) > 2


# --- coalescing ---------------------------------------------------------------------------------


async def register_direct(inbox: Any, boxes: Any, pid: int) -> Mapping[str, Any]:
    box: ReplyBox[RegisterResult] = boxes.new()
    inbox.send_nowait(Register(pid=pid, claims=claims(pid), reply=box.reply))
    result = await box.get()
    assert result.ok, result
    return result.registration


async def test_concurrent_beats_of_one_worker_are_one_write_and_all_acknowledged(
    tmp_path: Path,
) -> None:
    probes = ScriptedProbes(host_id="host-a", boot_id="boot-1")
    probes.set(4001, alive=True, start_time="ticks-4001", cwd=REPO)
    fake = FakeClock(wall=START)
    clock = MonotonicWall(fake)
    db = await open_sqlite_store(tmp_path / "registry.sqlite3")
    try:
        store = RecordingStore(db)
        with reply_boxes() as boxes:
            async with running_front(store, clock=clock, probes=probes) as rig:
                reg = await register_direct(rig.inbox, boxes, 4001)
                identity = str(reg["worker_identity"])
                await fake.advance(3)
                before = rig.writer.batches_committed
                replies: list[ReplyBox[HeartbeatResult]] = [boxes.new() for _ in range(50)]
                for box in replies:
                    rig.inbox.send_nowait(
                        Heartbeat(
                            worker_identity=identity,
                            pid=4001,
                            generation_id=str(reg["generation_id"]),
                            fencing_epoch=int(reg["fencing_epoch"]),
                            reply=box.reply,
                        )
                    )
                results = [await box.get() for box in replies]
                assert rig.writer.batches_committed == before + 1
        assert {(r.ok, r.code, r.last_heartbeat_at) for r in results} == {(True, "ok", at(3))}
        assert store.touch_calls == [[(identity, at(3))]]
        rows = await db.read_registrations()
        assert [r["last_heartbeat_at"] for r in rows] == [at(3)]
    finally:
        await db.close()


async def test_concurrent_beats_through_the_handle_all_succeed(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        reg = await h.register()
        await h.advance(4)
        results: list[HeartbeatResult] = []

        async def one() -> None:
            results.append(await h.beat(reg))

        async with anyio.create_task_group() as tg:
            for _ in range(40):
                tg.start_soon(one)
        assert len(results) == 40
        assert {(r.ok, r.last_heartbeat_at) for r in results} == {(True, at(4))}
        touched = [pair for call in h.proxy.touch_calls for pair in call]
        # Coalesced: far fewer row updates than beats, all for this one row.
        assert 1 <= len(touched) < 40
        assert {identity for identity, _ in touched} == {reg["worker_identity"]}
        assert (await h.row(str(reg["worker_identity"])))["last_heartbeat_at"] == at(4)


@pytest.mark.parametrize("forged_last", [True, False], ids=["forged-last", "forged-first"])
async def test_a_forged_beat_coalesced_with_a_valid_one_does_not_refuse_the_owner(
    tmp_path: Path, forged_last: bool
) -> None:
    """Each beat's answer must match its own claim, whatever else arrived in its batch."""
    probes = ScriptedProbes(host_id="host-a", boot_id="boot-1")
    probes.set(4001, alive=True, start_time="ticks-4001", cwd=REPO)
    fake = FakeClock(wall=START)
    clock = MonotonicWall(fake)
    db = await open_sqlite_store(tmp_path / "registry.sqlite3")
    try:
        with reply_boxes() as boxes:
            async with running_front(db, clock=clock, probes=probes) as rig:
                reg = await register_direct(rig.inbox, boxes, 4001)
                identity = str(reg["worker_identity"])
                await fake.advance(3)
                valid: ReplyBox[HeartbeatResult] = boxes.new()
                forged: ReplyBox[HeartbeatResult] = boxes.new()
                beats = [
                    Heartbeat(
                        worker_identity=identity,
                        pid=4001,
                        generation_id=str(reg["generation_id"]),
                        fencing_epoch=int(reg["fencing_epoch"]),
                        reply=valid.reply,
                    ),
                    Heartbeat(
                        worker_identity=identity,
                        pid=4001,
                        generation_id="gen-forged",
                        fencing_epoch=int(reg["fencing_epoch"]),
                        reply=forged.reply,
                    ),
                ]
                for beat in beats if forged_last else reversed(beats):
                    rig.inbox.send_nowait(beat)
                valid_result, forged_result = await valid.get(), await forged.get()
        assert (valid_result.ok, valid_result.code) == (True, "ok")
        assert (forged_result.ok, forged_result.code) == (False, "fencing_mismatch")
        rows = await db.read_registrations()
        assert [r["last_heartbeat_at"] for r in rows] == [at(3)]
    finally:
        await db.close()


async def test_a_group_of_beats_is_judged_claim_by_claim_and_answered_in_order(
    tmp_path: Path,
) -> None:
    probes = ScriptedProbes(host_id="host-a", boot_id="boot-1")
    for pid in (4101, 4102):
        probes.set(pid, alive=True, start_time=f"ticks-{pid}", cwd=REPO)
    fake = FakeClock(wall=START)
    db = await open_sqlite_store(tmp_path / "registry.sqlite3")
    try:
        store = RecordingStore(db)
        with reply_boxes() as boxes:
            async with running_front(store, clock=MonotonicWall(fake), probes=probes) as rig:
                first = await register_direct(rig.inbox, boxes, 4101)
                second = await register_direct(rig.inbox, boxes, 4102)
                await fake.advance(2)

                def claim(reg: Mapping[str, Any], **change: Any) -> _Claim:
                    fields = {k: reg[k] for k in ("worker_identity", "pid", "generation_id")}
                    fields["fencing_epoch"] = int(reg["fencing_epoch"])
                    return _Claim(**{**fields, **change})

                group: ReplyBox[tuple[HeartbeatResult, ...]] = boxes.new()
                single: ReplyBox[HeartbeatResult] = boxes.new()
                claims = (
                    claim(first),
                    claim(second),
                    claim(first, pid=9999),
                    claim(first),
                    claim(second, worker_identity="wkr-nobody"),
                )
                rig.inbox.send_nowait(HeartbeatGroup(claims=claims, reply=group.reply))
                rig.inbox.send_nowait(
                    Heartbeat(
                        worker_identity=str(second["worker_identity"]),
                        pid=4102,
                        generation_id=str(second["generation_id"]),
                        fencing_epoch=int(second["fencing_epoch"]),
                        reply=single.reply,
                    )
                )
                results, alone = await group.get(), await single.get()
        assert [r.code for r in results] == [
            "ok",
            "ok",
            "fencing_mismatch",
            "ok",
            "unknown_registration",
        ]
        assert [r.worker_identity for r in results[:2]] == [
            first["worker_identity"],
            second["worker_identity"],
        ]
        assert (alone.ok, alone.last_heartbeat_at) == (True, at(2))
        # One write per worker for the group and the lone beat together.
        assert sorted(pair[0] for call in store.touch_calls for pair in call) == sorted(
            [str(first["worker_identity"]), str(second["worker_identity"])]
        )
    finally:
        await db.close()


@dataclass(frozen=True)
class _Claim:
    worker_identity: str
    pid: int
    generation_id: str
    fencing_epoch: int


async def test_a_group_larger_than_max_batch_is_written_max_batch_beats_at_a_time(
    tmp_path: Path,
) -> None:
    pids = list(range(4201, 4206))
    probes = ScriptedProbes(host_id="host-a", boot_id="boot-1")
    for pid in pids:
        probes.set(pid, alive=True, start_time=f"ticks-{pid}", cwd=REPO)
    fake = FakeClock(wall=START)
    db = await open_sqlite_store(tmp_path / "registry.sqlite3")
    try:
        store = RecordingStore(db)
        settings = HeartbeatSettings(max_batch=2)
        with reply_boxes() as boxes:
            async with running_front(
                store, clock=MonotonicWall(fake), probes=probes, settings=settings
            ) as rig:
                regs = [await register_direct(rig.inbox, boxes, pid) for pid in pids]
                await fake.advance(1)
                store.touch_calls.clear()
                claims = tuple(
                    _Claim(
                        worker_identity=str(r["worker_identity"]),
                        pid=int(r["pid"]),
                        generation_id=str(r["generation_id"]),
                        fencing_epoch=int(r["fencing_epoch"]),
                    )
                    for r in regs
                )
                group: ReplyBox[tuple[HeartbeatResult, ...]] = boxes.new()
                rig.inbox.send_nowait(HeartbeatGroup(claims=claims, reply=group.reply))
                results = await group.get()
        assert [r.code for r in results] == ["ok"] * 5
        assert [len(call) for call in store.touch_calls] == [2, 2, 1]
    finally:
        await db.close()
