"""The handle's one dispatch: every op it answers has a route, and the rest are refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from supervisor.errors import ProtocolError
from supervisor.handle.facade import _ROUTES
from supervisor.operations.fleet import WORKER_OPS
from supervisor.operations.registry import HOST_OPS, OPERATIONS
from supervisor.operations.requests import request
from supervisor.operations.spec import TEXTS
from tests.actors.harness import RETIRER, harness

pytestmark = pytest.mark.anyio

#: Answered on paths of their own: peer credentials, the socket's figures, the keeper.
OWN_PATHS = WORKER_OPS | HOST_OPS | {"status"}


def test_every_other_declared_op_has_a_route() -> None:
    assert set(_ROUTES) == set(OPERATIONS) - OWN_PATHS


@pytest.mark.parametrize("op", sorted(OWN_PATHS - WORKER_OPS))
async def test_an_op_with_a_path_of_its_own_is_refused_by_call(op: str, tmp_path: Path) -> None:
    # Its required arguments given (any value: nothing reads them).
    args = [a for a in OPERATIONS[op].args if a.required]
    given = {a.name: ("w",) if a.shape == TEXTS else "x" for a in args}
    async with harness(tmp_path) as h:
        with pytest.raises(ProtocolError, match="not answered through the handle"):
            await h.handle.call(RETIRER, request(op, **given))
