"""Heartbeat batches: judged on their own claims, and committed as queued jobs, in order."""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from actors.heartbeat.inbox import BeatClaim
from actors.replies import HeartbeatResult
from actors.writer.inbox import TouchHeartbeats
from supervisor.observe.logs import get_logger
from supervisor.policy.canonical import canon
from supervisor.policy.fleet.liveness import STATUS_ACTIVE
from supervisor.store.base import CommitChain, Store

__all__ = [
    "FENCING_MISMATCH",
    "NOT_ACTIVE",
    "UNKNOWN",
    "BeatPipeline",
    "Fencing",
    "beat_results",
    "check_beat",
    "failed_results",
    "fencing_of",
    "judge_beats",
    "newest_ok",
]

_log = get_logger()

#: Codes a heartbeat or release can be refused with.
NOT_ACTIVE = "registration_not_active"
UNKNOWN = "unknown_registration"
FENCING_MISMATCH = "fencing_mismatch"
_MISMATCH_DETAIL = "pid, generation or fencing epoch does not match the registration"

#: (pid, generation_id, fencing_epoch) in canonical text.
Fencing = tuple[str, str, str]
Verdicts = list[list[tuple[str, str]]]
#: What the writer runs when a batch cannot be settled from memory: its full transaction.
Fallback = Callable[[Sequence[TouchHeartbeats]], Awaitable[None]]


def fencing_of(row: Mapping[str, Any]) -> Fencing:
    return (canon(row.get("pid")), canon(row.get("generation_id")), canon(row.get("fencing_epoch")))


def check_beat(row: Mapping[str, Any] | None, beat: BeatClaim) -> tuple[str, str]:
    """Does this beat (or release) belong to the registration it names? ``ok`` or a refusal."""
    if row is None:
        return UNKNOWN, f"no registration {beat.worker_identity!r}"
    if str(row.get("status") or "") != STATUS_ACTIVE:
        return (
            NOT_ACTIVE,
            f"registration is {row.get('status')!r}; register again under a new identity",
        )
    if fencing_of(row) != _claim(beat):
        return FENCING_MISMATCH, _MISMATCH_DETAIL
    return "ok", ""


def judge_beats(
    messages: Sequence[TouchHeartbeats],
    known: Mapping[str, Fencing],
    rows: Mapping[str, Mapping[str, Any]],
) -> Verdicts:
    """A verdict per beat: from the remembered fencing of active rows, else from ``rows``.

    Every beat is judged on its own claim: coalescing may merge the writes of one
    worker, never the verdicts, or a forged beat could borrow the owner's answer (or
    spoil it).
    """
    verdicts: Verdicts = []
    for message in messages:
        judged: list[tuple[str, str]] = []
        for beat in message.beats:
            fencing = known.get(beat.worker_identity)
            if fencing is None:
                judged.append(check_beat(rows.get(beat.worker_identity), beat))
            elif fencing == _claim(beat):
                judged.append(_OK)
            else:
                judged.append((FENCING_MISMATCH, _MISMATCH_DETAIL))
        verdicts.append(judged)
    return verdicts


_OK = ("ok", "")


def _claim(beat: BeatClaim) -> Fencing:
    pid, generation, epoch = beat.pid, beat.generation_id, beat.fencing_epoch
    # What canon() gives for the types a beat normally carries, without three calls.
    if type(pid) is int and type(generation) is str and type(epoch) is int:
        return (str(pid), generation, str(epoch))
    return (canon(pid), canon(generation), canon(epoch))


def newest_ok(messages: Sequence[TouchHeartbeats], verdicts: Verdicts) -> dict[str, str]:
    """The stamp to record per worker: the newest among its accepted beats."""
    newest: dict[str, str] = {}
    for message, judged in zip(messages, verdicts, strict=True):
        for beat, (code, _) in zip(message.beats, judged, strict=True):
            if code == "ok" and beat.stamp > newest.get(beat.worker_identity, ""):
                newest[beat.worker_identity] = beat.stamp
    return newest


def beat_results(
    messages: Sequence[TouchHeartbeats], verdicts: Verdicts, newest: Mapping[str, str]
) -> list[tuple[TouchHeartbeats, tuple[HeartbeatResult, ...]]]:
    """Each message with its answer, one result per beat in the message's order."""
    # A list per message, then a tuple: a generator feeding tuple() costs a resumption
    # per beat, and every acknowledged heartbeat passes through here.
    return [
        (
            message,
            tuple(
                [
                    HeartbeatResult(
                        ok=code == "ok",
                        code=code,
                        detail=detail,
                        worker_identity=beat.worker_identity,
                        last_heartbeat_at=newest.get(beat.worker_identity)
                        if code == "ok"
                        else None,
                    )
                    for beat, (code, detail) in zip(message.beats, judged, strict=True)
                ]
            ),
        )
        for message, judged in zip(messages, verdicts, strict=True)
    ]


def failed_results(
    messages: Sequence[TouchHeartbeats], code: str, detail: str
) -> list[tuple[TouchHeartbeats, tuple[HeartbeatResult, ...]]]:
    """Every beat of every message refused with one ``code`` (never "ok")."""
    refused = (code, detail)
    return beat_results(messages, [[refused] * len(m.beats) for m in messages], {})


@dataclass(slots=True)
class _Job:
    messages: list[TouchHeartbeats]
    verdicts: Verdicts
    newest: dict[str, str]
    #: None when no beat of the job was accepted: nothing to write.
    done: Awaitable[bool] | None
    #: ``time.perf_counter()`` when the job was queued on the store.
    queued_at: float = 0.0


class BeatPipeline:
    """Heartbeat transactions queued on the store back to back, answered in order.

    Why: with every sender waiting for its acknowledgement, a writer that awaits each
    commit leaves the event loop idle while the database works. Queuing the next batch's
    transaction while the last one commits lets the loop judge, answer and read new
    beats in the meantime. Only batches judged entirely from remembered fencing are
    queued; anything else waits until the queue is empty (``drain``).

    Order is kept by the store's chain: once a job fails or finds a row no longer
    active, every later job is skipped, and that job and each later one are then
    redone, in order, by the writer's full transaction, which judges from the table.
    """

    def __init__(
        self,
        store: Store,
        *,
        max_jobs: int,
        on_commit: Callable[[float], None] | None = None,
    ) -> None:
        self._store = store
        #: Told each committed job's queue-to-commit seconds (the commit latency metric).
        self._on_commit = on_commit
        self._max_jobs = max_jobs
        self._jobs: deque[_Job] = deque()
        self._chain = CommitChain()
        #: Jobs whose transaction committed (jobs with nothing to write not counted).
        self.committed = 0

    @property
    def busy(self) -> bool:
        return bool(self._jobs)

    @property
    def full(self) -> bool:
        return len(self._jobs) >= self._max_jobs

    def submit(self, messages: list[TouchHeartbeats], known: Mapping[str, Fencing]) -> None:
        """Judge ``messages`` from ``known`` (every identity must be in it) and queue them."""
        verdicts = judge_beats(messages, known, {})
        newest = newest_ok(messages, verdicts)
        done: Awaitable[bool] | None = None
        if newest:
            try:
                done = self._store.submit_heartbeats(sorted(newest.items()), self._chain)
            except Exception as exc:
                # Refused before it was queued (e.g. the store is closed): answered like a
                # failed commit when its turn comes, and nothing after it may write.
                self._chain.broken = True
                done = _failed(exc)
        self._jobs.append(
            _Job(
                messages=messages,
                verdicts=verdicts,
                newest=newest,
                done=done,
                queued_at=time.perf_counter(),
            )
        )

    async def settle_oldest(self, fallback: Fallback) -> None:
        """Wait for the oldest job and answer it; after a failure, settle every job."""
        await self._settle(self._jobs.popleft(), fallback)
        if self._chain.broken:
            while self._jobs:
                await self._settle(self._jobs.popleft(), fallback)
            self._chain = CommitChain()

    async def drain(self, fallback: Fallback | None) -> None:
        """Settle every job. Without a fallback (the writer is stopping), a job that
        would need one is not answered: its senders learn the writer stopped."""
        while self._jobs:
            job = self._jobs.popleft()
            if fallback is not None:
                await self._settle(job, fallback)
                continue
            try:
                committed = await _outcome(job.done, default=True)
            except Exception:
                committed = False
            for message, results in beat_results(job.messages, job.verdicts, job.newest):
                if committed:
                    message.reply.send(results)
                message.reply.close()
        self._chain = CommitChain()

    async def _settle(self, job: _Job, fallback: Fallback) -> None:
        skipped_by_failure = self._chain.broken
        try:
            committed = await _outcome(job.done, default=not skipped_by_failure)
        except Exception as exc:
            # Redone by the writer's own transaction, which retries a failing batch in
            # parts: one beat the database refuses must not fail the job's others.
            _log.error("batch_commit_failed", error=repr(exc), size=len(job.messages))
            await fallback(job.messages)
            return
        if not committed:
            # Rows changed under the remembered fencing, or an earlier job failed:
            # judge from the table, in a transaction of its own.
            await fallback(job.messages)
            return
        if job.done is not None:
            self.committed += 1
            if self._on_commit is not None:
                self._on_commit(time.perf_counter() - job.queued_at)
        for message, results in beat_results(job.messages, job.verdicts, job.newest):
            message.reply.send(results)


def _failed(exc: Exception) -> asyncio.Future[bool]:
    future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
    future.set_exception(exc)
    return future


async def _outcome(done: Awaitable[bool] | None, *, default: bool) -> bool:
    if done is None:
        return default
    # Shielded: the transaction runs to its end on the database thread whatever happens
    # to this task, and a cancelled wait must not turn into a cancelled job.
    return await asyncio.shield(done)
