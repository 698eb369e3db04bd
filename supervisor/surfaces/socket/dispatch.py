"""Socket request dispatch: a worker op by peer credentials, ``status`` by its figures, and
every other op's request, for the token's profile, to the handle's one ``call``."""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import KW_ONLY, dataclass
from typing import Any, Protocol

import anyio

from supervisor.errors import (
    PermissionDenied,
    ProfilesUnreadable,
    SupervisorError,
)
from supervisor.handle import SupervisorHandle
from supervisor.handle.hosts import HostLeaseCalls
from supervisor.observe.logs import get_logger
from supervisor.operations.declared import (
    HeartbeatRequest,
    RegisterRequest,
    ReleaseRequest,
)
from supervisor.operations.fleet import WORKER_OPS
from supervisor.operations.registry import HOST_OPS, OPERATIONS
from supervisor.operations.requests import request_as
from supervisor.policy.control.permissions import Profile
from supervisor.surfaces.socket.answers import to_wire
from supervisor.surfaces.socket.frame import Frame
from supervisor.surfaces.socket.hosts import dispatch_hosts
from supervisor.surfaces.socket.peer_auth import Conversation, authorize_pid
from supervisor.surfaces.socket.protocol import Unauthenticated
from supervisor.surfaces.socket.status import ServerFigures, status_report
from supervisor.system.probes import ProbeBackend
from supervisor.wire import INTERNAL_ERROR, TIMEOUT, error_frame, ok_frame

__all__ = ["Dispatcher", "ProfileLookupWithAuth"]

_log = get_logger()

_Handler = Callable[["Dispatcher", Frame, Conversation], Awaitable[object]]


class ProfileLookupWithAuth(Protocol):
    """What the socket needs of a ProfileBook: a token proves a profile, or nothing, and
    why nothing could be proved when the profiles file itself is unusable."""

    def authenticate(self, token: str) -> Profile | None: ...

    @property
    def error(self) -> str | None: ...


@dataclass(frozen=True, slots=True)
class Dispatcher:
    """Answers one decoded request (never a heartbeat run: see ``server._beats``)."""

    handle: SupervisorHandle
    _: KW_ONLY
    profiles: ProfileLookupWithAuth
    probes: ProbeBackend
    #: Host lease ops (None: this server answers them as unavailable).
    hosts: HostLeaseCalls | None
    figures: Callable[[], ServerFigures]
    timeout: float

    async def respond(self, request: Frame, peer: Conversation) -> dict[str, Any]:
        request_id, op = request.id, request.op
        try:
            with anyio.fail_after(self.timeout):
                result = await _HANDLERS[op](self, request, peer)
            return ok_frame(request_id, to_wire(result))
        except TimeoutError:
            detail = f"{op} did not complete within {self.timeout}s; it may still take effect"
            return error_frame(request_id, TIMEOUT, detail)
        except SupervisorError as exc:
            return error_frame(request_id, exc.code, exc.detail)
        except Exception:
            _log.exception("socket_request_failed", op=op)
            return error_frame(request_id, INTERNAL_ERROR, "the supervisor failed on this request")

    async def authorize_pid(self, pid: int, peer: Conversation, op: str) -> None:
        """Refuse (``PermissionDenied``) a peer that may not act for ``pid``; the denial is
        audited (committed) before it is answered, as every denial is."""
        try:
            authorize_pid(self.probes, pid, peer, op)
        except PermissionDenied as exc:
            await self.handle.audit_peer_denied(
                surface="socket", action=op, reason=exc.detail, peer_pid=_peer_pid(peer)
            )
            raise

    # --- workers: peer credentials, not tokens ------------------------------------------

    async def register(self, request: Frame, peer: Conversation) -> object:
        args = request_as(request.args, RegisterRequest)
        pid = args.pid if args.pid is not None else peer.pid("register")
        await self.authorize_pid(pid, peer, "register")
        return await self.handle.register(pid, args.claims or {})

    async def fenced(self, request: Frame, peer: Conversation) -> object:
        """Heartbeat or release, for the registration it names in full."""
        args = request.args
        if not isinstance(args, HeartbeatRequest | ReleaseRequest):
            raise TypeError(f"a heartbeat or release expected, got {type(args).__name__}")
        await self.authorize_pid(args.pid, peer, request.op)
        call = self.handle.heartbeat if request.op == "heartbeat" else self.handle.release
        return await call(
            args.worker_identity,
            pid=args.pid,
            generation_id=args.generation_id,
            fencing_epoch=args.fencing_epoch,
        )

    # --- the operator: a profile token --------------------------------------------------

    async def operator(self, request: Frame, peer: Conversation) -> object:
        """Every op of a profile: its request to the handle's one ``call`` (the grant first)."""
        profile = await self._authenticate(request, peer)
        return await self.handle.call(profile, request.args)

    async def status(self, request: Frame, peer: Conversation) -> object:
        figures = self.figures()
        profile = await self._status_caller(request, peer)
        return await status_report(self.handle, profile, figures)

    async def host(self, request: Frame, peer: Conversation) -> object:
        profile = await self._authenticate(request, peer)
        return await dispatch_hosts(self.hosts, profile, request.args)

    async def _authenticate(
        self,
        request: Frame,
        peer: Conversation,
        *,
        missing: str = "this operation needs a profile token (token)",
    ) -> Profile:
        token = request.token
        if token:
            profile = self.profiles.authenticate(token)
            if profile is not None:
                return profile
            broken = self.profiles.error
            if broken is not None:
                # Not the caller's fault: saying "unauthenticated" would send an operator
                # after their token while the file they edited is what is broken. Audited
                # (committed) before the refusal is sent, as every denial is.
                refusal = ProfilesUnreadable(f"no token can be proved right now: {broken}")
                await self.handle.audit_profiles_unreadable(
                    surface="socket",
                    action=request.op,
                    reason=refusal.detail,
                    peer_pid=_peer_pid(peer),
                )
                raise refusal
            reason = "the token proves no profile"
        else:
            reason = missing
        # A denial like any other: logged and audited (committed) before the refusal is sent.
        await self.handle.audit_unauthenticated(
            surface="socket", action=request.op, reason=reason, peer_pid=_peer_pid(peer)
        )
        raise Unauthenticated(reason)

    async def _status_caller(self, request: Frame, peer: Conversation) -> Profile | None:
        """A token's profile; without a token, None for the socket's owner (same uid as
        this daemon, by peer credentials), who may read ``status`` as at their terminal."""
        credentials = peer.credentials
        if not request.token and credentials is not None and credentials[1] == os.geteuid():
            return None
        return await self._authenticate(
            request,
            peer,
            missing="status needs a profile token (token), or a connection from the uid "
            "that runs the supervisor",
        )


def _peer_pid(peer: Conversation) -> int | None:
    return peer.credentials[0] if peer.credentials is not None else None


def _handler(op: str) -> _Handler:
    if op in HOST_OPS:
        return Dispatcher.host
    if op in WORKER_OPS:
        return Dispatcher.register if op == "register" else Dispatcher.fenced
    if op == "status":
        return Dispatcher.status
    return Dispatcher.operator


#: Every declared op -> the Dispatcher method that answers it.
_HANDLERS: Mapping[str, _Handler] = {op: _handler(op) for op in OPERATIONS}
