"""A failed group commit retried in halves, so one poisoned message or beat fails alone."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from actors.mailbox import Reply
from actors.replies import HeartbeatResult, WriteAck
from actors.writer.beats import failed_results
from actors.writer.inbox import Single, TouchHeartbeats

__all__ = ["Batchable", "fail_batch", "isolate_failure"]

#: What one group-commit transaction takes (an apply always runs alone).
Batchable = Single | TouchHeartbeats

#: Writes a batch in one transaction and answers it, or returns the failure having
#: written and answered nothing.
Transaction = Callable[[Sequence[Batchable]], Awaitable[Exception | None]]


async def isolate_failure(
    batch: Sequence[Batchable],
    failure: Exception,
    *,
    transaction: Transaction,
    store_writes: Callable[[], Awaitable[bool]],
) -> None:
    """Answer every unit of a batch whose transaction failed with ``failure``.

    When the batch holds more than one unit and the store still commits an empty
    transaction, the halves are committed apart, recursing into a half that fails,
    down to one message and then one beat: k poisoned units cost about k·log2(n)
    transactions, and every other unit is written and answered in arrival order.
    A store that cannot write at all is not retried: every unit gets the failure.
    """
    if _units(batch) > 1 and await store_writes():
        await _halves(batch, transaction)
    else:
        fail_batch(batch, failure)


async def _halves(batch: Sequence[Batchable], transaction: Transaction) -> None:
    if len(batch) > 1:
        middle = len(batch) // 2
        await _retry(batch[:middle], transaction)
        await _retry(batch[middle:], transaction)
        return
    [message] = batch
    # One message that is not a beat batch is one unit, and a single unit is not halved.
    assert isinstance(message, TouchHeartbeats)
    middle = len(message.beats) // 2
    parts = [
        TouchHeartbeats(beats=beats, reply=Reply())
        for beats in (message.beats[:middle], message.beats[middle:])
    ]
    for part in parts:
        await _retry([part], transaction)
    results: list[HeartbeatResult] = []
    for part in parts:
        # Answered already (committed or failed), so the wait returns at once.
        results.extend(await part.reply.wait(actor="registry_writer"))
    message.reply.send(tuple(results))


async def _retry(part: Sequence[Batchable], transaction: Transaction) -> None:
    failure = await transaction(part)
    if failure is None:
        return
    if _units(part) > 1:
        await _halves(part, transaction)
    else:
        fail_batch(part, failure)


def _units(batch: Sequence[Batchable]) -> int:
    """How many separately answerable writes ``batch`` holds: one per beat, one per other."""
    return sum(len(m.beats) if isinstance(m, TouchHeartbeats) else 1 for m in batch)


def fail_batch(batch: Sequence[Batchable], failure: Exception) -> None:
    """Every message of ``batch`` answered as not written."""
    detail = f"commit failed: {failure}"
    ack = WriteAck(ok=False, code="store_error", detail=detail)
    for message in batch:
        if isinstance(message, TouchHeartbeats):
            for _, results in failed_results([message], "store_error", detail):
                message.reply.send(results)
        elif message.reply is not None:
            message.reply.send(ack)
