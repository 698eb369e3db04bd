"""Reply slots and ``ask``/``post``: answered once, stopped actors reported, cancellation safe."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import anyio
import anyio.lowlevel
import pytest

from actors.mailbox import Reply, ask, post
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
