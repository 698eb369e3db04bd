"""The only database writer: group-commits what is waiting and acknowledges only after commit."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import InitVar, dataclass, field, replace
from typing import Any, assert_never

import anyio
from anyio.abc import TaskGroup

from actors.control.context import ControlClock, ControlSettings
from actors.control.inbox import ControlWrite
from actors.control.steps import after_expiry
from actors.host_lease.writes import RenewHostLease, RetireHostRows, handle_host_write
from actors.mailbox import Actor, Inbox, Reply
from actors.replies import WriteAck
from actors.retirement.apply_tx import ApplyRetirement, ApplySettings, run_apply
from actors.writer.beats import (
    BeatPipeline,
    Fencing,
    beat_results,
    fencing_of,
    judge_beats,
    newest_ok,
)
from actors.writer.inbox import (
    AppendAudit,
    ExpireLeases,
    InsertRegistration,
    ReleaseRegistration,
    SetMassGuard,
    TouchHeartbeats,
    UpsertLease,
    WriterInbox,
)
from actors.writer.inbox import Single as _Single
from actors.writer.isolation import Batchable as _Batchable
from actors.writer.isolation import isolate_failure
from actors.writer.observed import RecordObservedServers, record_observed
from actors.writer.registrations import register, release
from supervisor.clock import Clock
from supervisor.observe.logs import get_logger
from supervisor.observe.metrics import Metrics
from supervisor.policy.fleet.liveness import STATUS_ACTIVE
from supervisor.store.base import Row, Store, WriteTx
from supervisor.system.probes import ProbeBackend

__all__ = ["RegistryWriter", "WriterSettings"]


_log = get_logger()


@dataclass(frozen=True, slots=True, kw_only=True)
class WriterSettings:
    max_batch: int = 4096
    #: Beats per queued heartbeat transaction, and how many may be queued at once
    #: (``BeatPipeline``): small enough that one commits while the next is prepared.
    beats_per_job: int = 256
    jobs_in_flight: int = 2
    apply: ApplySettings = field(default_factory=ApplySettings)
    control: ControlSettings = field(default_factory=ControlSettings)


@dataclass(kw_only=True, eq=False, repr=False)
class RegistryWriter(Actor[WriterInbox]):
    """Owns every write. Messages are handled in arrival order, batched per transaction.

    A message whose own writes fail gets an error reply and none of its writes
    (savepoint); the rest of the batch still commits. If the transaction
    itself fails, nothing in it is acknowledged as written, and the batch is
    retried in halves (``isolate_failure``) so a beat or message the database
    refuses fails alone.

    The store was opened (and migrated) before this actor started, so it is ready
    for writes from the first message on.
    """

    store: Store
    inbox: Inbox[WriterInbox]
    clock: Clock
    probes: ProbeBackend
    #: None: the defaults.
    settings: InitVar[WriterSettings | None] = None
    metrics: Metrics = field(default_factory=Metrics)

    def __post_init__(self, settings: WriterSettings | None) -> None:
        commits = self.metrics.commit_seconds
        self._settings = settings or WriterSettings()
        self._control = ControlClock(clock=self.clock, settings=self._settings.control)
        self._batches_committed = 0
        # pid, generation and epoch of rows last seen active. Those three never
        # change for a worker identity, so a beat can be judged without a
        # SELECT; a row that stopped being active is caught by the guarded
        # UPDATE's row count and judged from the table instead.
        self._fencing: dict[str, Fencing] = {}
        self._beats = BeatPipeline(
            self.store,
            max_jobs=self._settings.jobs_in_flight,
            on_commit=commits.labels("heartbeats").observe,
        )
        self._observe_batch = commits.labels("batch").observe
        self._observe_apply = commits.labels("apply").observe

    @property
    def batches_committed(self) -> int:
        """Transactions committed so far, queued heartbeat jobs included."""
        return self._batches_committed + self._beats.committed

    async def on_receive(self, message: WriterInbox, tg: TaskGroup) -> None:
        if isinstance(message, ApplyRetirement):
            await self._beats.drain(self._commit_batch)
            await self._apply(message)
            return
        if isinstance(message, SetMassGuard):
            guard = replace(
                self._settings.apply,
                mass_guard_share=message.mass_guard_share,
                mass_guard_floor=message.mass_guard_floor,
            )
            self._settings = replace(self._settings, apply=guard)
            message.reply.send(None)
            return
        batch: list[_Batchable] = [message]
        pending: ApplyRetirement | SetMassGuard | None = None
        while len(batch) < self._settings.max_batch:
            try:
                waiting = self.inbox.receive_nowait()
            except (anyio.WouldBlock, anyio.EndOfStream):
                break
            if isinstance(waiting, ApplyRetirement | SetMassGuard):
                # An apply runs in a transaction of its own, and new settings take effect,
                # after the writes that arrived before them.
                pending = waiting
                break
            batch.append(waiting)
        if not await self._queue_beats(batch):
            await self._beats.drain(self._commit_batch)
            await self._commit_batch(batch)
        if pending is not None:
            await self.on_receive(pending, tg)

    async def on_idle(self) -> bool:
        """Queued heartbeat jobs are answered while no message is waiting."""
        if not self._beats.busy:
            return False
        await self._beats.settle_oldest(self._commit_batch)
        return True

    async def on_end(self) -> None:
        await self._beats.drain(self._commit_batch)

    async def on_stop(self) -> None:
        # Cancelled or failed: queued heartbeat transactions still finish on the
        # database thread; answer what committed, and nothing else.
        await self._beats.drain(None)

    async def _queue_beats(self, batch: Sequence[_Batchable]) -> bool:
        """Queue ``batch`` as heartbeat jobs, each judged from memory; False (nothing done)
        when the batch holds anything but beats."""
        beats = [m for m in batch if isinstance(m, TouchHeartbeats)]
        if len(beats) != len(batch):
            return False
        job: list[TouchHeartbeats] = []
        size = 0
        for position, message in enumerate(beats):
            job.append(message)
            size += len(message.beats)
            if size < self._settings.beats_per_job and position < len(beats) - 1:
                continue
            if self._beats.full:
                await self._beats.settle_oldest(self._commit_batch)
            if not self._all_known(job):
                # A row the writer does not remember (never seen, or forgotten when an
                # earlier job was redone from the table): the rest of the batch takes
                # the full path, after everything queued.
                await self._beats.drain(self._commit_batch)
                await self._commit_batch(beats[position + 1 - len(job) :])
                return True
            self._beats.submit(job, self._fencing)
            job, size = [], 0
        return True

    def _all_known(self, messages: Sequence[TouchHeartbeats]) -> bool:
        known = self._fencing
        return all(b.worker_identity in known for m in messages for b in m.beats)

    async def _commit_batch(self, batch: Sequence[_Batchable]) -> None:
        failure = await self._transaction(batch)
        if failure is None:
            return
        # The failure may belong to one message or beat (a value the database refuses):
        # then only its sender is refused; a store that cannot write refuses them all.
        await isolate_failure(
            batch, failure, transaction=self._transaction, store_writes=self._store_writes
        )

    async def _transaction(self, batch: Sequence[_Batchable]) -> Exception | None:
        """Write ``batch`` in one transaction and answer it; the failure (nothing answered,
        nothing written) otherwise."""
        replies: list[tuple[Reply[Any], Any]] = []
        beats: list[TouchHeartbeats] = []
        others: list[_Single] = []
        for item in batch:
            if isinstance(item, TouchHeartbeats):
                beats.append(item)
            else:
                others.append(item)
        # Real elapsed time: a latency measurement for operators, not protocol time.
        began = time.perf_counter()
        try:
            # Flushed before anything is answered, unless the batch holds only stamps.
            async with self.store.write(durable=bool(others)) as tx:
                if beats:
                    replies.extend(await self._heartbeats(tx, beats))
                for message in others:
                    replies.append(await self._one(tx, message))
        except Exception as exc:
            _log.error("batch_commit_failed", error=repr(exc), size=len(batch))
            return exc
        self._batches_committed += 1
        self._observe_batch(time.perf_counter() - began)
        for reply, value in replies:
            reply.send(value)
        return None

    async def _store_writes(self) -> bool:
        """Does an empty transaction commit? If not, the failure was the store's own (full
        disk, lost lock, closed store) and retrying parts of the batch would only repeat it."""
        try:
            async with self.store.write(durable=False):
                pass
        except Exception as exc:
            _log.error("store_write_probe_failed", error=repr(exc))
            return False
        return True

    async def _heartbeats(
        self, tx: WriteTx, messages: Sequence[TouchHeartbeats]
    ) -> list[tuple[Reply[Any], Any]]:
        identities = sorted({b.worker_identity for m in messages for b in m.beats})
        unseen = [i for i in identities if i not in self._fencing]
        rows = await self._rows(tx, unseen) if unseen else {}
        verdicts = judge_beats(messages, self._fencing, rows)
        newest = newest_ok(messages, verdicts)
        if newest and await tx.touch_heartbeats(sorted(newest.items())) != len(newest):
            # Some row left 'active' without this writer seeing it (the guard
            # in the UPDATE kept it untouched): judge every beat from the table.
            rows = await self._rows(tx, identities)
            verdicts = judge_beats(messages, {}, rows)
            newest = newest_ok(messages, verdicts)
        return [(m.reply, r) for m, r in beat_results(messages, verdicts, newest)]

    async def _rows(self, tx: WriteTx, identities: Sequence[str]) -> dict[str, Row]:
        """Rows by identity, refreshing what the writer remembers about each."""
        rows = {
            str(r["worker_identity"]): r
            for r in await tx.registrations(worker_identities=identities)
        }
        for identity in identities:
            row = rows.get(identity)
            if row is not None and str(row.get("status") or "") == STATUS_ACTIVE:
                self._fencing[identity] = fencing_of(row)
            else:
                self._fencing.pop(identity, None)
        return rows

    async def _one(self, tx: WriteTx, message: _Single) -> tuple[Reply[Any], Any]:
        try:
            async with tx.savepoint():
                ack = await self._handle(tx, message)
        except Exception as exc:
            name = type(message.op if isinstance(message, ControlWrite) else message).__name__
            _log.warning("write_refused", message=name, error=repr(exc))
            ack = WriteAck(ok=False, code="store_error", detail=str(exc))
        return message.reply or Reply.discarding(), ack

    async def _handle(self, tx: WriteTx, message: _Single) -> WriteAck:
        match message:
            case InsertRegistration():
                return await register(tx, message.row, self._fencing)
            case ReleaseRegistration():
                return await release(tx, message, self._fencing)
            case ExpireLeases():
                expired = await tx.expire_leases(now_stamp=message.now_stamp)
                # Their assignments expire with them, with one control event per lease.
                await after_expiry(tx, expired, message.now_stamp)
                return WriteAck(ok=True, data={"expired": [str(r["lease_id"]) for r in expired]})
            case UpsertLease():
                await tx.upsert_lease(message.lease)
                return WriteAck(ok=True)
            case AppendAudit():
                await tx.append_audit(message.event)
                return WriteAck(ok=True)
            case ControlWrite():
                # The op carries itself out (its class holds its check and its write).
                return await message.run(self._control, tx)
            case RenewHostLease() | RetireHostRows():
                return await handle_host_write(tx, message, self.clock.now())
            case RecordObservedServers():
                return await record_observed(tx, message)
            case _:
                assert_never(message)

    async def _apply(self, message: ApplyRetirement) -> None:
        with message.reply:
            began = time.perf_counter()
            outcome = await run_apply(
                message,
                store=self.store,
                clock=self.clock,
                probes=self.probes,
                settings=self._settings.apply,
            )
            self._observe_apply(time.perf_counter() - began)
            for retired in outcome.result.get("retired") or []:
                self._fencing.pop(str(retired.get("worker_identity")), None)
            message.reply.send(outcome)
