"""ProbeNow's answer: fresh evidence per pid, from open exit watches, one /proc listing, or stat."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence, Set
from dataclasses import dataclass

from supervisor.policy.evidence import UNKNOWN, PidEvidence
from supervisor.policy.incarnation import same_incarnation, start_of, told_apart
from supervisor.system.probes import ProcessEvidence

__all__ = ["NO_SHORTCUTS", "ProbeShortcuts", "answer", "reuse"]

#: Below this many unwatched pids, probing each is cheaper than listing /proc.
_LISTING_THRESHOLD = 16
#: Listing /proc costs about an eighth of a failed probe per process it lists, and every
#: vouched pid is a process it will list: with fewer unwatched pids than that, probe them.
_LISTING_COST_RATIO = 8


@dataclass(frozen=True, slots=True, kw_only=True)
class ProbeShortcuts:
    """What may stand in for a probe, only where it gives the probe's own answer.

    ``watches_vouch``: an exit watch that has not fired proves its incarnation alive,
    which is what the probe backend would report for it. True only for real pidfds
    opened on a verified start time, judged by the stat reads of this very /proc.
    ``listing``: every pid present now, or None when the listing cannot be trusted;
    a pid missing from it is one the probe backend would call dead.
    """

    watches_vouch: bool = False
    listing: Callable[[], Set[int] | None] | None = None


NO_SHORTCUTS = ProbeShortcuts()

# One shared object per start-less answer: equal evidence is then the same object in
# every answer without comparing against the previous one.
_START_LESS = {
    True: PidEvidence(alive=True, start_time=None),
    False: PidEvidence(alive=False, start_time=None),
    None: UNKNOWN,
}
_ABSENT = _START_LESS[False]


def reuse(
    previous: Mapping[int, PidEvidence], pid: int, alive: bool | None, start_time: str | None
) -> PidEvidence:
    """The evidence object for this answer: ``previous``'s own where its value is the same."""
    if start_time is None:
        return _START_LESS[alive]
    seen = previous.get(pid)
    if seen is None or seen.alive is not alive or seen.start_time != start_time:
        return PidEvidence(alive=alive, start_time=start_time)
    return seen


def answer(
    pids: Iterable[int],
    *,
    vouched: Mapping[int, PidEvidence],
    not_vouched: Collection[int],
    exited: Mapping[tuple[int, str], Collection[str]],
    listing: Callable[[], Set[int] | None] | None,
    probe: Callable[[int], ProcessEvidence],
    identify: Callable[[int], ProcessEvidence],
    probe_many: Callable[[Sequence[int]], list[ProcessEvidence]],
    previous: Mapping[int, PidEvidence],
) -> dict[int, PidEvidence]:
    """Evidence per distinct pid, as fresh as a probe made now, reusing ``previous``'s objects.

    ``vouched`` maps a pid to the evidence of the incarnation an unfired exit watch holds,
    except the pids in ``not_vouched`` (their watch fired, or saw that incarnation exit).
    ``exited`` maps (pid, start) to the tokens of incarnations a watch saw exit. A probe that
    finds that pid alive with that start is settled by ``identify`` (see ``_settle``).
    """
    wanted = set(pids)
    fast = vouched.keys() & wanted
    if not_vouched:
        fast -= set(not_vouched)
    # Not readable, so not exited, so not reaped: each pid still names the process its
    # watch was opened on, which a probe would find running with the verified start time.
    evidence = {pid: vouched[pid] for pid in fast}
    rest = wanted - fast if fast else wanted
    if not rest:
        return evidence
    observed: list[ProcessEvidence]
    if listing is None:
        observed = probe_many(sorted(rest))
    elif len(rest) < max(_LISTING_THRESHOLD, len(vouched) // _LISTING_COST_RATIO):
        # One by one: a backend's probe_many may list /proc itself, for these few pids.
        observed = [probe(pid) for pid in sorted(rest)]
    elif (present := listing()) is None:
        observed = probe_many(sorted(rest))
    else:
        absent = rest - present
        if absent and min(absent) <= 0:
            absent = {pid for pid in absent if pid > 0}
        # Absent from a complete listing: what the probe would say, without its failed
        # open and kill(2) per pid.
        evidence.update(dict.fromkeys(absent, _ABSENT))
        observed = [probe(pid) for pid in sorted(rest - absent)]
    for seen in observed:
        alive, start_time = seen.alive, seen.start_time
        if alive and start_time is not None and (gone := exited.get((seen.pid, start_time))):
            alive, start_time = _settle(identify(seen.pid), start_time, gone)
        evidence[seen.pid] = reuse(previous, seen.pid, alive, start_time)
    return evidence


def _settle(
    now: ProcessEvidence, start: str, gone: Collection[str]
) -> tuple[bool | None, str | None]:
    """A live pid with the start of an incarnation whose exit a watch saw: which is it?

    ``now`` identifies the pid's process afresh (its pidfd inode where the kernel has
    them). An exited token it cannot be told apart from is ambiguity, answered "cannot
    tell": the exited process (a probe racing its exit, one that cannot see zombies) or
    another that got the pid within the same clock tick, which must never be called dead.
    """
    token = now.start_time
    if not now.alive or token is None or start_of(token) != start:
        return now.alive, token  # gone, unreadable, or yet another process since
    if any(not told_apart(token, g) for g in gone):
        return None, None
    if any(same_incarnation(token, g) for g in gone):
        return False, token  # that very process, whose exit was observed
    return True, token
