"""Headless Chromium driven over its DevTools pipe: open a page, run a script in it (a click)."""

# --remote-debugging-pipe: Chromium reads DevTools commands on fd 3 and answers on fd 4,
# each message a JSON object followed by a NUL byte. Blocking I/O: run it in a thread.

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any

from tests.integration.test_fleet_page import chromium_argv

__all__ = ["run_in_page"]

#: Hang guards, not timing assertions.
_DEADLINE_SECONDS = 90.0


class _Pipe:
    def __init__(self, commands: int, answers: int) -> None:
        self._commands, self._answers = commands, answers
        self._buffer = b""
        self._next_id = 0
        self._deadline = time.monotonic() + _DEADLINE_SECONDS

    def _message(self) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            if time.monotonic() > self._deadline:
                raise AssertionError("Chromium did not answer in time")
            chunk = os.read(self._answers, 65536)
            if not chunk:
                raise AssertionError("Chromium closed its DevTools pipe")
            self._buffer += chunk
        raw, _, self._buffer = self._buffer.partition(b"\0")
        message: dict[str, Any] = json.loads(raw)
        return message

    def call(self, method: str, session: str | None = None, **params: Any) -> dict[str, Any]:
        self._next_id += 1
        command: dict[str, Any] = {"id": self._next_id, "method": method, "params": params}
        if session is not None:
            command["sessionId"] = session
        os.write(self._commands, json.dumps(command).encode() + b"\0")
        while True:
            message = self._message()
            if message.get("id") == self._next_id:
                assert "error" not in message, message
                result: dict[str, Any] = message["result"]
                return result

    def wait_event(self, method: str) -> None:
        while self._message().get("method") != method:
            pass


def run_in_page(url: str, expression: str, profile: Path) -> Any:
    """Open ``url`` in headless Chromium, wait for its load event, and return the value of
    ``expression`` (awaited if a promise). Chromium is killed by its pid at the end."""
    to_chrome_r, to_chrome_w = os.pipe()
    from_chrome_r, from_chrome_w = os.pipe()
    argv = chromium_argv(profile, "--remote-debugging-pipe", "about:blank")
    pid = os.posix_spawn(
        argv[0],
        argv,
        dict(os.environ),
        file_actions=[
            (os.POSIX_SPAWN_DUP2, to_chrome_r, 3),
            (os.POSIX_SPAWN_DUP2, from_chrome_w, 4),
        ],
    )
    os.close(to_chrome_r)
    os.close(from_chrome_w)
    try:
        pipe = _Pipe(to_chrome_w, from_chrome_r)
        target = pipe.call("Target.createTarget", url="about:blank")["targetId"]
        session = pipe.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        pipe.call("Page.enable", session)
        pipe.call("Page.navigate", session, url=url)
        pipe.wait_event("Page.loadEventFired")
        result = pipe.call(
            "Runtime.evaluate",
            session,
            expression=expression,
            awaitPromise=True,
            returnByValue=True,
        )
        assert "exceptionDetails" not in result, result
        return result["result"].get("value")
    finally:
        _close(pid, to_chrome_w, from_chrome_r)


def _close(pid: int, commands: int, answers: int) -> None:
    """Closing the pipe asks Chromium to quit (it stops its own helpers); one that is still
    there after a bounded wait is killed by its pid (our child, not yet waited for)."""
    os.close(commands)
    os.close(answers)
    for _ in range(1000):
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done:
            return
        time.sleep(0.01)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
