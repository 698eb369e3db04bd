"""A stand-in MCP client: starts the children its spec names, prints their pids, waits.

``python fake_client.py SPEC`` where SPEC is JSON: a list of ``{"argv": [...], "stdio":
"pipe" | "socket" | "devnull", "executable": PATH}``. Each child runs ``executable``
(``argv[0]`` is only its name, so a test can make it look like any program), with stdin
and stdout as pipes, socket-pair halves or /dev/null (``"stderr": "pipe"``: its stderr
too, a pipe the client only reads, as clients collect servers' logs; ``"env"``: variables
added to its environment, such as a test's marker). The client keeps its ends open,
prints ``{"children": [pid, ...]}`` and sleeps, bounded by ``LIFETIME_SECONDS``. SIGUSR1
makes it close its ends of every child's stdio and keep running. SIGUSR2 makes it start
one more copy of its first child over pipes (a reconnect that leaves the old copy
running) and print ``{"children": [pid]}`` for it.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time

LIFETIME_SECONDS = 120.0


def main() -> int:
    spec = json.loads(sys.argv[1])
    children = []
    kept: list[object] = []
    for child in spec:
        stdio = child.get("stdio", "pipe")
        if stdio == "socket":
            (mine_in, theirs_in), (mine_out, theirs_out) = socket.socketpair(), socket.socketpair()
            process = subprocess.Popen(
                child["argv"],
                executable=child["executable"],
                stdin=theirs_in.fileno(),
                stdout=theirs_out.fileno(),
            )
            theirs_in.close()
            theirs_out.close()
            kept += [mine_in, mine_out]
        else:
            pipe = subprocess.PIPE if stdio == "pipe" else subprocess.DEVNULL
            process = subprocess.Popen(
                child["argv"],
                executable=child["executable"],
                stdin=pipe,
                stdout=pipe,
                stderr=subprocess.PIPE if child.get("stderr") == "pipe" else None,
                env={**os.environ, **child.get("env", {})},
            )
        kept.append(process)
        children.append(process.pid)

    def close_ends(_signal: int, _frame: object) -> None:
        for item in kept:
            if isinstance(item, subprocess.Popen):
                for stream in (item.stdin, item.stdout):
                    if stream is not None:
                        stream.close()
            elif isinstance(item, socket.socket):
                item.close()

    def start_again(_signal: int, _frame: object) -> None:
        first = spec[0]
        process = subprocess.Popen(
            first["argv"],
            executable=first["executable"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        kept.append(process)
        print(json.dumps({"children": [process.pid]}), flush=True)

    signal.signal(signal.SIGUSR1, close_ends)
    signal.signal(signal.SIGUSR2, start_again)
    print(json.dumps({"children": children}), flush=True)
    time.sleep(LIFETIME_SECONDS)
    return 0


if __name__ == "__main__":
    sys.exit(main())
