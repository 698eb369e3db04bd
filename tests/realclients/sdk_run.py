"""The SDK client (``sdk_client.py``) run for one test: started, read line by line, stopped."""

from __future__ import annotations

import selectors
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO

from tests.realclients.harness import ClientHome, client_env, kill_all, kill_pid

__all__ = ["client_line", "sdk_client"]

#: How long a line from the client is waited for.
_LIMIT = 60.0


def client_line(stream: IO[bytes], prefix: str) -> list[str]:
    """The words of the client's next line starting with ``prefix`` (bounded)."""
    with selectors.DefaultSelector() as selector:
        selector.register(stream, selectors.EVENT_READ)
        while selector.select(timeout=_LIMIT):
            line = stream.readline().decode()
            if not line:
                break
            if line.startswith(prefix):
                return line.split()
    raise AssertionError(f"the SDK client never printed {prefix!r}")


@contextmanager
def sdk_client(argv: list[str], home: ClientHome, marker: str) -> Iterator[subprocess.Popen[bytes]]:
    """The client ``argv`` in ``home``, its stdin and stdout piped to the test; at the end
    it is killed by pid and so is every process carrying ``marker`` (its servers)."""
    client = subprocess.Popen(
        argv,
        cwd=home.project,
        env=client_env(home.home),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        process_group=0,
    )
    assert client.stdin is not None
    assert client.stdout is not None
    try:
        yield client
    finally:
        kill_pid(client.pid)
        client.wait(timeout=30)
        client.stdin.close()
        client.stdout.close()
        kill_all(marker)
