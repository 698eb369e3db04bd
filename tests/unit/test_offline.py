"""The offline part of the suite: a namespace with only loopback, made by tests/offline.py."""

from __future__ import annotations

import errno
import os
import socket
import subprocess
import sys
import textwrap

import pytest

from tests import offline
from tests.installed_package import ROOT
from tests.unavailable import unavailable

#: TEST-NET-1 (RFC 5737): an address no machine answers for, reachable only by a route.
_ELSEWHERE = ("192.0.2.1", 9)


@pytest.mark.offline
def test_the_offline_part_runs_with_only_loopback() -> None:
    # tests/run.sh starts this part in the namespace; a run outside it is told here, and
    # every real client's test says why it does not run (the harness's `missing`).
    if not offline.offline():
        unavailable(f"not offline, interfaces {socket.if_nameindex()}; {offline.OFFLINE_HINT}")
    # A UDP connect sends nothing; it only needs a route, and there is none.
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock, pytest.raises(OSError) as raised:
        sock.connect(_ELSEWHERE)
    assert raised.value.errno == errno.ENETUNREACH
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        with socket.create_connection(server.getsockname(), timeout=10):
            pass


def test_a_fresh_namespace_gets_loopback_up_and_no_borrowed_rights() -> None:
    unshare = ["unshare", "--net"]
    if os.geteuid() != 0:
        unshare = ["unshare", "--map-current-user", "--keep-caps", "--net"]
    probe = textwrap.dedent(
        """
        import os, socket
        status = open("/proc/self/status").read().splitlines()
        caps = [line.split()[1] for line in status if line.startswith("CapAmb:")]
        with socket.socket() as server:
            server.bind(("127.0.0.1", 0))
            server.listen()
            socket.create_connection(server.getsockname(), timeout=10).close()
        print([name for _, name in socket.if_nameindex()], os.geteuid(), caps)
        """
    )
    done = subprocess.run(
        [*unshare, sys.executable, "-m", "tests.offline", "--", sys.executable, "-c", probe],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    if done.returncode != 0 and "unshare" in done.stderr:
        unavailable(f"cannot create a network namespace: {done.stderr.strip()}")
    assert done.returncode == 0, done.stderr
    names, uid, ambient = done.stdout.strip().rsplit(" ", 2)
    # The same user as outside; a non-root run holds no capability once lo is up.
    assert names == "['lo']", done.stdout
    assert int(uid) == os.geteuid(), done.stdout
    if os.geteuid() != 0:
        assert ambient == "['0000000000000000']", done.stdout


def test_a_namespace_with_other_interfaces_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(offline, "_others", lambda: ["eth0"])
    assert not offline.offline()
    with pytest.raises(RuntimeError, match="claude runs only in a loopback-only namespace"):
        offline.require_offline("claude")
    # The launcher refuses before it execs anything.
    assert offline.main(["--", "/bin/false"]) == 125
    assert offline.main([]) == 2
