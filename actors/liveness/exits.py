"""Incarnations whose exit a pidfd observed, and whether a watch on their pid still vouches."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping

from supervisor.policy.evidence import PidEvidence
from supervisor.policy.incarnation import same_incarnation, start_of, told_apart

__all__ = ["ExitedIncarnations"]


class ExitedIncarnations:
    """(pid, start) of every incarnation a pidfd saw exit -> its whole token -> identities.

    Keyed by the start, as a probe reads it from ``/proc/<pid>/stat``; the token (the start
    and, where the kernel gives one, the pidfd's inode) tells apart two processes that got
    one pid within one clock tick.
    """

    __slots__ = ("_by_start",)

    def __init__(self) -> None:
        self._by_start: dict[tuple[int, str], dict[str, set[str]]] = {}

    @property
    def by_start(self) -> Mapping[tuple[int, str], Collection[str]]:
        """(pid, start) -> the tokens of the exited incarnations of that start."""
        return self._by_start

    def add(self, pid: int, token: str, identity: str) -> None:
        tokens = self._by_start.setdefault((pid, start_of(token)), {})
        tokens.setdefault(token, set()).add(identity)

    def forget(self, pid: int, token: str, identity: str) -> None:
        """Drop ``identity``'s part in that exit (its row is no longer active)."""
        key = (pid, start_of(token))
        tokens = self._by_start.get(key)
        identities = tokens.get(token) if tokens is not None else None
        if tokens is None or identities is None:
            return
        identities.discard(identity)
        if not identities:
            del tokens[token]
        if not tokens:
            del self._by_start[key]

    def clear(self) -> None:
        self._by_start.clear()

    def vouching(
        self,
        vouched: Mapping[int, PidEvidence],
        not_vouched: set[int],
        watch_token: Callable[[int], str | None],
    ) -> Mapping[int, PidEvidence]:
        """``vouched`` past the exits: a watch on a pid where an incarnation of its start
        exited vouches only when the tokens tell the two apart, and then answers with its
        own whole token, so a row of the exited one is judged by it; otherwise its pid
        joins ``not_vouched`` and is probed. ``watch_token`` gives the vouching watch's."""
        named: dict[int, PidEvidence] = {}
        for (pid, start), gone in self._by_start.items():
            held = vouched.get(pid)
            if held is None or held.start_time != start:
                continue
            token = watch_token(pid)
            if token is None or any(
                not told_apart(token, g) or same_incarnation(token, g) for g in gone
            ):
                not_vouched.add(pid)
            else:
                named[pid] = PidEvidence(alive=True, start_time=token)
        return {**vouched, **named} if named else vouched
