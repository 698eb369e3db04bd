"""Single actors on their own inboxes, for tests that must control exactly what each one sees."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import ExitStack, asynccontextmanager, contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic, TypeVar

import anyio
from anyio.streams.memory import MemoryObjectSendStream

from actors.heartbeat.actor import HeartbeatActor, HeartbeatSettings
from actors.heartbeat.inbox import HeartbeatInbox
from actors.liveness.actor import LivenessActor, LivenessSettings
from actors.liveness.inbox import LivenessInbox
from actors.mailbox import Reply
from actors.writer.actor import RegistryWriter, WriterSettings
from actors.writer.inbox import WriterInbox
from supervisor.clock import Clock, FakeClock, MonotonicWall
from supervisor.policy.identity.instance import assess_instance_identity
from supervisor.policy.stamps import format_stamp
from supervisor.store.base import Store
from supervisor.system.probes import ProbeBackend
from tests.actors.harness import INSTANCE, REPO, START
from tests.fakes import ScriptedProbes

__all__ = [
    "FrontRig",
    "LivenessRig",
    "ReplyBox",
    "ReplyBoxes",
    "WriterRig",
    "registration_row",
    "reply_boxes",
    "running_front",
    "running_liveness",
    "running_writer",
    "until",
]

T = TypeVar("T")


class ReplyBox(Generic[T]):
    """One reply slot a test hands to an actor, and reads the answer from."""

    def __init__(self) -> None:
        self.reply: Reply[T] = Reply()

    def ready(self) -> bool:
        """An answer has arrived."""
        return self.reply.answered

    async def get(self) -> T:
        return await self.reply.wait(actor="actor under test")

    def close(self) -> None:
        self.reply.close()


class ReplyBoxes:
    """Creates reply boxes and closes every one of them when the test is done."""

    def __init__(self, stack: ExitStack) -> None:
        self._stack = stack

    def new(self) -> ReplyBox[T]:
        """Typed by the assignment: ``box: ReplyBox[WriteAck] = boxes.new()``."""
        box: ReplyBox[T] = ReplyBox()
        self._stack.callback(box.close)
        return box


@contextmanager
def reply_boxes() -> Iterator[ReplyBoxes]:
    with ExitStack() as stack:
        yield ReplyBoxes(stack)


def registration_row(
    *,
    pid: int,
    stamp: datetime = START,
    instance: str = INSTANCE,
    namespace: str = "author",
    host_id: str = "host-a",
    start_time: str | None = None,
    **overrides: Any,
) -> dict[str, Any]:
    """A complete registration row as the heartbeat actor would build it."""
    start = start_time or f"ticks-{pid}"
    text = format_stamp(stamp)
    row: dict[str, Any] = {
        "worker_identity": f"wkr-{secrets.token_hex(12)}",
        "client_name": "codex",
        "client_instance_id": instance,
        "session_id": f"sess-{pid}",
        "namespace": namespace,
        "role": namespace,
        "profile": f"prgs-{namespace}",
        "repository_binding": REPO,
        "generation_id": f"gen-{secrets.token_hex(8)}",
        "fencing_epoch": 1,
        "pid": pid,
        "process_identity": f"{host_id}:{pid}:{start}",
        "host_id": host_id,
        "boot_id": "boot-1",
        "process_start_time": start,
        "heartbeat_ttl_seconds": 30.0,
        "instance_id_provenance": assess_instance_identity(instance).provenance,
        "started_at": text,
        "last_heartbeat_at": text,
        "status": "active",
    }
    row.update(overrides)
    return row


@dataclass
class WriterRig:
    inbox: MemoryObjectSendStream[WriterInbox]
    writer: RegistryWriter


@asynccontextmanager
async def running_writer(
    store: Store,
    *,
    clock: Clock | None = None,
    probes: ScriptedProbes | None = None,
    settings: WriterSettings | None = None,
) -> AsyncIterator[WriterRig]:
    """A registry writer on an inbox the test owns; it drains and stops when the block ends."""
    send, receive = anyio.create_memory_object_stream[WriterInbox](1024)
    writer = RegistryWriter(
        store=store,
        inbox=receive,
        clock=clock or MonotonicWall(FakeClock(wall=START)),
        probes=probes or ScriptedProbes(host_id="host-a", boot_id="boot-1"),
        settings=settings,
    )
    with send, receive:
        async with anyio.create_task_group() as tg:
            await tg.start(writer.run)
            try:
                yield WriterRig(inbox=send, writer=writer)
            finally:
                send.close()


@dataclass
class FrontRig:
    """Heartbeat actor in front of a registry writer, both on test-owned inboxes."""

    inbox: MemoryObjectSendStream[HeartbeatInbox]
    writer: RegistryWriter


@asynccontextmanager
async def running_front(
    store: Store,
    *,
    clock: Clock,
    probes: ScriptedProbes,
    settings: HeartbeatSettings | None = None,
) -> AsyncIterator[FrontRig]:
    hb_send, hb_receive = anyio.create_memory_object_stream[HeartbeatInbox](1024)
    async with running_writer(store, clock=clock, probes=probes) as rig:
        writer_out = rig.inbox.clone()
        actor = HeartbeatActor(
            inbox=hb_receive,
            writer=writer_out,
            liveness=None,
            clock=clock,
            probes=probes,
            settings=settings,
        )
        with hb_send, hb_receive, writer_out:
            async with anyio.create_task_group() as tg:
                await tg.start(actor.run)
                try:
                    yield FrontRig(inbox=hb_send, writer=rig.writer)
                finally:
                    hb_send.close()


@dataclass
class LivenessRig:
    inbox: MemoryObjectSendStream[LivenessInbox]
    actor: LivenessActor


@asynccontextmanager
async def running_liveness(
    store: Store,
    *,
    clock: Clock,
    probes: ProbeBackend,
    settings: LivenessSettings | None = None,
    pidfd_open: Callable[[int, str | None], int | None] | None = None,
) -> AsyncIterator[LivenessRig]:
    send, receive = anyio.create_memory_object_stream[LivenessInbox](1024)
    actor = LivenessActor(
        inbox=receive,
        store=store,
        clock=clock,
        probes=probes,
        settings=settings or LivenessSettings(use_pidfd=False),
        pidfd_open=pidfd_open,
    )
    with send, receive:
        async with anyio.create_task_group() as tg:
            await tg.start(actor.run)
            try:
                yield LivenessRig(inbox=send, actor=actor)
            finally:
                send.close()


async def until(
    check: Callable[[], Awaitable[bool]], *, poll_seconds: float = 0.01, limit: float = 10.0
) -> None:
    """Wait for real I/O (a pidfd, a signal) to land; the limit is only a hang guard."""
    with anyio.fail_after(limit):
        # Polling is deliberate: the event comes from the OS, not from an actor we could await.
        while not await check():  # noqa: ASYNC110
            await anyio.sleep(poll_seconds)
