"""The client's named requests and exchange rules, written once for its async and sync drivers."""

from __future__ import annotations

import itertools
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from supervisor.client.declared import DeclaredCalls
from supervisor.client.frames import fenced_args, register_args
from supervisor.errors import ProtocolError, Unavailable
from supervisor.wire import PlanQuery, query_args, request_frame

__all__ = ["Calls", "answer_too_large"]

#: What a driver's ``request`` returns: an awaitable answer (AsyncClient) or the answer (Client).
_R = TypeVar("_R")


def answer_too_large() -> ProtocolError:
    return ProtocolError("the supervisor's answer exceeds the client's size limit")


class Calls(DeclaredCalls[_R]):
    """Everything of a client but its I/O: a driver subclasses it with ``request`` (and its
    connection state in ``_init_transport``), and every named request below is one
    ``request``, so ``AsyncClient.register`` is awaited and ``Client.register`` blocks.
    ``status``, ``snapshot`` and ``apply`` are generated from the operation declarations
    (``client/declared.py``)."""

    #: What the driver's transport raises when the server hangs up mid-exchange.
    _HUNG_UP: ClassVar[tuple[type[BaseException], ...]]

    def __init__(
        self,
        socket_path: str | os.PathLike[str],
        *,
        token: str | None = None,
        timeout: float = 30.0,
    ) -> None:
        self.socket_path = Path(socket_path)
        self.token = token
        self.timeout = timeout
        self._ids = itertools.count(1)
        self._init_transport()

    def _init_transport(self) -> None:
        raise NotImplementedError

    def request(
        self, op: str, args: Mapping[str, Any] | None = None, *, token: str | None = None
    ) -> _R:
        """Send one request and return its result; error frames raise ``RemoteError``s."""
        raise NotImplementedError

    # --- the exchange, minus its I/O -------------------------------------------------------

    def _frame(
        self, op: str, args: Mapping[str, Any] | None, token: str | None
    ) -> tuple[str, bytes]:
        """A fresh request id and the frame that carries it (``token`` overrides the client's)."""
        request_id = str(next(self._ids))
        frame = request_frame(
            request_id, op, args or {}, token if token is not None else self.token
        )
        return request_id, frame

    def _unreachable(self, exc: OSError) -> Unavailable:
        return Unavailable(f"cannot reach the supervisor at {self.socket_path}: {exc}")

    def _lost(self, op: str, exc: BaseException) -> Unavailable | None:
        """What a failed exchange raises instead of ``exc`` (None: ``exc`` itself, such as a
        protocol error or a cancellation). The driver drops the connection either way: an
        answer still on its way would be read as the next request's."""
        if isinstance(exc, TimeoutError):
            return Unavailable(f"no answer to {op} within {self.timeout}s")
        if isinstance(exc, self._HUNG_UP):
            return Unavailable(f"the supervisor closed the connection during {op}")
        return None

    # --- the named requests ----------------------------------------------------------------

    def register(self, claims: Mapping[str, Any], pid: int | None = None) -> _R:
        return self.request("register", register_args(claims, pid))

    def heartbeat(self, registration: Mapping[str, Any]) -> _R:
        return self.request("heartbeat", fenced_args(registration))

    def release(self, registration: Mapping[str, Any]) -> _R:
        return self.request("release", fenced_args(registration))

    def plan(
        self, *, canonical_repository: str | None = None, query: PlanQuery | None = None
    ) -> _R:
        return self.request(
            "plan", {"canonical_repository": canonical_repository, **query_args(query)}
        )
