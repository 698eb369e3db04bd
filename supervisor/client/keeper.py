"""The heartbeat keeper: registers a worker, beats, re-registers and releases it."""

from __future__ import annotations

import logging
import os
import random
import socket
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, ClassVar, Self, TypedDict, Unpack

import anyio
from anyio.abc import TaskGroup

from supervisor.client.connection import AsyncClient
from supervisor.client.remote import RemoteError
from supervisor.clock import Clock, SystemClock
from supervisor.errors import SupervisorError

__all__ = [
    "HeartbeatKeeper",
    "HeartbeatThread",
    "KeeperOptions",
    "keep_registered",
    "start_heartbeat_thread",
]

# Named for the package (the name workers configure), not this module. Standard logging,
# not structlog: this runs inside arbitrary worker processes, and an unconfigured
# structlog prints to stdout, which an MCP stdio server must keep clean.
_log = logging.getLogger("supervisor.client")

#: Heartbeat answers that mean "this registration is over: register again".
_REREGISTER = frozenset({"registration_not_active", "unknown_registration"})
_FALLBACK_INTERVAL = 10.0
_MIN_INTERVAL = 0.05


class _Refused(SupervisorError):
    """The supervisor answered, but not with what the keeper needs (a result, not a fault)."""

    code: ClassVar[str] = "keeper_refused"


class HeartbeatKeeper:
    """Keeps this process (or ``pid``) registered: registers, beats, re-registers, releases.

    It never raises into the worker for supervisor trouble: an unreachable or
    refusing supervisor is retried with capped, jittered exponential backoff,
    and ``last_error`` says why the latest attempt failed.
    """

    def __init__(
        self,
        socket_path: str | os.PathLike[str],
        claims: Mapping[str, Any],
        *,
        pid: int | None = None,
        clock: Clock | None = None,
        timeout: float = 10.0,
        initial_backoff: float = 0.5,
        max_backoff: float = 30.0,
        jitter: float = 0.1,
        rng: random.Random | None = None,
    ) -> None:
        self.socket_path = Path(socket_path)
        self.claims = dict(claims)
        self.pid = pid
        self.timeout = timeout
        self._clock: Clock = clock or SystemClock()
        self._initial_backoff = initial_backoff
        self._max_backoff = max_backoff
        self._jitter = jitter
        self._rng = rng or random.Random()
        self._client = AsyncClient(self.socket_path, timeout=timeout)
        self._registration: dict[str, Any] | None = None
        self._task_group: TaskGroup | None = None
        self._loop_scope: anyio.CancelScope | None = None
        self._abandoned = False
        self._changed = anyio.Event()
        self.registrations_made = 0
        self.beats_sent = 0
        self.attempts = 0
        self.consecutive_failures = 0
        self.last_error: str | None = None
        self.next_delay: float | None = None

    @property
    def registration(self) -> Mapping[str, Any] | None:
        """The registration currently kept alive, or None while (re-)registering."""
        return self._registration

    async def wait_until(self, predicate: Callable[[HeartbeatKeeper], bool]) -> None:
        """Return once ``predicate(self)`` holds; re-checked after every exchange."""
        while not predicate(self):
            await self._changed.wait()

    def abandon(self) -> None:
        """Stop beating and skip the release on exit (the worker crashed).

        The row then goes stale and is retired through the normal, evidence-checked
        path instead of being marked a clean exit.
        """
        self._abandoned = True
        if self._loop_scope is not None:
            self._loop_scope.cancel()

    def _notify(self) -> None:
        changed, self._changed = self._changed, anyio.Event()
        changed.set()

    async def __aenter__(self) -> Self:
        if self._task_group is not None:
            raise RuntimeError("this HeartbeatKeeper is already running")
        # The first attempt runs before the body so a reachable supervisor has registered
        # the worker by the time it starts serving; failure only schedules a retry.
        delay = await self._step()
        # Made here, not in __init__: a cancel scope needs a running event loop, and the
        # thread variant builds its keeper before its loop exists.
        self._loop_scope = anyio.CancelScope()
        if self._abandoned:
            self._loop_scope.cancel()
        task_group = anyio.create_task_group()
        await task_group.__aenter__()
        task_group.start_soon(self._loop, self._loop_scope, delay)
        self._task_group = task_group
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        task_group, self._task_group = self._task_group, None
        try:
            if task_group is not None:
                task_group.cancel_scope.cancel()
                if isinstance(exc, anyio.get_cancelled_exc_class()):
                    # Cancellation must pass through the scope that may have caused it.
                    return await task_group.__aexit__(exc_type, exc, tb)
                # Any other exception is the worker's own: handing it to the task group
                # would come back wrapped in an ExceptionGroup.
                await task_group.__aexit__(None, None, None)
            return None
        finally:
            # Shielded: a worker stopping because it was cancelled should still say goodbye.
            with anyio.CancelScope(shield=True):
                with anyio.move_on_after(self.timeout):
                    await self._release()
                await self._client.aclose()

    async def _loop(self, scope: anyio.CancelScope, delay: float) -> None:
        # Its own scope, so abandon() stops the beats without cancelling the worker's code
        # (the task group's scope encloses the body of ``async with``).
        with scope:
            while True:
                await self._clock.sleep(delay)
                delay = await self._step()

    async def _step(self) -> float:
        """One exchange with the supervisor; returns how long to wait before the next."""
        self.attempts += 1
        try:
            if self._registration is None or not await self._beat():
                await self._register()
        except RemoteError as exc:
            delay = self._failed(f"{exc.remote_code}: {exc.detail}")
        except SupervisorError as exc:
            delay = self._failed(f"{exc.code}: {exc.detail}")
        except Exception as exc:
            # Never the worker's problem: log it loudly and keep trying.
            _log.exception("heartbeat_keeper_step_failed")
            delay = self._failed(repr(exc))
        else:
            self.consecutive_failures = 0
            self.last_error = None
            delay = self._interval()
        # Published before waking waiters, so they see the state and the wait together.
        self.next_delay = delay
        self._notify()
        return delay

    async def _register(self) -> None:
        result = await self._client.register(self.claims, pid=self.pid)
        registration = result.get("registration")
        if not result.get("ok") or not isinstance(registration, dict):
            raise _Refused(f"{result.get('code')}: {result.get('detail')}")
        self._registration = registration
        self.registrations_made += 1
        _log.info("registered", extra={"worker_identity": registration.get("worker_identity")})

    async def _beat(self) -> bool:
        """True when the beat was recorded; False when the registration is over."""
        assert self._registration is not None
        result = await self._client.heartbeat(self._registration)
        if result.get("ok"):
            self.beats_sent += 1
            return True
        code = result.get("code")
        if code in _REREGISTER:
            _log.warning("registration_ended", extra={"code": code, "action": "register_again"})
            self._registration = None
            return False
        raise _Refused(f"{code}: {result.get('detail')}")

    async def _release(self) -> None:
        registration, self._registration = self._registration, None
        if registration is None or self._abandoned:
            return
        try:
            await self._client.release(registration)
        except SupervisorError as exc:
            # The supervisor's liveness probe will notice the exit anyway.
            _log.warning("release_failed", extra={"detail": exc.detail})
        self._notify()

    def _interval(self) -> float:
        registration = self._registration or {}
        interval = registration.get("heartbeat_interval_seconds")
        if isinstance(interval, int | float) and not isinstance(interval, bool):
            return max(_MIN_INTERVAL, float(interval))
        ttl = registration.get("heartbeat_ttl_seconds")
        if isinstance(ttl, int | float) and not isinstance(ttl, bool):
            return max(_MIN_INTERVAL, float(ttl) / 3)
        return _FALLBACK_INTERVAL

    def _failed(self, error: str) -> float:
        self.consecutive_failures += 1
        self.last_error = error
        cap = self._max_backoff
        if self._registration is not None:
            # While holding a registration, retry at least as often as beats are due, so
            # the row is refreshed promptly once the supervisor is back.
            cap = min(cap, self._interval())
        exponent = min(self.consecutive_failures - 1, 32)
        delay = min(cap, self._initial_backoff * 2.0**exponent)
        # Jitter spreads a fleet's retries after a supervisor restart.
        delay *= 1 + self._jitter * (2 * self._rng.random() - 1)
        delay = max(_MIN_INTERVAL, delay)
        _log.warning(
            "supervisor_exchange_failed", extra={"error": str(error), "retry_in_seconds": delay}
        )
        return delay


#: ``async with keep_registered(path, claims) as keeper:`` keeps the worker registered. The
#: keeper's own constructor, under the name a worker's code reads best.
keep_registered = HeartbeatKeeper


class HeartbeatThread:
    """A keeper on its own daemon thread and event loop; call the object to stop it.

    The thread is a daemon so a worker that exits without stopping it is not
    held open; its registration then ends through the supervisor's liveness probe.
    """

    def __init__(self, keeper: HeartbeatKeeper) -> None:
        self.keeper = keeper
        self._wake_receive, self._wake_send = socket.socketpair()
        self._ready = threading.Event()
        self._stop_lock = threading.Lock()
        self._stopped = False
        self._thread = threading.Thread(target=self._main, name="fleet-heartbeat", daemon=True)

    def start(self) -> None:
        """Start the thread; returns after the first registration attempt."""
        self._thread.start()
        self._ready.wait()

    def _main(self) -> None:
        try:
            anyio.run(self._run)
        except Exception:
            _log.exception("heartbeat_thread_failed")
        finally:
            self._ready.set()

    async def _run(self) -> None:
        async with self.keeper:
            self._ready.set()
            await anyio.wait_readable(self._wake_receive)

    def __call__(self) -> None:
        """Stop beating, release the registration and wait for the thread (idempotent)."""
        with self._stop_lock:
            if self._stopped:
                return
            self._stopped = True
        try:
            self._wake_send.send(b"\0")
            if self._thread.is_alive():
                self._thread.join(self.keeper.timeout * 2 + 1)
        finally:
            self._wake_send.close()
            self._wake_receive.close()


class KeeperOptions(TypedDict, total=False):
    """What ``start_heartbeat_thread`` passes on to its ``HeartbeatKeeper`` (same defaults)."""

    pid: int | None
    timeout: float
    initial_backoff: float
    max_backoff: float
    jitter: float


def start_heartbeat_thread(
    socket_path: str | os.PathLike[str],
    claims: Mapping[str, Any],
    **options: Unpack[KeeperOptions],
) -> HeartbeatThread:
    """For non-async workers: ``stop = start_heartbeat_thread(path, claims)`` … ``stop()``."""
    thread = HeartbeatThread(HeartbeatKeeper(socket_path, claims, **options))
    thread.start()
    return thread
