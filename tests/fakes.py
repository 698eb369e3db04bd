"""Test doubles shared across test packages: a scripted ProbeBackend with settable answers."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from supervisor.policy.incarnation import start_of
from supervisor.system.probes import ProcessEvidence

__all__ = ["ScriptedProbes"]


@dataclass(slots=True)
class _PidScript:
    alive: bool | None
    start_time: str | None
    parent: int | None = None
    cwd: str | None = None


class ScriptedProbes:
    """A ProbeBackend whose per-pid answers are set by the test; unknown pids are 'cannot tell'.

    Every probed pid is appended to `probed`, so tests can assert that a re-probe happened.
    A scripted start may carry a pidfd inode (``ticks-5@ino-9``): ``probe`` answers its start
    alone, as a stat read does, and ``identify`` the whole token.
    """

    def __init__(
        self,
        *,
        host_id: str | None = "host-test",
        boot_id: str | None = "boot-test",
        unknown_alive: bool | None = None,
    ) -> None:
        self._host_id = host_id
        self._boot_id = boot_id
        # None by default so a test that forgot to script a pid never gets a silent "dead".
        self._unknown_alive = unknown_alive
        self._scripts: dict[int, _PidScript] = {}
        self.probed: list[int] = []

    # --- scripting ---

    def set_host_id(self, value: str | None) -> None:
        self._host_id = value

    def set_boot_id(self, value: str | None) -> None:
        self._boot_id = value

    def set(
        self,
        pid: int,
        *,
        alive: bool | None,
        start_time: str | None = None,
        parent: int | None = None,
        cwd: str | None = None,
    ) -> None:
        """Script pid's answers; a dead pid never reports a start time, as the real probes."""
        self._scripts[pid] = _PidScript(
            alive=alive,
            start_time=None if alive is False else start_time,
            parent=parent,
            cwd=cwd,
        )

    def kill(self, pid: int) -> None:
        """The process behind pid exits and is reaped."""
        script = self._scripts.setdefault(pid, _PidScript(alive=False, start_time=None))
        script.alive = False
        script.start_time = None
        script.parent = None
        script.cwd = None

    def revive(self, pid: int, start_time: str, *, parent: int | None = None) -> None:
        """A new process takes pid: alive, with a (normally different) start time."""
        self._scripts[pid] = _PidScript(alive=True, start_time=start_time, parent=parent)

    def forget(self, pid: int) -> None:
        """Return pid to the unscripted 'cannot tell' answer."""
        self._scripts.pop(pid, None)

    # --- ProbeBackend ---

    def host_id(self) -> str | None:
        return self._host_id

    def boot_id(self) -> str | None:
        return self._boot_id

    def probe(self, pid: int) -> ProcessEvidence:
        seen = self.identify(pid)
        if seen.start_time is None:
            return seen
        return ProcessEvidence(pid=pid, alive=seen.alive, start_time=start_of(seen.start_time))

    def identify(self, pid: int) -> ProcessEvidence:
        self.probed.append(pid)
        script = self._scripts.get(pid)
        if script is None:
            return ProcessEvidence(pid=pid, alive=self._unknown_alive, start_time=None)
        return ProcessEvidence(pid=pid, alive=script.alive, start_time=script.start_time)

    def probe_many(self, pids: Sequence[int]) -> list[ProcessEvidence]:
        return [self.probe(pid) for pid in pids]

    def parent_pid(self, pid: int) -> int | None:
        script = self._scripts.get(pid)
        return None if script is None else script.parent

    def process_cwd(self, pid: int) -> str | None:
        script = self._scripts.get(pid)
        return None if script is None else script.cwd
