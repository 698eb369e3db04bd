"""What the MCP Python SDK's client leaves on pipes is reaped: proven by the kernel, or its owner.

``sdk-sigkill`` (tests/realclients/scenarios.py): the SDK's ``stdio_client`` starts the
stubborn stub over pipes and is SIGKILLed; the stub ignores the end of its input and
every stop signal, and its child has ``/dev/null`` stdio. Bare, both stay. The stub's
name holds no MCP word and no config file lists it, so the reaping supervisor is told it
is a server (``[discovery] server_words``, as a user would for such a server).

* A supervisor started afterwards never saw the client: no owner was recorded, and the
  stub is reaped only because the kernel says no process holds the client side of its
  pipes; its child goes with it as a member of its tree.
* A supervisor that ran throughout recorded the client as the owner while it ran.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from functools import partial

import pytest

from tests.process_trees.marked import Left, reap_afterwards, reap_throughout
from tests.realclients.scenarios import run_scenario
from tests.realclients.test_leftovers import require

pytestmark = pytest.mark.integration

WORDS = ("stubborn_server",)


@pytest.mark.parametrize(
    "reaper", [reap_afterwards, reap_throughout], ids=["started-afterwards", "ran-throughout"]
)
def test_a_stub_the_sdk_client_left_on_pipes_is_reaped(
    reaper: Callable[..., AbstractContextManager[Callable[[], list[Left]]]],
) -> None:
    require("sdk", "stubborn")
    made = partial(reaper, server_words=WORDS)
    result = run_scenario("sdk-sigkill", "stubborn", wrapped=False, reaper=made)
    assert result.leftover_count == 2, result.summary()  # bare: the stub and its child
    assert result.after == [], result.after
