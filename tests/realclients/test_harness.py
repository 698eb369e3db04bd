"""The leftover harness itself: the marker finds a server's whole tree and kill_all ends it."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.realclients.harness import (
    MARKER_ENV,
    SERVER_ENV,
    STUBBORN_SERVER,
    kill_all,
    leftovers,
    new_marker,
    process_kind,
)

pytestmark = pytest.mark.integration


def _until(predicate: object, what: str) -> None:
    """A hang guard of 30 s, not a timing claim."""
    assert callable(predicate)
    deadline = time.monotonic() + 30
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"gave up waiting for {what}")
        time.sleep(0.02)


def test_the_marker_finds_a_stubborn_server_and_its_child_and_kill_all_ends_both(
    tmp_path: Path,
) -> None:
    marker = new_marker()
    log = tmp_path / "signals.log"
    server = subprocess.Popen(
        [sys.executable, str(STUBBORN_SERVER), "--child", "--log", str(log)],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        env={**os.environ, MARKER_ENV: marker, SERVER_ENV: "probe"},
    )
    try:
        _until(lambda: len(leftovers(marker)) == 2, "the server and its child")
        assert server.stdin is not None
        server.stdin.close()
        server.terminate()  # ignored, and logged
        _until(lambda: "signal SIGTERM" in log.read_text(), "the SIGTERM in the log")
        procs = leftovers(marker)
        assert {p.pid for p in procs} >= {server.pid}
        assert sorted(p.kind for p in procs) == [
            "python stubborn_server.py",
            "python stubborn_server.py (child)",
        ]
        assert {p.server for p in procs} == {"probe"}
        assert "eof" in log.read_text()
        killed = kill_all(marker)
        assert {p.pid for p in killed} == {p.pid for p in procs}
        # The server is our child: a zombie until reaped, and zombies are not leftovers.
        assert leftovers(marker) == []
    finally:
        kill_all(marker)
        if server.poll() is None:
            server.kill()
        server.wait(timeout=30)


def test_process_kinds_name_the_npx_tree() -> None:
    assert process_kind(["node", "/usr/bin/npx", "-y", "pkg"]) == "npx (npm exec)"
    assert process_kind(["npm exec @scope/pkg"]) == "npx (npm exec)"
    assert process_kind(["npm", "exec", "@scope/pkg"]) == "npx (npm exec)"
    assert process_kind(["/usr/bin/env", "node", "/usr/bin/npx", "-y", "p"]) == "npx (npm exec)"
    assert process_kind(["sh", "-c", "mcp-server-everything"]) == "sh"
    assert process_kind(["node", "/x/.bin/mcp-server-everything"]) == "node mcp-server-everything"
    assert process_kind(["/v/bin/python", "/v/bin/fleet-supervisor", "exec"]) == (
        "fleet-supervisor exec"
    )
