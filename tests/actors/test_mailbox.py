"""Reply slots, ask, post and serve: answered once, stopped actors reported, cancellation safe."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import anyio
import anyio.lowlevel
import pytest
from anyio.abc import TaskGroup

from actors.mailbox import Actor, Reply, ask, post, serve
from supervisor.errors import ActorStopped

pytestmark = pytest.mark.anyio


@dataclass(frozen=True, slots=True)
class _Echo:
    value: int
    reply: Reply[int]


async def test_an_answer_sent_before_the_wait_is_returned() -> None:
    reply: Reply[str] = Reply()
    reply.send("first")
    reply.send("second")  # ignored: a slot answers once
    reply.close()
    assert reply.answered
    assert await reply.wait(actor="a") == "first"


async def test_closing_without_an_answer_wakes_the_waiter_with_actor_stopped() -> None:
    reply: Reply[int] = Reply()
    async with anyio.create_task_group() as tg:
        tg.start_soon(_close_soon, reply)
        with pytest.raises(ActorStopped, match="writer stopped"):
            await reply.wait(actor="writer")
    reply.send(1)  # too late: the slot is closed
    assert not reply.answered


async def _close_soon(reply: Reply[int]) -> None:
    await anyio.lowlevel.checkpoint()
    reply.close()


async def test_a_cancelled_wait_can_be_waited_again_and_gets_the_answer() -> None:
    reply: Reply[int] = Reply()
    with anyio.move_on_after(0.01) as scope:
        await reply.wait(actor="a")
    assert scope.cancelled_caught
    reply.send(7)  # the cancelled waiter's future is done; sending must not fail
    assert await reply.wait(actor="a") == 7


async def test_a_second_concurrent_waiter_is_refused() -> None:
    reply: Reply[int] = Reply()
    async with anyio.create_task_group() as tg:
        tg.start_soon(partial(reply.wait, actor="a"))
        await anyio.wait_all_tasks_blocked()
        with pytest.raises(RuntimeError, match="one waiter"):
            await reply.wait(actor="a")
        reply.send(1)


async def test_ask_waits_for_room_in_a_full_inbox_and_gets_its_answer() -> None:
    send, receive = anyio.create_memory_object_stream[_Echo](1)
    answers: list[int] = []

    async def asker(value: int) -> None:
        answers.append(await ask(send, lambda r: _Echo(value, r), actor="echo"))

    async with send, receive, anyio.create_task_group() as tg:
        for value in range(3):
            tg.start_soon(asker, value)
        await anyio.wait_all_tasks_blocked()
        # One message fits the inbox; the other two askers wait for room.
        assert receive.statistics().current_buffer_used == 1
        for _ in range(3):
            message = await receive.receive()
            message.reply.send(message.value * 10)
    assert sorted(answers) == [0, 10, 20]


async def test_post_and_ask_report_a_stopped_actor() -> None:
    send, receive = anyio.create_memory_object_stream[_Echo](1)
    receive.close()
    with pytest.raises(ActorStopped, match="echo is not running"):
        await post(send, _Echo(1, Reply()), actor="echo")
    with pytest.raises(ActorStopped, match="echo is not running"):
        await ask(send, lambda r: _Echo(1, r), actor="echo")
    send.close()


async def test_a_wait_with_a_timeout_gives_up_and_the_answer_still_arrives_later() -> None:
    reply: Reply[int] = Reply()
    with pytest.raises(TimeoutError, match="did not answer within"):
        await reply.wait(actor="a", timeout=0.01)
    reply.send(3)
    assert await reply.wait(actor="a", timeout=0.01) == 3


class _Recorder(Actor[_Echo]):
    """An actor that answers ten times the value, fails on a negative one, and logs hooks."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    async def on_start(self, tg: TaskGroup) -> None:
        self.calls.append("start")

    async def on_receive(self, message: _Echo, tg: TaskGroup) -> None:
        if message.value < 0:
            raise ValueError("negative")
        message.reply.send(message.value * 10)

    async def on_end(self) -> None:
        self.calls.append("end")

    async def on_stop(self) -> None:
        self.calls.append("stop")


async def test_serve_answers_until_every_sender_closes_then_ends_and_stops() -> None:
    send, receive = anyio.create_memory_object_stream[_Echo](4)
    actor = _Recorder()
    with send, receive:
        async with anyio.create_task_group() as tg:
            await tg.start(partial(serve, receive, actor))
            assert actor.calls == ["start"]
            assert await ask(send, partial(_Echo, 2), actor="echo") == 20
            send.close()
    assert actor.calls == ["start", "end", "stop"]


async def test_a_failed_message_gets_actor_stopped_and_the_rest_wait_for_a_restart() -> None:
    send, receive = anyio.create_memory_object_stream[_Echo](4)
    actor = _Recorder()
    failed: Reply[int] = Reply()
    waiting: Reply[int] = Reply()
    with send, receive:
        await post(send, _Echo(-1, failed), actor="echo")
        await post(send, _Echo(3, waiting), actor="echo")
        with pytest.raises(BaseExceptionGroup):
            await serve(receive, actor)
        assert actor.calls == ["start", "stop"]  # no end: the inbox did not end
        with pytest.raises(ActorStopped, match="echo stopped without answering"):
            await failed.wait(actor="echo")
        # The next incarnation takes the message that was still queued.
        async with anyio.create_task_group() as tg:
            await tg.start(partial(serve, receive, _Recorder()))
            assert await waiting.wait(actor="echo") == 30
            send.close()


async def test_serve_calls_on_idle_while_it_has_work_and_the_inbox_is_empty() -> None:
    class Deferred(_Recorder):
        def __init__(self) -> None:
            super().__init__()
            self.left = 2

        async def on_idle(self) -> bool:
            self.calls.append("idle")
            self.left -= 1
            return self.left >= 0

    send, receive = anyio.create_memory_object_stream[_Echo](4)
    actor = Deferred()
    reply: Reply[int] = Reply()
    with send, receive:
        # Queued first: the message is taken without asking on_idle.
        await post(send, _Echo(1, reply), actor="echo")
        async with anyio.create_task_group() as tg:
            await tg.start(partial(serve, receive, actor))
            assert await reply.wait(actor="echo") == 10
            send.close()
    # Asked again while it had work (twice), then once without: the loop waited.
    assert actor.calls == ["start", "idle", "idle", "idle", "end", "stop"]
