"""Socket request dispatch: one handler per declared op, each reached by the op's name."""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import KW_ONLY, dataclass, fields
from typing import TYPE_CHECKING, Any, Protocol

import anyio

from supervisor.errors import (
    PermissionDenied,
    ProfilesUnreadable,
    ProtocolError,
    SupervisorError,
)
from supervisor.handle import SupervisorHandle
from supervisor.handle.hosts import HostLeaseCalls
from supervisor.observe.logs import get_logger
from supervisor.operations.registry import CONTROL_OPS, HOST_OPS, OPERATIONS
from supervisor.policy.control.permissions import Profile
from supervisor.surfaces.socket.answers import to_wire
from supervisor.surfaces.socket.fleet_args import (
    ApplyArgs,
    FencedArgs,
    PlanArgs,
    RegisterArgs,
    SnapshotArgs,
)
from supervisor.surfaces.socket.hosts import dispatch_hosts
from supervisor.surfaces.socket.peer_auth import Conversation, authorize_pid
from supervisor.surfaces.socket.protocol import Unauthenticated
from supervisor.surfaces.socket.protocol_control import ControlArgs
from supervisor.surfaces.socket.protocol_hosts import HostArgs
from supervisor.surfaces.socket.request import Request
from supervisor.surfaces.socket.status import ServerFigures, status_report
from supervisor.system.probes import ProbeBackend
from supervisor.wire import INTERNAL_ERROR, TIMEOUT, error_frame, ok_frame

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

__all__ = ["Dispatcher", "ProfileLookupWithAuth"]

_log = get_logger()

_Handler = Callable[["Dispatcher", Request, Conversation], Awaitable[object]]


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

    async def respond(self, request: Request, peer: Conversation) -> dict[str, Any]:
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

    async def register(self, request: Request, peer: Conversation) -> object:
        args = _expect(request, RegisterArgs)
        pid = args.pid if args.pid is not None else peer.pid("register")
        await self.authorize_pid(pid, peer, "register")
        return await self.handle.register(pid, args.claims)

    async def fenced(self, request: Request, peer: Conversation) -> object:
        """Heartbeat or release: the handle call the op declares, for the named registration."""
        args = _expect(request, FencedArgs)
        await self.authorize_pid(args.pid, peer, request.op)
        return await getattr(self.handle, OPERATIONS[request.op].call)(**_keywords(args))

    # --- the operator: a profile token --------------------------------------------------

    async def operator(self, request: Request, peer: Conversation) -> object:
        """Snapshot, plan or apply: the handle call the op declares, for the token's profile."""
        args = _expect(request, SnapshotArgs | PlanArgs | ApplyArgs)
        profile = await self._authenticate(request, peer)
        return await getattr(self.handle, OPERATIONS[request.op].call)(profile, **_keywords(args))

    async def status(self, request: Request, peer: Conversation) -> object:
        figures = self.figures()
        profile = await self._status_caller(request, peer)
        return await status_report(self.handle, profile, figures)

    async def control(self, request: Request, peer: Conversation) -> object:
        args = _expect(request, ControlArgs)
        # Authorization happens in the handle (``decide``), as for MCP callers.
        profile = await self._authenticate(request, peer)
        return await self.handle.invoke(args.op, profile, args.values)

    async def host(self, request: Request, peer: Conversation) -> object:
        args = _expect(request, HostArgs)
        profile = await self._authenticate(request, peer)
        return await dispatch_hosts(self.hosts, profile, args)

    async def _authenticate(
        self,
        request: Request,
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

    async def _status_caller(self, request: Request, peer: Conversation) -> Profile | None:
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


def _keywords(args: DataclassInstance) -> dict[str, Any]:
    # The arguments dataclasses' fields are the ops' declared arguments (``fleet_args``
    # checks that), which are the handle calls' keyword parameters.
    return {f.name: getattr(args, f.name) for f in fields(args)}


def _expect(request: Request, kind: Any) -> Any:
    if not isinstance(request.args, kind):
        raise ProtocolError(f"op {request.op!r} has no handler")
    return request.args


def _handler(op: str) -> _Handler:
    if op in CONTROL_OPS:
        return Dispatcher.control
    if op in HOST_OPS:
        return Dispatcher.host
    if op in ("heartbeat", "release"):
        return Dispatcher.fenced
    if op in ("snapshot", "plan", "apply"):
        return Dispatcher.operator
    handler: _Handler = getattr(Dispatcher, op)
    return handler


#: Every declared op -> the Dispatcher method that answers it.
_HANDLERS: Mapping[str, _Handler] = {op: _handler(op) for op in OPERATIONS}
