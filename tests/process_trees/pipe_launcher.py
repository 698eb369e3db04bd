"""A short-lived client: starts a server on pipes, gives copies of their client ends away, exits.

``python pipe_launcher.py SPEC`` where SPEC is JSON ``{"server": [argv...], "executable":
PATH?, "holders": [{"kind": ..., "end": "stdin" | "stdout", "uid": N?}, ...], "env":
{...}}``. The server
gets the read end of a stdin pipe and the write end of a stdout pipe. Each holder keeps a
copy of the client's end of one of them:

* ``sleep``: a ``sleep`` holding it;
* ``shell``: a shell that keeps its own copy (fd 9) while it waits for a ``sleep`` that
  holds none;
* ``server``: the server itself holds it too (a pipe both of whose ends it holds);
* ``uid``, when given, runs the holder as that user (only root can).

The launcher prints ``{"server": pid, "holders": [pid, ...]}`` and exits, closing its
own ends: the server's parent is gone, and only the holders keep the pipes' client side.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

LIFETIME = "120"


def main() -> int:
    spec = json.loads(sys.argv[1])
    stdin_r, stdin_w = os.pipe()
    stdout_r, stdout_w = os.pipe()
    client_end = {"stdin": stdin_w, "stdout": stdout_r}
    own = [client_end[h["end"]] for h in spec["holders"] if h["kind"] == "server"]
    env = {**os.environ, **spec.get("env", {})}
    server = subprocess.Popen(
        spec["server"],
        executable=spec.get("executable"),
        stdin=stdin_r,
        stdout=stdout_w,
        pass_fds=own,
        env=env,
    )
    holders = []
    for holder in spec["holders"]:
        end = client_end[holder["end"]]
        uid = holder.get("uid")
        if holder["kind"] == "sleep":
            argv = ["sh", "-c", f"exec sleep {LIFETIME}"]
        elif holder["kind"] == "shell":
            # The shell keeps a copy (fd 9) and runs sleep without any; the ``:`` after
            # it stops the shell from exec'ing into sleep.
            argv = ["sh", "-c", f"exec 9>&{end} {end}>&-; sleep {LIFETIME} 9>&-; :"]
        else:
            continue
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            pass_fds=(end,),
            user=uid,
            group=uid,
            extra_groups=None if uid is None else [],
        )
        holders.append(proc.pid)
    print(json.dumps({"server": server.pid, "holders": holders}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
