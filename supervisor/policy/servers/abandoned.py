"""Whether a server's stdio proves its client gone: every other end released, by the kernel's word.

A server with no owner recorded is abandoned only when, for each descriptor that carries
its stdio, the kernel says no process anywhere holds the other end: a socket pair's peer
is released (sock_diag), or a pipe has no write end left for its stdin and no read end
left for its stdout (the pipe's own count, ``system.pipe_ends``). One end still held, or
one that could not be asked about, keeps the server.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "STDIO_ABANDONED",
    "STDIO_ABANDONED_PIPE",
    "Abandonment",
    "EndState",
    "judge_abandoned",
]

#: Evidence: the other end of each of its stdio sockets is released (its client is gone).
STDIO_ABANDONED = "stdio_abandoned"
#: Evidence: ... and at least one of them is a pipe whose other end no process holds.
STDIO_ABANDONED_PIPE = "stdio_abandoned_pipe"

_ROLES = ("stdin", "stdout")


@dataclass(frozen=True, slots=True, kw_only=True)
class EndState:
    """One descriptor of a server's stdio, and the kernel's word on its other end:
    ``released`` True (no process holds it), False (one does), None (not told)."""

    link: str | None
    released: bool | None
    why: str

    @property
    def pipe(self) -> bool:
        return self.link is not None and self.link.startswith("pipe:")


@dataclass(frozen=True, slots=True, kw_only=True)
class Abandonment:
    """The verdict on one server's stdio: abandoned, on which evidence, and why in words."""

    abandoned: bool
    evidence: str | None
    detail: str


def _role(index: int, count: int) -> str:
    if count == len(_ROLES):
        return _ROLES[index]
    return f"stdio {index}"


def judge_abandoned(ends: Sequence[EndState]) -> Abandonment:
    """Abandoned only when there is at least one end and every end is released (True);
    the detail names every end on a yes, and the first end that keeps it on a no."""
    if not ends:
        return Abandonment(abandoned=False, evidence=None, detail="its stdio could not be found")
    words = [f"{_role(i, len(ends))} {e.link or '?'}: {e.why}" for i, e in enumerate(ends)]
    for index, end in enumerate(ends):
        if end.released is not True:
            return Abandonment(abandoned=False, evidence=None, detail=words[index])
    evidence = STDIO_ABANDONED_PIPE if any(e.pipe for e in ends) else STDIO_ABANDONED
    return Abandonment(abandoned=True, evidence=evidence, detail="; ".join(words))
